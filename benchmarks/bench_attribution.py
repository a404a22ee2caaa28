"""Benchmark: attribution streams by step, in bounded memory, and adds little to recomputation alone.

    python benchmarks/bench_attribution.py                 # 200 steps x 64 x 30,000 tokens, 4 estimators
    python benchmarks/bench_attribution.py --steps 10      # the same shape, 10 steps

Generates a single-rollout GAE run (``trajlens synth sao-r6`` at the given size, into a
temporary store), then times, each in a fresh process so that peak memory is its own:

baseline
    recomputation alone: for every step, read the step's trajectories and token arrays and
    recompute the four estimators with :func:`trajlens.estimators.recompute`;
attribution
    :func:`trajlens.attribution.attribute` with the same four estimators under verl's four
    aggregations: classification, call credit, ``call_credit``/``class_credit`` written to the
    store, class measures, length bias and drift attribution.

Prints seconds, peak resident memory (``VmHWM``) and cost per million tokens of both, and
their ratios. Targets (exit status 1 when one fails): attribution at most ``--max-ratio``
(default 2.0) times the baseline's time, and a peak memory at most ``--max-memory-mb``
(default 4,000 MB): memory depends on one step, not on the number of steps.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ESTIMATORS = (
    ("gae_raw", "gae", {"gamma": 1.0, "lam": 1.0, "whiten": False}),
    ("gae_whitened", "gae", {"gamma": 1.0, "lam": 1.0, "whiten": True}),
    ("gae_lam95", "gae", {"gamma": 1.0, "lam": 0.95, "whiten": True}),
    ("reinforce", "reinforce", {"gamma": 1.0}),
)


def peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _phase(name: str, store_path: str, run_id: str) -> dict:
    import polars as pl

    import trajlens

    store = trajlens.open(store_path)
    started = time.perf_counter()
    if name == "baseline":
        from trajlens.estimators import recompute

        from trajlens.store.layout import step_dir

        trajectories = store.trajectories.filter(pl.col("run_id") == run_id).collect()
        tokens_seen = 0
        for step in trajectories["step"].unique().sort().to_list():
            batch = trajectories.filter(pl.col("step") == step)
            # Read the step's partition by path, as attribution does, so both pay the same I/O.
            tokens = pl.read_parquet(sorted((store.path / "runs" / run_id / "tokens" / step_dir(step)).glob("*.parquet")))
            tokens_seen += int(tokens["response_mask"].list.len().sum())
            for _, estimator, options in ESTIMATORS:
                recompute(batch, tokens, estimator, **options)
    else:
        from trajlens.attribution import Recomputation, attribute

        recs = tuple(Recomputation(label, estimator, options, "values" if estimator == "gae" else "tokens")
                     for label, estimator, options in ESTIMATORS)
        attribute(store, run_id, recs)
        tokens_seen = int(store.sql("SELECT sum(len(response_mask)) AS n FROM tokens WHERE run_id = $run",
                                    {"run": run_id})["n"][0])
    return {"seconds": time.perf_counter() - started, "peak_mb": peak_rss_mb(), "tokens": tokens_seen}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=30_000, help="tokens per trajectory")
    parser.add_argument("--calls", type=int, default=40, help="tool calls per trajectory")
    parser.add_argument("--max-ratio", type=float, default=2.0)
    parser.add_argument("--max-memory-mb", type=float, default=4000.0)
    parser.add_argument("--phase", choices=["baseline", "attribution"], help=argparse.SUPPRESS)
    parser.add_argument("--store", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.phase:
        print(json.dumps(_phase(args.phase, args.store, "sao-r6")))
        return 0

    import trajlens
    from trajlens.synth import generate

    with tempfile.TemporaryDirectory(prefix="bench-attribution-") as tmp:
        run_dir = Path(tmp) / "bench"
        started = time.perf_counter()
        generate("sao-r6", run_dir, steps=args.steps, batch=args.batch, tokens_per_trajectory=args.tokens,
                 tool_calls_per_trajectory=args.calls)
        trajlens.ingest([run_dir], Path(tmp) / "store")
        print(f"generated and ingested {args.steps} steps x {args.batch} trajectories x {args.tokens:,} tokens "
              f"in {time.perf_counter() - started:.0f} s")
        results = {}
        for phase in ("baseline", "attribution"):
            done = subprocess.run([sys.executable, __file__, "--phase", phase, "--store", str(Path(tmp) / "store")],
                                  capture_output=True, text=True)
            if done.returncode:
                print(done.stderr, file=sys.stderr)
                return 1
            results[phase] = json.loads(done.stdout.strip().splitlines()[-1])
    tokens = results["baseline"]["tokens"]
    print(f"{'':<22}{'seconds':>10}{'peak MB':>10}{'s per M tokens':>16}")
    for phase, label in (("baseline", "recomputation alone"), ("attribution", "attribution")):
        r = results[phase]
        print(f"{label:<22}{r['seconds']:>10.1f}{r['peak_mb']:>10.0f}{r['seconds'] / tokens * 1e6:>16.3f}")
    ratio = results["attribution"]["seconds"] / results["baseline"]["seconds"]
    peak = results["attribution"]["peak_mb"]
    print(f"tokens: {tokens:,}; estimators: {len(ESTIMATORS)}; attribution / recomputation time: {ratio:.2f}x "
          f"(target <= {args.max_ratio}); attribution peak {peak:.0f} MB (target <= {args.max_memory_mb:.0f})")
    failed = ratio > args.max_ratio or peak > args.max_memory_mb
    print("FAIL" if failed else "ok")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
