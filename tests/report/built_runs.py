"""Runs built by hand for report, viewer and browser tests: a long trajectory, degenerate token
arrays, and a store written from them through the real ingest path."""

from __future__ import annotations

from pathlib import Path

VAL_COMMAND = "make check"
COMMANDS = ("pytest -q", "python -c 'import mod'", "grep -rn foo .", "cat src/mod.py", "sed -i 's/a/b/' src/mod.py")


def built_run(run_id: str, *, steps: int = 3, per_step: int = 4, calls: int = 6, tokens_per_call: int = 5,
              mask: str = "normal", long_trajectory: tuple[int, int] | None = None, first_step: int = 1,
              split: str = "train", val_per_step: int = 0, commands: tuple[str, ...] = COMMANDS):
    """A GAE-style run (token arrays with critic values). ``mask``: 'normal', 'all_false' or
    'empty'. ``long_trajectory=(calls, tokens)`` makes trajectory 0 of the last step that long;
    ``split`` is every trajectory's split, save ``val_per_step`` more per step of split 'val'
    (ids ``v{step}-t{member}``), all resolved and all their commands ``VAL_COMMAND``; the other
    calls run ``commands`` in turn."""
    from trajlens.rows import RunBuilder

    builder = RunBuilder(run_id, estimator="gae", config={}, source_format="test", source=run_id)
    for step in range(first_step, first_step + steps):
        members = [(split, "s", m) for m in range(per_step)] + [("val", "v", m) for m in range(val_per_step)]
        for split_of, prefix, member in members:
            validation = prefix == "v"
            n_calls, span = calls, tokens_per_call
            if long_trajectory and step == first_step + steps - 1 and member == 0 and not validation:
                n_calls, total = long_trajectory
                span = total // n_calls
            reward = 1.0 if validation else float((step + member) % 2)
            call_rows, mask_row = [], []
            for index in range(n_calls):
                think = (index + member) % 4 == 3
                command = VAL_COMMAND if validation else commands[(index + step + member) % len(commands)]
                start = len(mask_row)
                mask_row += [True] * span + [False] * 2
                call_rows.append({
                    "turn": index, "tool_name": "think" if think else "bash",
                    "arguments": '{"thought": "hm"}' if think else '{"command": "%s"}' % command.replace('"', ""),
                    "command": None if think else command,
                    "observation": "ok\n" * (3 if index % 7 else 400), "return_code": None if think else index % 2,
                    "token_start": start, "token_end": start + span,
                })
            length = len(mask_row)
            if mask == "all_false":
                mask_row = [False] * length
            elif mask == "empty":
                mask_row, length = [], 0
            builder.add_trajectory(
                {"step": step, "split": split_of, "trajectory_id": f"{prefix}{step}-t{member}",
                 "group_id": f"{prefix}{step}-t{member}",
                 "task_id": f"task{member}", "reward": reward, "reward_channels": [], "resolved": bool(reward),
                 "exit_status": "submitted", "model_tokens": n_calls * span, "observation_tokens": 2 * n_calls},
                call_rows,
                {"response_mask": mask_row, "values": [0.1] * length,
                 "token_rewards": [0.0] * (length - 1) + [reward] if length else [], "log_probs": None},
                where=f"{run_id}: record {step}/{member}",
            )
        builder.add_metric(step, "critic/vf_explained_var", 0.1)
    return builder.build()


def degenerate_store(store: Path, steps: int, *, run_id: str = "degenerate", mask: str = "normal",
                     chunk: int = 500) -> Path:
    """A store holding one run of ``steps`` steps, each one tiny trajectory (two tool calls of
    three model tokens), written through the store's writer ``chunk`` steps at a time (memory
    that of a chunk, each file written once)."""
    from trajlens.store.writer import StoreWriter

    def part(first_step: int):
        return built_run(run_id, steps=min(chunk, steps - first_step + 1), per_step=1, calls=2, tokens_per_call=3,
                         mask=mask, first_step=first_step)

    first = part(1)
    with StoreWriter(store) as writer:
        with writer.stage(run_id, first.runs, f"generated:{run_id}") as stage:
            stage.write_run(first)
            for start in range(chunk + 1, steps + 1, chunk):
                stage.write_run(part(start))
        writer.publish()
    return store


def write_store(root: Path, runs) -> Path:
    """Write each run as a canonical run directory and ingest them all into ``root/store``."""
    import trajlens
    from trajlens.store.layout import RunDirWriter

    sources = []
    for run in runs:
        directory = root / "runs" / run.run_id
        with RunDirWriter(directory, run.runs) as writer:
            writer.write_run(run)
        sources.append(directory)
    trajlens.ingest(sources, root / "store")
    return root / "store"


def no_tool_run(run_id: str, *, steps: int = 8, groups: int = 4, group_size: int = 4):
    """An RL run without tools (math answers): groups of rollouts of one prompt, rewarded 0 or 1,
    most groups all right or all wrong (dead); each completion kept as the response text."""
    from trajlens.rows import RunBuilder

    builder = RunBuilder(run_id, estimator="grpo", config={}, source_format="test", source=run_id)
    for step in range(1, steps + 1):
        for group in range(groups):
            for member in range(group_size):
                # group 0 has both rewards; the others are dead: all 1 or all 0
                reward = float(member % 2) if group == 0 else float(group % 2)
                builder.add_trajectory(
                    {"step": step, "trajectory_id": f"s{step}-g{group}-m{member}", "group_id": f"s{step}-g{group}",
                     "task_id": f"task{group}", "reward": reward, "reward_channels": [], "resolved": None,
                     "model_tokens": 200 + 10 * member, "response_text": f"The answer is {member}."},
                    [], None, where=f"{run_id}: record {step}/{group}/{member}")
        builder.add_metric(step, "actor/entropy", 1.0 / step)
    return builder.build()
