"""Benchmark: generating a large run streams to Parquet in bounded memory.

    python benchmarks/bench_synth.py                      # sao-r7, 200 steps x 64 x 50 calls x 60,000 tokens
    python benchmarks/bench_synth.py --steps 20           # the same shape, 20 steps (about 20 s)
    python benchmarks/bench_synth.py --tokens 20000 --keep runs/r7-bench

Generates the run with :func:`trajlens.synth.generate` into a temporary folder (or ``--keep``),
and reports seconds per step, tokens and tool calls per second, the bytes written, and the
process's peak resident memory (``VmHWM``) after the first step, a tenth of the run, half and
the end. Bounded memory means the peak stops growing after the first steps: it depends on one
step's size (batch x tokens), not on the number of steps. Exits non-zero when the final peak
exceeds the one at half the run by more than 25% (memory that grew with the number of steps
would double between the two; the first steps, where allocators warm up, are left out of the
comparison, so the check means the same at 5 steps as at 200).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from trajlens.synth import generate


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MB (Linux ``VmHWM``)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="sao-r7")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--calls", type=int, default=50, help="tool calls per trajectory")
    parser.add_argument("--tokens", type=int, default=60_000, help="tokens per trajectory")
    parser.add_argument("--log-probs", action="store_true", help="also write per-token log-probabilities")
    parser.add_argument("--keep", type=Path, help="write the run here and keep it (default: a temporary folder)")
    args = parser.parse_args(argv)

    root = None
    if args.keep is None:
        root = Path(tempfile.mkdtemp(prefix="bench-synth-"))
        out = root / "run"
    else:
        out = args.keep
    checkpoints = {1, max(1, args.steps // 10), max(1, args.steps // 2), args.steps}
    peaks: dict[int, float] = {}
    started = time.perf_counter()

    def on_step(step: int) -> None:
        done = step
        if done in checkpoints:
            peaks[done] = peak_rss_mb()
            elapsed = time.perf_counter() - started
            print(f"  step {done:>4}: {elapsed:7.1f} s, peak RSS {peaks[done]:7.0f} MB", flush=True)

    print(f"{args.scenario}: {args.steps} steps x {args.batch} trajectories x ~{args.calls} calls x ~{args.tokens:,} tokens")
    try:
        result = generate(args.scenario, out, steps=args.steps, batch=args.batch, tool_calls_per_trajectory=args.calls,
                          tokens_per_trajectory=args.tokens, log_probs=args.log_probs, on_step=on_step)
        seconds = time.perf_counter() - started
        written = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    finally:
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)
    print(f"{seconds:.1f} s: {seconds / args.steps:.2f} s/step, {result.tokens / seconds / 1e6:.1f} M tokens/s, "
          f"{result.tool_calls / seconds:,.0f} tool calls/s")
    print(f"wrote {result.trajectories:,} trajectories, {result.tool_calls:,} tool calls, {result.tokens:,} tokens: "
          f"{written / 1e6:.0f} MB")
    half = peaks[max(1, args.steps // 2)]
    final = peaks[args.steps]
    ok = final <= 1.25 * half
    print(f"peak RSS {final:.0f} MB at the end vs {half:.0f} MB at half the run")
    print(f"{'PASS' if ok else 'FAIL'}  peak RSS at the end <= 1.25x the peak at half the run")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
