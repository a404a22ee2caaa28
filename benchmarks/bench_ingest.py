"""Ingest speed and memory: trajlens against a plain json + Python-loop loader.

    python benchmarks/bench_ingest.py                        # 10,000 trajectories x 50 calls
    python benchmarks/bench_ingest.py --trajectories 4000    # the quick size (200,000 calls)

Generates one run (default 10,000 trajectories x 50 tool calls = 500,000 calls, 100 trajectories
a step) twice: as a canonical Parquet run directory and as JSONL (one trajectory a line, tool
calls nested), the way many training pipelines log. Then, each in a fresh process so that peak
memory is its own, and each after one warm-up load of a 100-trajectory run (so that importing a
loader's libraries is neither its time nor its memory), the two loaders in turn, ``--repeats``
times (best of each kept):

- ``trajlens``: ``trajlens.ingest([run_dir], store)``: schema checks, whole-run key checks,
  partitioned Parquet and the DuckDB views;
- ``baseline``: ``json.loads`` per line, a Python loop building row dicts, ``pa.Table.from_pylist``
  and one Parquet file per table, with no checks at all.

Both are measured as the machine is and under a background load this script starts itself (one
spinning process per CPU, :mod:`_load`). Extra memory = peak RSS during the load (``VmHWM``, reset
with ``/proc/self/clear_refs``) - RSS before it.

Targets, in each condition (exit status 1 when one fails): trajlens loads at least 1.5x the
baseline's tool calls per second, with at most 0.8x its extra memory.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _load import condition  # noqa: E402
from _memory import release_free_memory, status_bytes  # noqa: E402
from _verdict import report_targets  # noqa: E402

SPEEDUP = 1.5
"""trajlens must load at least this many times the baseline's tool calls per second."""
MEMORY_SHARE = 0.8
"""... with at most this share of the baseline's extra memory."""

COMMANDS = np.array([
    "cd /testbed && python -m pytest tests/ -x -q 2>&1 | tail -20",
    "grep -rn 'def parse' src/ | head",
    "sed -i 's/foo/bar/' src/module.py",
    "cat src/module.py",
    "python -c 'import module; print(module.parse(1))'",
    "pytest tests/test_module.py::test_parse -q",
    "ls -la src",
])


def generate(directory: Path, trajectories: int, calls: int, per_step: int = 100) -> tuple[Path, Path]:
    from trajlens.schema import SCHEMAS
    from trajlens.store.layout import RunDirWriter

    rng = np.random.default_rng(0)
    run_dir, jsonl = directory / "run", directory / "run.jsonl"
    runs = pa.Table.from_pylist([{"run_id": "big", "name": "big", "estimator": "grpo", "config": "{}",
                                  "source_format": "bench", "source": "generated"}], schema=SCHEMAS["runs"])
    steps = max(1, trajectories // per_step)
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
            _fill_absent(trajectory_rows, "trajectories", per_step)
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
            _fill_absent(call_rows, "tool_calls", n)
            table = pa.Table.from_pydict(call_rows, schema=SCHEMAS["tool_calls"])
            writer.write_step("tool_calls", table)
            grouped = table.select(["command", "observation", "return_code"]).to_pylist()
            for i in range(len(ids)):
                record = {key: (value[i].item() if hasattr(value[i], "item") else value[i])
                          for key, value in trajectory_rows.items() if key not in ("run_id",)}
                record["tool_calls"] = grouped[i * calls:(i + 1) * calls]
                lines.write(json.dumps(record) + "\n")
    return run_dir, jsonl


def _fill_absent(rows: dict, table: str, count: int) -> None:
    """Null every optional column of ``table`` that ``rows`` does not set (the schema may grow)."""
    from trajlens.schema import SCHEMAS

    for field in SCHEMAS[table]:
        if field.name not in rows and field.nullable:
            rows[field.name] = [None] * count


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


def timed(kind: str, source: str, out: str, warm_source: str) -> dict:
    """One loader, in this process: seconds and peak extra RSS over the RSS with its libraries loaded.

    The loader first runs once on ``warm_source`` (a run of 100 trajectories, into a scratch
    output), so that importing its libraries counts as neither its time nor its memory.
    """
    load = run_trajlens if kind == "trajlens" else run_baseline
    load(warm_source, out + "-warm-up")
    release_free_memory()
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
    before = status_bytes("VmRSS")
    started = time.perf_counter()
    load(source, out)
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "extra_bytes": status_bytes("VmHWM") - before, "peak_bytes": status_bytes("VmHWM")}


def measure(kind: str, source: Path, out: Path, warm_source: Path) -> dict:
    """Run one loader in a fresh process (its own peak memory); see :func:`timed`."""
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(f"{out}-warm-up", ignore_errors=True)
    code = (
        "import json, sys; sys.path.insert(0, %r); sys.path.insert(0, %r); import bench_ingest as b; "
        "print(json.dumps(b.timed(%r, %r, %r, %r)))"
        % (str(ROOT), str(Path(__file__).parent), kind, str(source), str(out), str(warm_source))
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _best(runs: list[dict]) -> dict:
    """Fewest seconds and least extra memory over a loader's runs (each the run's own figure)."""
    return {key: min(run[key] for run in runs) for key in runs[0]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trajectories", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=50, help="tool calls per trajectory")
    parser.add_argument("--no-load", action="store_true", help="skip the run under added load")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each loader per condition, taken in turn")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        started = time.perf_counter()
        run_dir, jsonl = generate(scratch, args.trajectories, args.calls)
        (scratch / "warm").mkdir()
        warm_run_dir, warm_jsonl = generate(scratch / "warm", 100, 2)
        total = args.trajectories // 100 * 100 * args.calls
        print(f"generated {total:,} tool calls in {time.perf_counter() - started:.1f} s "
              f"(Parquet {sum(f.stat().st_size for f in run_dir.rglob('*.parquet')) / 2**20:.0f} MiB, "
              f"JSONL {jsonl.stat().st_size / 2**20:.0f} MiB)")
        for loaded in ([False] if args.no_load else [False, True]):
            with condition(loaded) as label:
                runs = [(measure("trajlens", run_dir, scratch / "store", warm_run_dir),
                         measure("baseline", jsonl, scratch / "baseline", warm_jsonl)) for _ in range(args.repeats)]
            ours, base = (_best([run[i] for run in runs]) for i in (0, 1))
            speed = base["seconds"] / ours["seconds"]
            memory = ours["extra_bytes"] / base["extra_bytes"]
            print(f"\n{label}")
            print(f"{'loader':<10} {'seconds':>8} {'calls/s':>12} {'extra MiB':>10} {'peak MiB':>9}")
            for name, figures in (("trajlens", ours), ("baseline", base)):
                print(f"{name:<10} {figures['seconds']:8.2f} {total / figures['seconds']:12,.0f} "
                      f"{figures['extra_bytes'] / 2**20:10.0f} {figures['peak_bytes'] / 2**20:9.0f}")
            print(f"trajlens: {speed:.2f}x the baseline's calls/s, {memory:.2f}x its extra memory")
            results += [(f"{label}: trajlens >= {SPEEDUP:g}x the baseline's calls/s", speed >= SPEEDUP),
                        (f"{label}: trajlens extra memory <= {MEMORY_SHARE:g}x the baseline's", memory <= MEMORY_SHARE)]
    print("extra = peak RSS while loading - RSS with the loader's libraries imported (fresh process each)")
    print()
    return report_targets(results)


if __name__ == "__main__":
    sys.exit(main())
