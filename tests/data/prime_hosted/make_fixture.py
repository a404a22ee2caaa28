"""Write the Prime Intellect hosted-training fixture: a page of samples and a Parquet sample file.

    /work/main/.venv/bin/python tests/data/prime_hosted/make_fixture.py   (needs pyarrow only)

The samples are written by prime-rl's ``PrimeMonitor.log_samples``
(``src/prime_rl/utils/monitor/prime.py``). prime-rl is not published on PyPI, so its code path is
transcribed here line for line, from two commits:

* ``rollouts_step_10.json``: PrimeIntellect-ai/prime-rl@9fb81eabe9ba5310d8e56b25cd9e38d1c4dffbc7
  ``log_samples`` builds one sample dict per verifiers ``RolloutOutput`` (``_sample_b``: step,
  example_id, prompt, completion, trajectory turns without token arrays, reward, advantage,
  answer, task, info, metrics, timing), the OpenAI-shaped messages as objects; the page is what
  ``prime train rollouts RUN_ID --step 10`` prints (prime 0.18.0, ``prime_cli/api/rl.py``
  ``RLClient.get_rollouts`` and ``prime_cli/utils/display.py`` ``output_data_as_json``:
  ``json.dumps({run_id, samples, total, page, limit, total_pages}, indent=2)``).
* ``step_20.parquet``: PrimeIntellect-ai/prime-rl@004274ec964f016ec9b17b5ae990a4b535314ff1
  ``_rollouts_to_parquet_bytes`` writes one row per rollout with ``_SAMPLE_SCHEMA`` (copied below),
  the messages as verifiers 0.4.0's ``Message.model_dump(mode="json")`` gives them (flat tool
  calls ``{id, type, name, namespace, arguments}``, ``None`` fields kept) and the JSON columns
  through ``json.dumps``; ``pq.write_table(..., compression="snappy", use_dictionary=True,
  write_statistics=True)``.

The run is a small coding-agent run: two repository-repair problems, groups of four rollouts at
steps 10 and 20, tools ``bash`` (whose output opens with ``<returncode>N</returncode>`` as the
environment's shell tool reports it), ``str_replace_editor`` and ``think``. The reward is
``0.9 * tests_passed + 0.1 * format_ok`` (the ``metrics``) and the advantage is the reward minus
its group's mean, as the orchestrator computed it. Everything is fixed so the output does not change.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
RUN_ID = "cmhx4k2pq0007ra01swefix9"
ENV_NAME = "swe-repair"
CREATED_AT = datetime(2026, 3, 2, 14, 5, 0, tzinfo=timezone.utc)

_SAMPLE_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("step", pa.int64()),
        ("tag", pa.string()),
        ("problem_id", pa.int64()),
        ("sample_id", pa.int64()),
        ("prompt", pa.string()),
        ("completion", pa.string()),
        ("trajectory", pa.string()),
        ("answer", pa.string()),
        ("env_name", pa.string()),
        ("task", pa.string()),
        ("info", pa.string()),
        ("reward", pa.float64()),
        ("advantage", pa.float64()),
        ("metrics", pa.string()),
        ("timing", pa.string()),
        ("num_input_tokens", pa.int64()),
        ("num_output_tokens", pa.int64()),
        ("created_at", pa.timestamp("us", tz="UTC")),
    ]
)

SYSTEM = "You are a software engineer in a repository at /repo. Use the tools to fix the issue, then reply DONE."
PROBLEMS = {
    17: ("utils/pages.py", "tests/test_pages.py", "paginate(items, page, size) drops the last item of every page."),
    42: ("utils/duration.py", "tests/test_duration.py", "parse_duration('1h30m') returns 3600 instead of 5400."),
}


def bash(command: str, code: int, output: str) -> tuple[str, dict, str]:
    return "bash", {"command": command}, f"<returncode>{code}</returncode>\n<output>\n{output}</output>"


def view(path: str, text: str) -> tuple[str, dict, str]:
    return "str_replace_editor", {"command": "view", "path": f"/repo/{path}"}, text


def edit(path: str, old: str, new: str) -> tuple[str, dict, str]:
    return ("str_replace_editor", {"command": "str_replace", "path": f"/repo/{path}", "old_str": old, "new_str": new},
            f"The file /repo/{path} has been edited.")


def think(thought: str) -> tuple[str, dict, str]:
    return "think", {"thought": thought}, "Your thought has been logged."


def turns(problem: int, style: str) -> tuple[list[tuple[str, list]], str, float, float]:
    """The assistant turns of one rollout (text, calls), its answer and its two scores."""
    source, tests, _ = PROBLEMS[problem]
    module = source.removesuffix(".py").replace("/", ".")
    failing = bash(f"pytest -q {tests}", 1, f"F.\nFAILED {tests}::test_last_page - AssertionError\n1 failed, 1 passed\n")
    passing = bash(f"pytest -q {tests}", 0, "..\n2 passed\n")
    old, new = ("items[start:end - 1]", "items[start:end]") if problem == 17 else ("hours * 3600", "hours * 3600 + minutes * 60")
    if style == "fix":
        return [("Let me reproduce the failure first.", [failing]),
                ("", [view(source, f"def f():\n    return {old}\n")]),
                ("The slice is wrong; fix it.", [edit(source, old, new)]),
                ("", [passing])], "DONE: fixed and the tests pass.", 1.0, 1.0
    if style == "probe":
        return [("", [think("I should check the behaviour directly before editing.")]),
                ("", [bash(f'python -c "import {module}; print({module}.__name__)"', 0, f"{module}\n")]),
                ("", [edit(source, old, new.replace("60", "6"))]),
                ("", [failing])], "DONE", 0.0, 1.0
    if style == "view":
        return [("I will read the code.", [view(source, f"def f():\n    return {old}\n")])], \
            "The code looks correct to me.", 0.0, 0.0
    return [("", [think("Maybe the tests are wrong."), think("Or the issue is elsewhere.")]),
            ("", [passing])], "DONE: the tests already pass.", 0.0, 1.0


def messages(problem: int, style: str, call_shape: str) -> tuple[list[dict], list[dict], str, dict]:
    """The prompt, the completion messages, the answer and the metrics of one rollout.

    ``call_shape`` is ``openai`` (the older samples: ``{id, type, function: {name, arguments}}``)
    or ``verifiers`` (verifiers 0.4.0 ``ToolCall.model_dump``: ``{id, type, name, namespace,
    arguments}`` with the message's ``None`` fields kept)."""
    _, _, issue = PROBLEMS[problem]
    prompt = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"Issue: {issue}"}]
    script, answer, passed, format_ok = turns(problem, style)
    completion: list[dict] = []
    number = 0
    for text, calls in script:
        tool_calls, results = [], []
        for name, arguments, output in calls:
            call_id = f"call_{number}"
            number += 1
            if call_shape == "openai":
                tool_calls.append({"id": call_id, "type": "function",
                                   "function": {"name": name, "arguments": json.dumps(arguments)}})
                results.append({"role": "tool", "content": output, "tool_call_id": call_id})
            else:
                tool_calls.append({"id": call_id, "type": "function", "name": name, "namespace": None,
                                   "arguments": json.dumps(arguments)})
                results.append({"role": "tool", "tool_call_id": call_id, "content": output, "name": None})
        assistant = {"role": "assistant", "content": text, "tool_calls": tool_calls}
        if call_shape == "verifiers":
            assistant = {"role": "assistant", "content": text, "reasoning_content": None, "tool_calls": tool_calls,
                         "provider_state": None}
        completion += [assistant, *results]
    final = {"role": "assistant", "content": answer}
    if call_shape == "verifiers":
        final = {**final, "reasoning_content": None, "tool_calls": None, "provider_state": None}
    completion.append(final)
    return prompt, completion, answer, {"tests_passed": passed, "format_ok": format_ok}


