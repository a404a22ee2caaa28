"""TRL ``GRPOTrainer`` output: the completions tables, with the trainer state's metrics.

With ``log_completions=True``, TRL's ``GRPOTrainer.log`` (huggingface/trl, read at v0.23-v0.25,
``trl/trainer/grpo_trainer.py``) writes one table per logging step::

    {output_dir}/completions/completions_{global_step:05d}.parquet

from ``pd.DataFrame({"step": [str(global_step)] * n, "prompt": ..., "completion": ...,
**rewards, "advantage": ...})``: one row per completion of the last generation batch, the
step as text, the prompt with the chat template applied, one column per reward function
(NaN where the function does not apply to the row), and the advantage TRL trained with.
``transformers.Trainer`` keeps the logged scalars in ``{output_dir}/trainer_state.json`` (and a
copy in each ``checkpoint-*/``).

Mapping:

* ``step``: the ``step`` column (text of an integer, or an integer); ``split`` is ``val`` for
  tables under ``completions/eval/``, else ``train``.
* ``task_id``: the first 12 hex digits of the SHA-1 of the prompt. Groups are recovered the
  way TRL forms them: the completions of one prompt within one step (its sampler repeats each
  prompt ``num_generations`` times), ``group_id = "{step}:{task_id}"``. When the groups of a
  step differ in size, ``num_generations`` cannot be recovered from the table (a prompt drawn
  twice, or a batch cut short); the run's problems say so for that step (a note: its rows are kept).
* ``reward_channels``: one per reward-function column, NaN read as a missing value;
  ``reward``: their sum over the channels present, as TRL sums them: the float32 ``nansum`` of
  :func:`trajlens.estimators._trl.trl_weighted_sum` (what ``sum_then_normalize`` sums too) with
  TRL's default unit ``reward_weights`` (the weights are not in the output folder), so that two
  completions whose rewards tie in decimals but not in float32 (0.1 + 0.1 + 0.7 against
  0.1 + 0.7 + 0.1) get the advantages TRL gave them.
* ``logged_advantage``: the ``advantage`` column.
* tool calls and turns: read from the completion text like verl's dumps (Hermes
  ``<tool_call>`` blocks, :mod:`trajlens.ingest._chat_template`).
* step metrics: ``trainer_state.json`` of the output folder, else of its latest
  ``checkpoint-*`` (see :mod:`trajlens.ingest.metrics`), and the TensorBoard event files of
  ``runs/`` (``report_to="tensorboard"``; :mod:`trajlens.ingest.tensorboard`), whose tags
  carry transformers' ``train/`` and ``eval/`` prefixes (``train/loss`` beside the state's
  ``loss``). Without the ``tensorboard`` package the event files are left unread and the
  run's problems say so, unless they are the folder's only scalars (then it is an error).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

from trajlens.errors import InputError, Problem
from trajlens.ingest._chat_template import parse_response
from trajlens.ingest._fields import Fields
from trajlens.ingest._probe import Probe
from trajlens.ingest._unreadable import parquet_errors, reason
from trajlens.ingest.tools import shell_command
from trajlens.rows import TOOL_CALL, TRAJECTORY, RunBuilder, RunData

FORMAT = "trl"
TABLE_NAME = re.compile(r"completions_(\d+)\.parquet")
STANDARD_COLUMNS: frozenset[str] = frozenset({"step", "prompt", "completion", "advantage", "mode", "image", "images"})
"""Columns TRL writes itself; every other numeric column is a reward function's."""
TASK_ID_DIGITS = 12
TENSORBOARD_DIR = "runs"
"""Where ``TrainingArguments.logging_dir`` puts TensorBoard's event files by default
(``{output_dir}/runs/<date>_<host>/``)."""


def detect(target: Probe | Path | str) -> bool:
    """A TRL output folder (with ``completions/``), a ``completions`` folder, or one table."""
    path = Probe.of(target).path
    if path.is_file():
        return bool(TABLE_NAME.fullmatch(path.name))
    return path.is_dir() and bool(_tables(path))


