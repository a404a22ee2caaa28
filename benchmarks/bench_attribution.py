"""Benchmark: attribution streams by step, in bounded memory, and adds little to recomputation alone.

    python benchmarks/bench_attribution.py               # 200 steps x 64 x 30,000 tokens, 4 estimators
    python benchmarks/bench_attribution.py --steps 5     # the same shape, 5 steps (a quick check)
    python benchmarks/bench_attribution.py --work /tmp/trajlens-bench-recompute   # keep and reuse the run

Generates a single-rollout GAE run with critic values on every token (``trajlens.synth``,
scenario sao-r7, the run ``bench_recompute.py`` uses, and the same ``--work`` layout, so either
benchmark reuses the other's store) and ingests it; without ``--work`` both live in a temporary
folder that is removed at the end. Attribution writes its tables into a copy of the store, also
removed. Then, on the first quarter, half and all of the steps, each task in a fresh process
(so that its peak resident memory, ``VmHWM``, is its own; imports and compiled kernels are
loaded before the clock starts):

kernels
    the advantage kernels alone: step after step, read the step's trajectories and token arrays
    and compute the four estimators' token advantages as flat arrays
    (:func:`trajlens.run.step_advantages.step_advantages`, the kernels attribution itself
    uses: GAE on the compiled flat scan, REINFORCE as the same scan with the critic at zero),
    nothing else; a floor, printed for reference;
recompute
    recomputation alone, as trajlens recomputes a stored run step by step
    (:func:`trajlens.run.stepwise.gae_step`, what ``recompute_steps`` yields: one frame per
    step and estimator with each trajectory's advantages, token advantages and returns), with
    the same kernels and the same sharing of one scan between the raw and whitened labels;
attribution
    :func:`trajlens.attribution.attribute` with the same four estimators under verl's four
    aggregations, on the same steps: classification of every tool call, call credit, the
    ``call_credit`` table written step by step and ``class_credit`` into the store, class
    measures, length bias and drift attribution.

Prints wall and CPU seconds, CPU seconds per million tokens, peak resident memory and the ratio
of each task's CPU time to recompute's. CPU time (all threads of the process, user and system)
is the measure of cost: on a machine shared with other work, wall time measures the neighbours
as much as the task. Targets (exit status 1 exactly when one fails), meaningful at any ``--steps``:

- attribution CPU time at most ``--max-ratio`` (1.5) times recompute's, at the full size;
- attribution peak memory at most ``--max-peak-mb`` (1,500 MB) at every size;
- bounded memory: attribution's peak on all steps at most ``--max-growth`` (1.15) times its
  peak on the first half (memory that grew with the steps would double; the quarter is printed
  too, but at a few steps it is the first step, where allocators and compiled kernels warm up).

The machine may be shared: the figures are of one run each, under whatever else is running.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from _verdict import report_targets

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = "sao-r7"
ESTIMATORS = (
    ("gae_raw", "gae", {"gamma": 1.0, "lam": 1.0, "whiten": False}),
    ("gae_whitened", "gae", {"gamma": 1.0, "lam": 1.0, "whiten": True}),
    ("gae_lam95", "gae", {"gamma": 1.0, "lam": 0.95, "whiten": True}),
    ("reinforce", "reinforce", {"gamma": 1.0}),
)
MAX_RATIO = 1.5
MAX_PEAK_MB = 1500.0
MAX_GROWTH = 1.15


def build(work: Path, steps: int, batch: int, tokens: int, calls: int) -> Path:
    """The store (generated and ingested once per ``work`` folder, then reused)."""
    import trajlens
    from trajlens.synth import generate

    store = work / f"store-{steps}x{batch}x{tokens}"
    marker = store / ".bench-complete"
    if not marker.exists():
        run_dir = work / f"run-{steps}x{batch}x{tokens}"
        started = time.perf_counter()
        if not run_dir.exists():
            generate(SCENARIO, run_dir, steps=steps, batch=batch, tokens_per_trajectory=tokens,
                     tool_calls_per_trajectory=calls)
        generated = time.perf_counter() - started
        started = time.perf_counter()
        trajlens.ingest([run_dir], store)
        print(f"generated the run in {generated:.0f} s, ingested it in {time.perf_counter() - started:.0f} s")
        marker.write_text("ok\n")
    return store


def _peak_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def recomputations():
    from trajlens.estimators import EstimatorChoice

    return tuple(EstimatorChoice(label, estimator, options) for label, estimator, options in ESTIMATORS)


def task(kind: str, store_path: str, run_id: str, count: int) -> dict:
    """One measured task in this process: seconds, model and all tokens, peak RSS (MB)."""
    import numpy as np
    import polars as pl
    import pyarrow.compute as pc

    import torch  # noqa: F401
    import trajlens
    import trajlens.classify  # noqa: F401
    import trajlens.estimators  # noqa: F401
    import trajlens.estimators.flat  # noqa: F401
    from trajlens.attribution import attribute
    from trajlens.run.step_advantages import Shifted, align_tokens, step_advantages
    from trajlens.run.stepwise import TOKEN_COLUMNS, read_step, run_steps

    store = trajlens.open(store_path)
    steps = run_steps(store, run_id)[:count]
    recs = recomputations()
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM from here on
    started, cpu_started = time.perf_counter(), _cpu_seconds()
    tokens = 0
    if kind == "kernels":
        trajectories = (store.trajectories.filter((pl.col("run_id") == run_id) & (pl.col("split") == "train")
                                                  & pl.col("step").is_in(steps)).collect().sort("step", "trajectory_id"))
        for batch in trajectories.partition_by("step", maintain_order=True):
            table = read_step(store, run_id, "tokens", int(batch["step"][0]), TOKEN_COLUMNS)
            tokens += int(pc.sum(pc.list_value_length(table.column("response_mask"))).as_py() or 0)
            for advantages in step_advantages(batch, align_tokens(batch, table), recs, {}):
                if isinstance(advantages, Shifted):  # the whitened advantages, as a recomputation returns them
                    (advantages.base - np.float32(advantages.shift)) * np.float32(advantages.scale)
    elif kind == "recompute":
        from trajlens.run.step_advantages import _zero_values
        from trajlens.run.stepwise import gae_step, raw_gae

        trajectories = (store.trajectories.filter((pl.col("run_id") == run_id) & (pl.col("split") == "train")
                                                  & pl.col("step").is_in(steps)).collect().sort("step", "trajectory_id"))
        for batch in trajectories.partition_by("step", maintain_order=True):
            table = align_tokens(batch, read_step(store, run_id, "tokens", int(batch["step"][0]), TOKEN_COLUMNS))
            shared = {}
            for rec in recs:
                settings = rec.settings()
                lam = float(settings.get("lam", 1.0))
                key = (rec.estimator == "gae", float(settings["gamma"]), lam)
                if key not in shared:
                    source = table if rec.estimator == "gae" else _zero_values(table)  # REINFORCE: V = 0, lambda 1
                    shared[key] = (source, raw_gae(batch, source, gamma=key[1], lam=lam))
                source, raw = shared[key]
                gae_step(batch, source, whiten=bool(settings["whiten"]), raw=raw)
    else:
        attribute(store, run_id, recs, steps=steps)
    seconds, cpu = time.perf_counter() - started, _cpu_seconds() - cpu_started
    return {"kind": kind, "steps": len(steps), "seconds": seconds, "cpu": cpu, "tokens": tokens, "peak_mb": _peak_mb()}


def _cpu_seconds() -> float:
    """CPU time of this process so far, all its threads, user and system."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def in_fresh_process(kind: str, store: Path, run_id: str, count: int) -> dict:
    code = (f"import json, sys; sys.path[:0] = [{str(ROOT)!r}, {str(Path(__file__).parent)!r}]; "
            f"import bench_attribution as b; print(json.dumps(b.task({kind!r}, {str(store)!r}, {run_id!r}, {count})))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if done.returncode:
        sys.stderr.write(done.stderr)
        raise SystemExit(f"{kind} on {count} steps failed")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=30_000, help="tokens per trajectory")
    parser.add_argument("--calls", type=int, default=50, help="tool calls per trajectory")
    parser.add_argument("--work", type=Path, help="keep the generated run and store here, and reuse them")
    parser.add_argument("--max-ratio", type=float, default=MAX_RATIO)
    parser.add_argument("--max-peak-mb", type=float, default=MAX_PEAK_MB)
    parser.add_argument("--max-growth", type=float, default=MAX_GROWTH)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))

    import trajlens

    with ExitStack() as cleanup:
        scratch = Path(cleanup.enter_context(tempfile.TemporaryDirectory(prefix="bench-attribution-")))
        work = args.work or scratch
        work.mkdir(parents=True, exist_ok=True)
        source = build(work, args.steps, args.batch, args.tokens, args.calls)
        store = scratch / "store"
        shutil.copytree(source, store)  # attribution writes its tables here, not into a kept store
        run_id = trajlens.open(store).run_ids()[0]
        sizes = [("quarter", max(1, args.steps // 4)), ("half", max(1, args.steps // 2)), ("full", args.steps)]
        print(f"run {run_id}: {args.steps} steps x {args.batch} trajectories x ~{args.tokens:,} tokens; "
              f"estimators {', '.join(label for label, _, _ in ESTIMATORS)}; 4 aggregations")
        header = (f"{'size':<8}{'steps':>6}{'M tokens':>10}  {'task':<12}{'wall s':>8}{'CPU s':>8}{'CPU s/M':>9}"
                  f"{'x recompute':>13}{'peak MB':>9}")
        print(header)
        print("-" * len(header))
        measured = {}
        for name, count in sizes:
            kernels = in_fresh_process("kernels", store, run_id, count)
            base = in_fresh_process("recompute", store, run_id, count)
            done = in_fresh_process("attribution", store, run_id, count)
            measured[name] = (base, done, kernels)
            millions = kernels["tokens"] / 1e6
            for label, r in (("kernels", kernels), ("recompute", base), ("attribution", done)):
                print(f"{name:<8}{count:>6}{millions:>10.1f}  {label:<12}{r['seconds']:>8.1f}{r['cpu']:>8.1f}"
                      f"{r['cpu'] / millions:>9.4f}{r['cpu'] / base['cpu']:>12.2f}x{r['peak_mb']:>9.0f}")
    base, done, kernels = measured["full"]
    ratio = done["cpu"] / base["cpu"]
    peak = max(d["peak_mb"] for _, d, _ in measured.values())
    growth = done["peak_mb"] / measured["half"][1]["peak_mb"]
    print(f"\nattribution CPU time / the kernels alone at the full size: {done['cpu'] / kernels['cpu']:.2f}x")
    checks = [
        (f"attribution CPU time {ratio:.2f}x recompute's at the full size (target <= {args.max_ratio:g}x; wall "
         f"{done['seconds'] / base['seconds']:.2f}x)",
         ratio <= args.max_ratio),
        (f"attribution peak {peak:.0f} MB at any size (target <= {args.max_peak_mb:.0f} MB)", peak <= args.max_peak_mb),
        (f"attribution peak, all steps / first half: {growth:.2f} (target <= {args.max_growth:g}: memory that grew "
         "with the steps would double)", growth <= args.max_growth),
    ]
    print()
    return report_targets(checks)


if __name__ == "__main__":
    sys.exit(main())