def tokens(messages: list[dict]) -> int:
    return sum(len(json.dumps(m)) // 4 for m in messages)


def group(problem: int, styles: list[str], call_shape: str) -> list[dict]:
    """One group's rollouts, each with its reward and group-centred advantage."""
    rollouts = []
    for style in styles:
        prompt, completion, answer, metrics = messages(problem, style, call_shape)
        reward = 0.9 * metrics["tests_passed"] + 0.1 * metrics["format_ok"]
        rollouts.append({"example_id": problem, "prompt": prompt, "completion": completion, "answer": answer,
                         "metrics": metrics, "reward": reward})
    mean = sum(r["reward"] for r in rollouts) / len(rollouts)
    for rollout in rollouts:
        rollout["advantage"] = rollout["reward"] - mean
    return rollouts


def _sample_b(rollout: dict, step: int) -> dict:
    """prime-rl@9fb81eab ``log_samples``: the sample of one ``RolloutOutput``."""
    # the rollout's trajectory: one step per model call, its prompt the conversation before the
    # call and its completion the model's message; the token counts are those of the step's
    # prompt_ids and completion_ids
    trajectory_data, history = [], list(rollout["prompt"])
    for message in rollout["completion"]:
        if message["role"] == "assistant":
            trajectory_data.append({
                "prompt": list(history),
                "completion": [message],
                "reward": None,
                "advantage": None,
                "extras": {},
                "num_input_tokens": tokens(history),
                "num_output_tokens": tokens([message]),
            })
        history.append(message)
    return {
        "step": step,
        "example_id": rollout["example_id"],
        "prompt": rollout["prompt"],
        "completion": rollout["completion"],
        "trajectory": trajectory_data,
        "reward": rollout["reward"],
        "advantage": rollout["advantage"],
        "answer": "",
        "task": "default",
        "info": {},
        "metrics": rollout["metrics"],
        "timing": {"generation_ms": 8123.0, "scoring_ms": 912.0, "total_ms": 9035.0},
    }


def _rows_a(rollouts: list[dict], step: int) -> list[dict]:
    """prime-rl@004274ec ``_rollouts_to_parquet_bytes``: one row per rollout, one branch each."""
    rows = []
    for sample_id, rollout in enumerate(rollouts):
        main_messages = rollout["prompt"] + rollout["completion"]
        prompt_len = tokens(rollout["prompt"])
        completion_len = tokens(rollout["completion"])
        trajectory_data = [{"messages": main_messages, "reward": rollout["reward"], "advantage": rollout["advantage"],
                            "num_input_tokens": prompt_len, "num_output_tokens": completion_len}]
        problem_id = rollout["example_id"]
        rows.append({
            "run_id": RUN_ID,
            "step": step,
            "tag": "",
            "problem_id": problem_id,
            "sample_id": sample_id,
            "prompt": "",
            "completion": json.dumps(main_messages),
            "trajectory": json.dumps(trajectory_data),
            "answer": "",
            "env_name": ENV_NAME,
            "task": json.dumps({"type": "Task", "idx": problem_id, "data": {"prompt": rollout["prompt"][-1]["content"]}}),
            "info": json.dumps({}),
            "reward": rollout["reward"],
            "advantage": rollout["advantage"],
            "metrics": json.dumps(rollout["metrics"]),
            "timing": json.dumps({"start": 0.0, "agent": {"start": 0.0, "end": 8.1}, "scoring": {"start": 8.1, "end": 9.0}}),
            "num_input_tokens": prompt_len,
            "num_output_tokens": completion_len,
            "created_at": CREATED_AT,
        })
    return rows


def main() -> None:
    styles = {17: ["fix", "probe", "view", "fix"], 42: ["think", "fix", "probe", "view"]}
    step_10 = [_sample_b(r, 10) for problem, s in styles.items() for r in group(problem, s, "openai")]
    page = {"run_id": RUN_ID, "samples": step_10, "total": len(step_10), "page": 1, "limit": 100, "total_pages": 1}
    (HERE / "rollouts_step_10.json").write_text(json.dumps(page, indent=2, default=str) + "\n")

    later = {17: ["fix", "fix", "probe", "fix"], 42: ["fix", "think", "fix", "view"]}
    rollouts = [r for problem, s in later.items() for r in group(problem, s, "verifiers")]
    table = pa.Table.from_pylist(_rows_a(rollouts, 20), schema=_SAMPLE_SCHEMA)
    pq.write_table(table, HERE / "step_20.parquet", compression="snappy", use_dictionary=True, write_statistics=True)


if __name__ == "__main__":
    main()
