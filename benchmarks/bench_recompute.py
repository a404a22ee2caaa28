"""Benchmark: recomputing advantages over a store against reading the token arrays it needs.

    python benchmarks/bench_recompute.py                      # 200 steps x 64 trajectories x 30,000 tokens
    python benchmarks/bench_recompute.py --quick              # 16 steps, same shape per step
    python benchmarks/bench_recompute.py --degenerate 100000  # `trajlens report` on 100,000 one-trajectory steps

Generates a run with known shape (``trajlens.synth``, scenario sao-r7: critic values on every
token) and ingests it into a store, both kept under ``--work`` so that a rerun skips them. Then,
on the first quarter, half and all of the steps, quiet and under a background load of one
spinning process per CPU (each condition in a fresh process; the peak RSS of each task is
read from ``VmHWM`` after resetting it through ``/proc/self/clear_refs``):

- **scan**: a plain Polars read of the token arrays GAE needs (``response_mask``, ``values``,
  ``token_rewards``), one step partition at a time, nothing computed;
- **gae**: :func:`trajlens.run.stepwise.diagnostics_by_step` for GAE raw and whitened
  (the report's two GAE labels): per-step batch diagnostics over model tokens, every
  trajectory's advantages computed;
- **report**: the report's computations on those steps, as ``trajlens report`` makes them:
  classify every tool call and the trajectory measures, the stage report from those measures,
  and :func:`trajlens.run.choices.report_advantages` (which estimators the run allows and
  their per-step diagnostics, in one read of the token arrays).

It prints seconds (best of ``--repeats`` runs, the usual guard on a shared machine),
ns and seconds per million tokens, peak RSS (the largest of the runs), and the ratios to the scan.
Targets (exit 1 when one fails, in either condition, at the full size): gae <= 2x scan,
report <= 3x scan, peak RSS of gae and report < 1.5 GB; cost per million tokens of gae and of
the report at the full size within 1.5x of the quarter's (linear).

``--degenerate N`` instead writes (once, under ``--work``) a run of N steps of one tiny
trajectory each through the store's writer, and runs the whole ``trajlens report`` on it and on
a run of N/4 steps in child processes, as the machine is and under load: seconds, ms per step
and peak RSS (``RUSAGE_CHILDREN``). Targets, in both conditions: exit 0, peak RSS < 1.5 GB,
time per step at N within 1.5x of that at N/4 (linear: the report's fixed start-up cost is
shared by more steps at N), and the peak growing from N/4 to N by at most ``FIXED_BYTES`` plus
``STEP_BYTES`` a step.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _load import condition  # noqa: E402
from _verdict import report_targets  # noqa: E402

GAE_SPEEDUP = 2.0
REPORT_FACTOR = 3.0
PEAK_BYTES = 1.5e9
LINEAR_FACTOR = 1.5
STEP_BYTES = 15_000
"""Most the report's peak may grow per step from N/4 to N tiny steps (``--degenerate``), beyond
``FIXED_BYTES``: the per-step figures the checks and plots keep cost some 5 KB a step; a file
per step and table, or checks holding the whole run, cost 40 KB a step or more."""
FIXED_BYTES = 30e6
"""Growth of the peak from N/4 to N allowed whatever N (allocator arenas and caches: measured
41 MB from 1,000 to 4,000 steps, 40 MB from 4,000 to 16,000), so that a small N does not fail
on them."""
GAE_CHOICES = (("gae_raw", "gae", {"gamma": 1.0, "lam": 1.0, "whiten": False}),
               ("gae_whitened", "gae", {"gamma": 1.0, "lam": 1.0, "whiten": True}))


def build(work: Path, steps: int, batch: int, tokens: int, calls: int) -> tuple[Path, str]:
    """The store (generated and ingested once, then reused)."""
    import trajlens
    from trajlens.synth import generate

    store = work / f"store-{steps}x{batch}x{tokens}"
    marker = store / ".bench-complete"
    if not marker.exists() or marker.read_text() != _schema_mark():
        if store.exists():
            import shutil

            shutil.rmtree(store)  # written under another schema
        run_dir = work / f"run-{steps}x{batch}x{tokens}"
        started = time.perf_counter()
        if not run_dir.exists():
            generate("sao-r7", run_dir, steps=steps, batch=batch, tokens_per_trajectory=tokens,
                     tool_calls_per_trajectory=calls)
        generated = time.perf_counter() - started
        started = time.perf_counter()
        trajlens.ingest([run_dir], store)
        print(f"generated the run in {generated:.0f} s, ingested it in {time.perf_counter() - started:.0f} s")
        marker.write_text(_schema_mark())
    run_id = trajlens.open(store).run_ids()[0]
    return store, run_id


def _schema_mark() -> str:
    """What a kept store was written under: the store schema and how it packs steps, so a change
    of either rebuilds it."""
    import hashlib

    from trajlens.schema import SCHEMAS
    from trajlens.store.layout import PACK_BYTES

    text = "".join(f"{n}{s}" for n, s in SCHEMAS.items()) + f"pack={PACK_BYTES}"
    return hashlib.sha256(text.encode()).hexdigest()[:16] + "\n"


def _peak_rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def task(kind: str, store_path: str, run_id: str, steps: list[int]) -> dict:
    """Run one measured task in this process; returns seconds, tokens and peak RSS."""
    import polars as pl
    import pyarrow.compute as pc

    import trajlens
    from trajlens.estimators import EstimatorChoice
    from trajlens.run.stepwise import diagnostics_by_step, read_step

    import trajlens.estimators._compiled  # noqa: F401  (numba's import, like polars's, is not the work)

    store = trajlens.open(store_path)
    started = time.perf_counter()
    tokens = 0
    if kind == "scan":
        for step in steps:
            frame = pl.from_arrow(read_step(store, run_id, "tokens", step,
                                            ("trajectory_id", "response_mask", "values", "token_rewards")))
            tokens += int(frame["response_mask"].list.len().sum())
    elif kind == "gae":
        diagnostics = diagnostics_by_step(store, run_id, [EstimatorChoice(*c) for c in GAE_CHOICES], steps=steps)
        tokens = -1
        assert diagnostics.height == 2 * len(steps)
    elif kind == "report":
        from trajlens.classify import classify_calls, stage_report, trajectory_measures
        from trajlens.classify.stages import CLASSIFY_INPUT
        from trajlens.run.choices import report_advantages

        in_steps = (pl.col("run_id") == run_id) & pl.col("step").is_in(steps)
        calls = classify_calls(store.tool_calls.filter(in_steps).select(CLASSIFY_INPUT))
        trajectories = store.trajectories.filter(in_steps).collect()
        measures = trajectory_measures(calls, trajectories)
        stage_report((trajectories, calls.head(0)), run_id=run_id, n=80, seed=0, stages="quartiles",
                     measures=measures)
        advantages = report_advantages(store, run_id, steps=steps)
        assert advantages.diagnostics.height >= 2 * len(steps)
        tokens = -1
        del measures
    seconds = time.perf_counter() - started
    if tokens < 0:
        tokens = sum(int(pc.sum(pc.list_value_length(read_step(store, run_id, "tokens", s, ("response_mask",))
                                                     .column("response_mask"))).as_py() or 0) for s in steps)
    return {"seconds": seconds, "tokens": tokens, "peak": _peak_rss()}


def measure_sizes(store_path: str, run_id: str, sizes: list[list[int]], repeats: int) -> list[dict]:
    """Every task at every size in this process: best time of ``repeats``, and the peak RSS
    during the task (``VmHWM`` reset through ``/proc/self/clear_refs`` before each run)."""
    out = []
    for steps in sizes:
        for kind in ("scan", "gae", "report"):
            runs = []
            for _ in range(repeats):
                Path("/proc/self/clear_refs").write_text("5")
                runs.append(task(kind, store_path, run_id, steps))
            best = min(runs, key=lambda run: run["seconds"])
            out.append({"kind": kind, "steps": len(steps), **best, "peak": max(run["peak"] for run in runs)})
    return out


def in_fresh_process(store: Path, run_id: str, sizes: list[list[int]], repeats: int) -> list[dict]:
    code = (
        "import json, sys; sys.path.insert(0, %r); sys.path.insert(0, %r); import bench_recompute as b; "
        "print(json.dumps(b.measure_sizes(%r, %r, %r, %d)))"
        % (str(ROOT), str(Path(__file__).parent), str(store), run_id, sizes, repeats)
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if done.returncode:
        sys.stderr.write(done.stderr)
        raise SystemExit("measuring failed")
    return json.loads(done.stdout.strip().splitlines()[-1])


def degenerate(work: Path, steps: int, loads: list[bool]) -> int:
    """``trajlens report`` on runs of ``steps`` and ``steps // 4`` one-trajectory steps, in each
    condition of ``loads`` (False: as the machine is; True: under added load)."""
    sys.path.insert(0, str(ROOT / "tests" / "report"))
    from built_runs import degenerate_store

    stores = {}
    for count in (max(1, steps // 4), steps):
        store = work / f"degenerate-{count}"
        marker = store / ".bench-complete"
        if not marker.exists() or marker.read_text() != _schema_mark():
            if store.exists():
                import shutil

                shutil.rmtree(store)
            started = time.perf_counter()
            degenerate_store(store, count)
            marker.write_text(_schema_mark())
            print(f"wrote {count:,} steps in {time.perf_counter() - started:.0f} s")
        stores[count] = store
    code = ("import json, resource, subprocess, sys, time; t = time.perf_counter(); "
            "d = subprocess.run([sys.executable, '-m', 'trajlens', 'report', sys.argv[1], '--out', sys.argv[2]], "
            "capture_output=True, text=True); s = time.perf_counter() - t; "
            "print(json.dumps({'rc': d.returncode, 'seconds': s, 'stderr': d.stderr[-1000:], "
            "'peak': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024}))")
    results = []
    for loaded in loads:
        rows = []
        with condition(loaded) as label:
            for count, store in stores.items():
                done = subprocess.run([sys.executable, "-c", code, str(store), str(work / f"degenerate-{count}-report")],
                                      capture_output=True, text=True, check=True)
                rows.append({"steps": count, **json.loads(done.stdout)})
        print(f"\n{label}\n{'steps':>8} {'exit':>4} {'seconds':>8} {'ms/step':>8} {'peak MB':>8}")
        for r in rows:
            print(f"{r['steps']:>8,} {r['rc']:>4} {r['seconds']:>8.1f} {r['seconds'] / r['steps'] * 1e3:>8.2f} "
                  f"{r['peak'] / 1e6:>8.0f}")
            if r["rc"]:
                print(r["stderr"])
        small, large = rows
        added = large["steps"] - small["steps"]
        growth = large["peak"] - small["peak"]
        allowed = FIXED_BYTES + STEP_BYTES * added
        results += [
            (f"{label}: trajlens report exits 0 on both runs", small["rc"] == 0 and large["rc"] == 0),
            (f"{label}: peak RSS < {PEAK_BYTES / 1e9:g} GB at {steps:,} steps", large["peak"] < PEAK_BYTES),
            (f"{label}: time per step at {steps:,} steps <= {LINEAR_FACTOR:g}x that at {small['steps']:,}",
             large["seconds"] / large["steps"] <= LINEAR_FACTOR * small["seconds"] / small["steps"]),
            (f"{label}: peak grows {growth / 1e6:.0f} MB over {added:,} more steps ({growth / max(1, added) / 1e3:.1f} "
             f"KB a step; <= {FIXED_BYTES / 1e6:g} MB + {STEP_BYTES / 1e3:g} KB a step = {allowed / 1e6:.0f} MB)",
             growth <= allowed),
        ]
    print()
    return report_targets(results)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="16 steps instead of 200")
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=30_000, help="tokens per trajectory")
    parser.add_argument("--calls", type=int, default=50, help="tool calls per trajectory")
    parser.add_argument("--work", type=Path, default=Path("/tmp/trajlens-bench-recompute"),
                        help="where the generated run and store are kept between runs")
    parser.add_argument("--no-load", action="store_true", help="skip the run under added load")
    parser.add_argument("--repeats", type=int, default=None,
                        help="runs per task; the best time is kept (default 2, and 5 with --quick, whose tasks "
                             "last under a second and so vary more on a busy machine)")
    parser.add_argument("--degenerate", type=int, default=None, metavar="STEPS",
                        help="run `trajlens report` on STEPS one-trajectory steps (and a quarter as many)")
    args = parser.parse_args()
    if args.degenerate:
        args.work.mkdir(parents=True, exist_ok=True)
        return degenerate(args.work, args.degenerate, [False] if args.no_load else [False, True])
    steps_total = args.steps or (16 if args.quick else 200)
    if args.repeats is None:
        args.repeats = 5 if args.quick else 2
    args.work.mkdir(parents=True, exist_ok=True)
    store, run_id = build(args.work, steps_total, args.batch, args.tokens, args.calls)
    from trajlens.run.stepwise import run_steps

    import trajlens

    all_steps = run_steps(trajlens.open(store), run_id)
    sizes = [("quarter", all_steps[: max(1, len(all_steps) // 4)]), ("half", all_steps[: max(1, len(all_steps) // 2)]),
             ("full", all_steps)]
    print(f"store {store}: run {run_id}, {len(all_steps)} steps x {args.batch} trajectories x ~{args.tokens:,} tokens")
    results = []
    for loaded in ([False] if args.no_load else [False, True]):
        with condition(loaded) as label:
            print(f"\n{label}")
            header = (f"{'size':<8} {'steps':>5} {'M tokens':>9} {'task':<7} {'seconds':>8} {'ns/token':>8} "
                      f"{'s per M':>8} {'x scan':>7} {'peak MB':>8}")
            print(header)
            print("-" * len(header))
            per_million: dict[str, list[float]] = {}
            full: dict[str, dict] = {}
            measured = in_fresh_process(store, run_id, [steps for _, steps in sizes], args.repeats)
            names = {len(steps): name for name, steps in sizes}
            scan = None
            for r in measured:
                name, kind = names[r["steps"]], r["kind"]
                scan = r if kind == "scan" else scan
                millions = r["tokens"] / 1e6
                per_million.setdefault(kind, []).append(r["seconds"] / millions)
                print(f"{name:<8} {r['steps']:>5} {millions:>9.1f} {kind:<7} {r['seconds']:>8.2f} "
                      f"{r['seconds'] / r['tokens'] * 1e9:>8.2f} {r['seconds'] / millions:>8.4f} "
                      f"{r['seconds'] / scan['seconds']:>6.2f}x {r['peak'] / 1e6:>8.0f}")
                if name == "full":
                    full[kind] = r
            results += [
                (f"{label}: gae (raw and whitened) <= {GAE_SPEEDUP:g}x the scan at full size",
                 full["gae"]["seconds"] <= GAE_SPEEDUP * full["scan"]["seconds"]),
                (f"{label}: report computations <= {REPORT_FACTOR:g}x the scan at full size",
                 full["report"]["seconds"] <= REPORT_FACTOR * full["scan"]["seconds"]),
                (f"{label}: peak RSS of gae and report < {PEAK_BYTES / 1e9:g} GB",
                 max(full["gae"]["peak"], full["report"]["peak"]) < PEAK_BYTES),
                *((f"{label}: {kind} cost per M tokens at full size <= {LINEAR_FACTOR:g}x the quarter's",
                   per_million[kind][-1] <= LINEAR_FACTOR * per_million[kind][0]) for kind in ("gae", "report")),
            ]
    print()
    return report_targets(results)


if __name__ == "__main__":
    sys.exit(main())
