"""Ingest speed and memory: trajlens against a plain json + Python-loop loader.

Generates one large run (default 10,000 trajectories x 50 tool calls = 500,000 calls) twice:
as a canonical Parquet run directory and as JSONL (one trajectory a line, tool calls nested),
the way many training pipelines log. Then, each in a fresh process so peak memory is its own:

- ``trajlens``: ``trajlens.ingest([run_dir], store)``: schema checks, whole-run key checks,
  partitioned Parquet and the DuckDB views;
- ``baseline``: ``json.loads`` per line, a Python loop building row dicts, ``pa.Table.from_pylist``
  and one Parquet file per table, with no checks at all.

Usage: python benchmarks/bench_ingest.py [--trajectories 10000] [--calls 50]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

COMMANDS = np.array([
    "cd /testbed && python -m pytest tests/ -x -q 2>&1 | tail -20",
    "grep -rn 'def parse' src/ | head",
    "sed -i 's/foo/bar/' src/module.py",
    "cat src/module.py",
    "python -c 'import module; print(module.parse(1))'",
    "pytest tests/test_module.py::test_parse -q",
    "ls -la src",
])


def generate(directory: Path, trajectories: int, calls: int, steps: int = 100) -> tuple[Path, Path]:
    from trajlens.schema import SCHEMAS
    from trajlens.store.layout import RunDirWriter

    rng = np.random.default_rng(0)
    run_dir, jsonl = directory / "run", directory / "run.jsonl"
    runs = pa.Table.from_pylist([{"run_id": "big", "name": "big", "estimator": "grpo", "config": "{}",
                                  "source_format": "bench", "source": "generated"}], schema=SCHEMAS["runs"])
    per_step = trajectories // steps
    with RunDirWriter(run_dir, runs) as writer, jsonl.open("w") as lines:
        for step in range(steps):
            ids = [f"{step}-{i}" for i in range(per_step)]
            rewards = rng.random(per_step)
            trajectory_rows = {
                "run_id": ["big"] * per_step, "step": [step] * per_step, "trajectory_id": ids,
                "group_id": [f"{step}:{i // 8}" for i in range(per_step)], "task_id": [str(i // 8) for i in range(per_step)],
                "split": ["train"] * per_step, "reward": rewards,
                "reward_channels": [[{"name": "correct", "value": float(r)}] for r in rewards],
                "resolved": rewards > 0.5, "exit_status": ["submitted"] * per_step,
                "num_turns": [calls] * per_step, "model_tokens": [calls * 80] * per_step,
                "observation_tokens": [calls * 200] * per_step, "reasoning_tokens": [None] * per_step,
                "source": [None] * per_step,
            }
            writer.write_step("trajectories", pa.Table.from_pydict(trajectory_rows, schema=SCHEMAS["trajectories"]))
            n = per_step * calls
            commands = COMMANDS[rng.integers(0, len(COMMANDS), n)]
            call_rows = {
                "run_id": ["big"] * n, "step": [step] * n, "trajectory_id": np.repeat(ids, calls),
                "call_index": np.tile(np.arange(calls, dtype=np.int32), per_step),
                "turn": np.tile(np.arange(calls, dtype=np.int32), per_step),
                "tool_name": ["bash"] * n, "arguments": [json.dumps({"command": c}) for c in commands],
                "command": commands, "observation": ["ok\n" * 5] * n, "return_code": np.zeros(n, dtype=np.int32),
                "token_start": [None] * n, "token_end": [None] * n, "format_error": np.zeros(n, dtype=bool),
            }
            table = pa.Table.from_pydict(call_rows, schema=SCHEMAS["tool_calls"])
            writer.write_step("tool_calls", table)
            grouped = table.select(["command", "observation", "return_code"]).to_pylist()
            for i in range(len(ids)):
                record = {key: (value[i].item() if hasattr(value[i], "item") else value[i])
                          for key, value in trajectory_rows.items() if key not in ("run_id",)}
                record["tool_calls"] = grouped[i * calls:(i + 1) * calls]
                lines.write(json.dumps(record) + "\n")
    return run_dir, jsonl


def run_trajlens(run_dir: str, store: str) -> None:
    import trajlens

    trajlens.ingest([run_dir], store)


def run_baseline(jsonl: str, out: str) -> None:
    import pyarrow.parquet as pq

    trajectories, calls = [], []
    with open(jsonl) as lines:
        for line in lines:
            record = json.loads(line)
            for index, call in enumerate(record.pop("tool_calls")):
                calls.append({"run_id": "big", "step": record["step"], "trajectory_id": record["trajectory_id"],
                              "call_index": index, "turn": index, "tool_name": "bash",
                              "arguments": json.dumps({"command": call["command"]}), **call})
            trajectories.append({"run_id": "big", **record})
    Path(out).mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(trajectories), f"{out}/trajectories.parquet")
    pq.write_table(pa.Table.from_pylist(calls), f"{out}/tool_calls.parquet")


def measure(kind: str, source: Path, out: Path) -> tuple[float, float]:
    """Run one loader in a fresh process; return (seconds, peak RSS in MiB)."""
    code = (
        "import resource, sys, time; sys.path.insert(0, %r); import bench_ingest as b; t = time.perf_counter(); "
        "b.run_%s(%r, %r); print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)"
        % (str(Path(__file__).parent), kind, str(source), str(out))
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    seconds, peak = done.stdout.split()
    return float(seconds), float(peak)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trajectories", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=50, help="tool calls per trajectory")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        started = time.perf_counter()
        run_dir, jsonl = generate(scratch, args.trajectories, args.calls)
        total = args.trajectories // 100 * 100 * args.calls
        print(f"generated {total:,} tool calls in {time.perf_counter() - started:.1f} s "
              f"(Parquet {sum(f.stat().st_size for f in run_dir.rglob('*.parquet')) / 2**20:.0f} MiB, "
              f"JSONL {jsonl.stat().st_size / 2**20:.0f} MiB)")
        ours = measure("trajlens", run_dir, scratch / "store")
        base = measure("baseline", jsonl, scratch / "baseline")
    print(f"{'loader':<10} {'seconds':>8} {'calls/s':>12} {'peak MiB':>9}")
    for name, (seconds, peak) in (("trajlens", ours), ("baseline", base)):
        print(f"{name:<10} {seconds:8.2f} {total / seconds:12,.0f} {peak:9.0f}")
    print(f"speed: trajlens is {base[0] / ours[0]:.1f}x the baseline; peak memory {ours[1] / base[1]:.2f}x the baseline's")


if __name__ == "__main__":
    main()