def load_trl(paths: Sequence[Path | str] | Path | str, *, run_id: str | None = None, strict: bool = True) -> RunData:
    """Load TRL completions tables (an output folder, its ``completions/``, or table files) as one run."""
    from trajlens.store.writer import joined_source, slug

    roots = [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]
    tables: list[Path] = []
    for root in roots:
        found = [root] if root.is_file() else _tables(root)
        if not found:
            raise InputError(str(root), "no completions tables", expected="completions/completions_<step>.parquet",
                             found="none")
        tables.extend(found)
    output_dir = _output_dir(roots[0])
    builder = RunBuilder(run_id or slug(output_dir.name), source_format=FORMAT,
                         source=joined_source(roots))
    for table in tables:
        try:
            _load_table(table, builder, strict)
        except InputError as error:
            if strict:
                raise
            builder.skip(error)
    run = builder.build()
    if all(root.is_dir() for root in roots):
        _add_metrics(run, output_dir, strict)
    return run


def _add_metrics(run: RunData, output_dir: Path, strict: bool) -> None:
    """The output folder's scalars: ``trainer_state.json`` and TensorBoard's ``runs/``."""
    import pyarrow as pa

    from trajlens.errors import MissingDependencyError
    from trajlens.ingest import metrics, tensorboard

    state = _trainer_state(output_dir)
    if state is not None:
        loaded = metrics.load_metrics(state, run_id=run.run_id, strict=strict)
        run.step_metrics = pa.concat_tables([run.step_metrics, loaded.table])
        run.problems.extend(loaded.problems)
    events = tensorboard.event_files(output_dir / TENSORBOARD_DIR) if (output_dir / TENSORBOARD_DIR).is_dir() else []
    if not events:
        return
    try:
        scalars = tensorboard.load_tensorboard(events, run_id=run.run_id, strict=strict)
    except MissingDependencyError as error:
        if state is None:
            raise
        # trainer_state.json holds the same logged dicts; say what was left unread
        run.problems.append(Problem(str(output_dir / TENSORBOARD_DIR), None, None, f"not read: {error}"))
        return
    run.step_metrics = pa.concat_tables([run.step_metrics, scalars.table])
    run.problems.extend(scalars.problems)


def _load_table(path: Path, builder: RunBuilder, strict: bool) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from trajlens.ingest.parquet import check_text

    try:
        table = pq.read_table(path)
    except parquet_errors() as error:
        raise InputError(str(path), "not a readable Parquet table", expected="a TRL completions table",
                         found=reason(error)) from None
    check_text(table, path)
    for column in ("step", "prompt", "completion"):
        if column not in table.column_names:
            raise InputError(str(path), field=column, expected="a column of TRL's completions table",
                             found="no such column")
    channels = [name for name in table.column_names if name not in STANDARD_COLUMNS
                and (pa.types.is_floating(table.schema.field(name).type) or pa.types.is_integer(table.schema.field(name).type)
                     or pa.types.is_boolean(table.schema.field(name).type))]
    for name in table.column_names:  # TRL writes each reward function's column as numbers
        if name not in STANDARD_COLUMNS and name not in channels:
            builder.note(InputError(str(path), "not read as a reward channel", field=name,
                                    expected="numbers (a reward function's column)", found=str(table.schema.field(name).type)))
    split = "val" if path.parent.name == "eval" else "train"
    file_step = int(TABLE_NAME.fullmatch(path.name).group(1))  # type: ignore[union-attr]
    group_sizes: dict[int, Counter[str]] = {}
    rows = []
    for index, row in enumerate(table.to_pylist()):
        read = Fields(path, index)
        try:
            trajectory, calls = _row(row, index, channels, split, read)
            if trajectory["step"] != file_step:  # a table moved or renamed: its rows would land on another step
                raise read.error("step", f"{file_step} (the step in the file name)", str(trajectory["step"]))
            rows.append((index, trajectory, calls))
        except InputError as error:
            if strict:
                raise
            builder.skip(error)
    if len(channels) > 1:
        for (_, trajectory, _), reward in zip(rows, _trl_rewards([t["reward_channels"] for _, t, _ in rows])):
            trajectory["reward"] = reward
    for index, trajectory, calls in rows:
        builder.add_trajectory(trajectory, calls, where=f"{path}: record {index}")
        group_sizes.setdefault(trajectory["step"], Counter())[trajectory["group_id"]] += 1
    for step, sizes in group_sizes.items():
        if len(set(sizes.values())) > 1:
            builder.note(InputError(str(path), f"groups of step {step} differ in size, so num_generations cannot be "
                                    "recovered from the table; groups are the completions of one prompt",
                                    field="prompt", found=", ".join(str(n) for n in sorted(set(sizes.values())))))


