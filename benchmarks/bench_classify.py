"""Benchmark: the vectorised tool-call classifier against the per-row reference.

    python benchmarks/bench_classify.py [--calls 1000000] [--reference-calls 20000] [--check-all] [--threads 1] [--stages]
                                        [--batch 3300]

Generates ``--calls`` realistic tool calls (chains, pipes, heredocs, test runners, editor and
think tools; almost every command text distinct), classifies all of them with
:func:`trajlens.classify.classify_calls`, and times the per-row Python reference
(:func:`trajlens.classify.classify_command_slow`) on the first ``--reference-calls`` of them
in the same run; the reference costs the same per call at any size, so its rate is measured
on that subsample (``--check-all`` runs it on every call, taking minutes). Labels must be
identical on every call the reference saw. Exits non-zero when they differ or when the
vectorised classifier is less than 10x faster.

The classifier runs on one Polars thread unless ``--threads`` (or ``POLARS_MAX_THREADS``) says
otherwise (``--threads 0``: Polars' default, every core); the script restarts itself with
``POLARS_MAX_THREADS`` set, since Polars reads it once. It also reports the rate in process
time, which a busy machine disturbs less than wall time, and a PASS/FAIL line for the goal of
1,000,000 calls/s (wall time, informational: it does not change the exit status). ``--stages``
classifies the calls once more and prints the process time of each step of the classifier
(what bounds its rate). ``--batch N`` also classifies them N at a time, as a run's steps come
(about 3,300 calls a step in the 388 M-token run of ``bench_commands.py``), and prints that rate:
each pass has a fixed cost, which is why ``trajlens check`` holds the calls of small steps and
classifies them together (:data:`trajlens.checks.data.CLASSIFY_CALLS`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Iterator

import polars as pl

from trajlens.classify import _vectorised, classify_calls
from trajlens.classify import calls as calls_module
from trajlens.classify._synthetic import synthetic_tool_calls
from trajlens.classify.reference import classify_rows_slow

TARGET_SPEEDUP = 10.0
GOAL_RATE = 1_000_000
"""Calls per second on one thread the classifier aims at (reported, not an exit condition)."""
THREADS_VARIABLE = "POLARS_MAX_THREADS"


def _restart_with_threads(threads: int | None) -> None:
    """Run this script again with ``POLARS_MAX_THREADS`` as asked (Polars reads it at import):
    ``threads`` if given, else the variable as set, else 1; 0 means Polars' default."""
    current = os.environ.get(THREADS_VARIABLE)
    wanted = threads if threads is not None else int(current) if current else 1
    environment = dict(os.environ)
    if wanted == 0:
        if current is None:
            return
        del environment[THREADS_VARIABLE]
    elif current == str(wanted):
        return
    else:
        environment[THREADS_VARIABLE] = str(wanted)
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, os.path.abspath(__file__), *sys.argv[1:]], environment)


STAGES: tuple[tuple[object, str, str], ...] = (
    (calls_module, "_match_tool_map", "tool maps: each call's entry"),
    (calls_module, "_fill_text_from_arguments", "commands read from JSON arguments"),
    (calls_module, "_fixed_class_paths", "paths from JSON arguments"),
    (calls_module, "_join_shell_results", "shell commands, each distinct one once:"),
    (calls_module, "distinct_codes", "  numbering the distinct commands"),
    (_vectorised, "normalise_commands", "  normalising commands (quotes, heredocs, wrappers)"),
    (_vectorised, "split_actions", "  splitting them into stages"),
    (_vectorised, "distinct_codes", "  numbering the distinct stages"),
    (_vectorised, "normalise_actions", "  normalising the distinct stages"),
    (_vectorised, "_with_classes", "  each stage's first rule and class"),
    (_vectorised, "action_paths", "  each stage's paths"),
    (calls_module, "_assemble", "assembling each call's classes and paths"),
    (calls_module, "_swe_agent_current_file", "SWE-agent's current file"),
)
"""The steps ``--stages`` times: (module, function, what it does); indented ones run inside the
shell step, whose time includes theirs."""


@contextlib.contextmanager
def _timed_stages(seconds: dict[str, float]) -> Iterator[None]:
    """Add each :data:`STAGES` function's process time to ``seconds`` while the block runs."""
    originals = [(module, name, getattr(module, name)) for module, name, _ in STAGES]

    def timed(label: str, function):  # type: ignore[no-untyped-def]
        def run(*args, **kwargs):  # type: ignore[no-untyped-def]
            started = time.process_time()
            try:
                return function(*args, **kwargs)
            finally:
                seconds[label] = seconds.get(label, 0.0) + time.process_time() - started
        return run

    for (module, name, function), (_, _, label) in zip(originals, STAGES):
        setattr(module, name, timed(label, function))
    try:
        yield
    finally:
        for module, name, function in originals:
            setattr(module, name, function)


def _print_stages(calls: pl.DataFrame) -> None:
    seconds: dict[str, float] = {}
    started = time.process_time()
    with _timed_stages(seconds):
        classify_calls(calls)
    total = time.process_time() - started
    top = sum(value for label, value in seconds.items() if not label.startswith(" "))
    print(f"\nwhere the time goes (process time, one more classification: {total:.2f} s):")
    for _, _, label in STAGES:
        print(f"  {label:<56} {seconds.get(label, 0.0):6.2f} s")
    print(f"  {'the rest (columns in, results out)':<56} {total - top:6.2f} s")