def _row(row: dict[str, Any], index: int, channels: list[str], split: str, read: Fields):
    raw_step = row.get("step")
    step = int(raw_step) if isinstance(raw_step, str) and raw_step.isdigit() and len(raw_step) < 19 else raw_step
    step = read.integer({"step": step}, "step", required=True, bounds=(0, 2**63 - 1))
    prompt = read.text(row, "prompt", required=True)
    completion = read.text(row, "completion", required=True)
    values = []
    for name in channels:
        value = row.get(name)
        if isinstance(value, float) and math.isnan(value):
            value = None
        number = read.number({name: value}, name)
        values.append({"name": name, "value": number})
    present = [channel["value"] for channel in values if channel["value"] is not None]
    task_id = hashlib.sha1(prompt.encode("utf-8")).hexdigest()[:TASK_ID_DIGITS]
    parsed = parse_response(completion)
    prefix = "val-" if split == "val" else ""
    trajectory = TRAJECTORY(
        step=step,
        trajectory_id=f"{prefix}{step}-{index}",
        group_id=f"{'val:' if split == 'val' else ''}{step}:{task_id}",
        task_id=task_id,
        split=split,
        reward=sum(present) if present else None,
        reward_channels=values,
        num_turns=parsed.num_turns,
        logged_advantage=read.number(row, "advantage"),
        response_text=None if parsed.tool_calls else completion,
    )
    calls = [TOOL_CALL(turn=call.turn, tool_name=call.tool_name, arguments=call.arguments,
                       command=shell_command(call.tool_name, call.arguments_object), observation=call.observation,
                       format_error=call.format_error) for call in parsed.tool_calls]
    return trajectory, calls


def _trl_rewards(channel_rows: list[list[dict[str, Any]]]) -> list[float | None]:
    """Each row's reward as TRL sums its reward functions (float32 ``nansum``, unit weights); None
    where no function scored the row (TRL's unscorable completion)."""
    import torch

    from trajlens.estimators._trl import trl_weighted_sum

    if not channel_rows:
        return []
    nan = float("nan")
    values = torch.tensor([[nan if c["value"] is None else c["value"] for c in row] for row in channel_rows],
                          dtype=torch.float64)
    summed = trl_weighted_sum(values, torch.ones(values.shape[1], dtype=torch.float32), "trl")
    return [None if math.isnan(value) else value for value in summed.tolist()]


def _tables(directory: Path) -> list[Path]:
    """Completions tables of an output folder (``completions/``, ``completions/eval/``) or of a
    ``completions`` folder itself, in step order."""
    folders = [directory / "completions"] if (directory / "completions").is_dir() else [directory]
    folders += [folder / sub for folder in folders for sub in ("train", "eval") if (folder / sub).is_dir()]
    found = [path for folder in folders for path in folder.iterdir() if TABLE_NAME.fullmatch(path.name)]
    return sorted(found, key=lambda p: (p.parent.name == "eval", int(TABLE_NAME.fullmatch(p.name).group(1)), str(p)))


def _output_dir(root: Path) -> Path:
    folder = root if root.is_dir() else root.parent
    while folder.name in ("completions", "train", "eval") and folder.parent != folder:
        folder = folder.parent
    return folder


def _trainer_state(output_dir: Path) -> Path | None:
    state = output_dir / "trainer_state.json"
    if state.is_file():
        return state
    checkpoints = [p for p in output_dir.glob("checkpoint-*") if re.fullmatch(r"checkpoint-\d+", p.name)]
    for checkpoint in sorted(checkpoints, key=lambda p: int(p.name.split("-")[1]), reverse=True):
        if (checkpoint / "trainer_state.json").is_file():
            return checkpoint / "trainer_state.json"
    return None


__all__ = ["FORMAT", "detect", "load_trl"]