def _print_batched(calls: pl.DataFrame, size: int, whole_rate: float) -> None:
    """Classify ``calls`` ``size`` at a time and print the rate against classifying them at once."""
    parts = [calls.slice(start, size) for start in range(0, calls.height, size)]
    started, started_cpu = time.perf_counter(), time.process_time()
    for part in parts:
        classify_calls(part)
    seconds, cpu = time.perf_counter() - started, time.process_time() - started_cpu
    rate = calls.height / seconds
    print(f"\nin batches of {size:,} ({len(parts):,} passes): {seconds:.2f} s = {rate:,.0f} calls/s "
          f"({calls.height / cpu:,.0f} in process time), {whole_rate / rate:.1f}x slower than at once; "
          f"{1000 * seconds / len(parts):.1f} ms a pass")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1_000_000, help="generated tool calls to classify")
    parser.add_argument("--reference-calls", type=int, default=20_000,
                        help="calls the per-row reference classifies (a prefix of the generated calls)")
    parser.add_argument("--check-all", action="store_true", help="run the reference on every call")
    parser.add_argument("--seed", type=int, default=0, help="seed of the generated calls")
    parser.add_argument("--stages", action="store_true", help="also print the process time of each classifier step")
    parser.add_argument("--batch", type=int, default=None,
                        help="also classify the calls this many at a time (a step's worth) and print that rate")
    parser.add_argument("--threads", type=int, default=None,
                        help="Polars threads (default: POLARS_MAX_THREADS, else 1; 0: every core)")
    args = parser.parse_args(argv)
    if argv is None:
        _restart_with_threads(args.threads)

    started = time.perf_counter()
    calls = synthetic_tool_calls(args.calls, seed=args.seed)
    generated = time.perf_counter() - started
    distinct = calls["command"].drop_nulls().n_unique()
    with_command = calls["command"].is_not_null().sum()
    print(f"generated {calls.height:,} tool calls in {generated:.1f} s "
          f"({with_command:,} shell commands, {distinct / max(with_command, 1):.0%} of them distinct)")
    print(f"polars {pl.__version__}, {pl.thread_pool_size()} threads")

    classify_calls(calls.head(1000))  # compile the patterns once, as any session would
    started, started_cpu = time.perf_counter(), time.process_time()
    labels = classify_calls(calls)["primary_class"]
    fast_seconds = time.perf_counter() - started
    fast_cpu = time.process_time() - started_cpu
    fast_rate = calls.height / fast_seconds

    reference_rows = calls if args.check_all else calls.head(args.reference_calls)
    started = time.perf_counter()
    reference = classify_rows_slow(reference_rows.iter_rows(named=True))
    slow_seconds = time.perf_counter() - started
    slow_rate = reference_rows.height / slow_seconds

    compared = labels.head(reference_rows.height).to_list()
    mismatches = [i for i, (a, b) in enumerate(zip(compared, reference)) if a != b]
    speedup = fast_rate / slow_rate
    scope = "all calls" if args.check_all else f"a {reference_rows.height:,}-call subsample"
    threads = pl.thread_pool_size()
    print(f"vectorised: {calls.height:,} calls in {fast_seconds:.2f} s = {fast_rate:,.0f} calls/s "
          f"({fast_cpu:.2f} s of process time = {calls.height / fast_cpu:,.0f} calls/s; {threads} thread"
          f"{'' if threads == 1 else 's'})")
    print(f"reference (per-row Python regex, timed on {scope}): {reference_rows.height:,} calls in "
          f"{slow_seconds:.2f} s = {slow_rate:,.0f} calls/s")
    print(f"speed-up: {speedup:.1f}x (target {TARGET_SPEEDUP:.0f}x)")
    print(f"labels identical on {len(compared) - len(mismatches):,} of {len(compared):,} calls")
    counts = labels.value_counts(sort=True)
    print("labels: " + ", ".join(f"{row['primary_class']} {row['count']:,}" for row in counts.iter_rows(named=True)))
    for index in mismatches[:10]:
        row = reference_rows.row(index, named=True)
        print(f"  differs at row {index}: vectorised {compared[index]}, reference {reference[index]}: "
              f"{row['tool_name']} {row['command']!r:.120}")
    if args.stages:
        _print_stages(calls)
    if args.batch:
        _print_batched(calls, args.batch, fast_rate)
    print()
    print(f"{'FAIL' if mismatches else 'PASS'}  labels identical to the per-row reference on {scope}")
    print(f"{'PASS' if speedup >= TARGET_SPEEDUP else 'FAIL'}  vectorised >= {TARGET_SPEEDUP:.0f}x the per-row reference")
    one = "on one thread" if threads == 1 else f"on {threads} threads (the goal is for one: --threads 1)"
    print(f"{'PASS' if fast_rate >= GOAL_RATE and threads == 1 else 'FAIL'}  >= {GOAL_RATE:,} calls/s {one} "
          f"(goal, not an exit condition): {fast_rate:,.0f}")
    if mismatches:
        return 1
    return 0 if speedup >= TARGET_SPEEDUP else 1


if __name__ == "__main__":
    sys.exit(main())
