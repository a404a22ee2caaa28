"""Every causal scenario at several seeds: the verdicts attribution gives against what the loop caused.

    python scripts/verdicts.py                      # every scenario, seeds 0-9
    python scripts/verdicts.py --seeds 3 --scenario causal-r6 --scenario causal-null

For each scenario and seed it runs the training loop of :mod:`trajlens.synth.causal`, ingests
the run into a temporary store, attributes it, and prints one row per expected or found drift:
the verdict found, the verdict the scenario declares (``CausalScenario.truth``), the onset found
and the true onset (the same quarter-of-the-way rule applied to the policy's own class
probabilities), and OK or MISMATCH; the response-length and reward-channel verdicts too (no onset).
A declared drift is expected only where the loop itself made it: a class drift where the
policy's own probability of the class moved by the detection threshold, a length drift where
the loop's own mean length did. A mismatch is an expected drift not found, found with another
direction or verdict, an onset more than ``--onset-tolerance`` steps from the truth, or an
artefact (of the estimator or of the loss aggregation) in a control run
(``CausalScenario.control``). A drift the scenario does not declare is shown with whether the
loop's own policy moved that class (truth.json's ``summary.moved_undeclared``). Exit status 1 on
any mismatch. ``--first-seed 10 --seeds 20``
judges seeds 10-29, which no rule was tuned on.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np


def _policy_share(loop: list[dict], name: str) -> np.ndarray:
    """The policy's own probability of class ``name`` at each step of the simulated loop."""
    return np.array([row[f"policy.{name}"] for row in loop])


def true_onsets(scenario, loop: list[dict], k: int) -> dict[str, int]:
    """Per class: the onset of the drift of its policy probability, by the rule attribution uses."""
    from trajlens.attribution.drift import DriftConfig
    from trajlens.attribution.statistics import drift_onset
    from trajlens.run.quarters import quarters

    steps = np.array([row["step"] for row in loop])
    onsets = {}
    for name in scenario.class_names:
        share = _policy_share(loop, name)
        onsets[name] = drift_onset(steps, share, *quarters(steps).means(steps, share), k, DriftConfig().min_change)
    return onsets


def judge(scenario, seed: int, work: Path, tolerance: int) -> list[tuple[str, ...]]:
    """Rows ``(scenario, seed, class, direction, found, expected, onset, true onset, status)``."""
    import trajlens
    from trajlens.attribution import ARTEFACT_VERDICTS, attribute
    from trajlens.synth.causal import generate_causal, moved_undeclared, simulate_causal, unmoved

    run_dir, store_dir = work / f"{scenario.name}-{seed}", work / f"{scenario.name}-{seed}-store"
    generate_causal(scenario, run_dir, seed=seed)
    trajlens.ingest([run_dir], store_dir)
    result = attribute(trajlens.open(store_dir), scenario.name, write=False)
    found = {row["primary_class"]: row for row in result.verdicts.iter_rows(named=True)}
    for line in result.cause_verdicts:  # "VERDICT: response length grew: ..." / "VERDICT: reward channel NAME collapsed: ..."
        verdict, _, rest = line.partition(": ")
        subject, _, direction = rest.partition(":")[0].rpartition(" ")
        found[subject] = {"direction": direction, "verdict": verdict, "onset_step": None, "estimator": result.own.label}
    loop = simulate_causal(scenario, seed=seed)  # the truth: the policy's own probabilities and lengths
    onsets = true_onsets(scenario, loop, 5)
    still = unmoved(scenario, loop)  # as truth.json's summary.not_moved says
    rows = []
    for expected in scenario.truth:
        row = found.get(expected.primary_class)
        if expected.primary_class in still:  # the loop itself made no drift to find: whatever is found stands
            rows.append((scenario.name, str(seed), expected.primary_class, row["direction"] if row else "-",
                         row["verdict"] if row else "no drift",
                         f"no drift (the loop's {still[expected.primary_class]} moved less than the threshold)", str(row["onset_step"] or "-") if row else "-", "-", "OK"))
            continue
        if row is None:
            rows.append((scenario.name, str(seed), expected.primary_class, expected.direction, "no drift found",
                         expected.verdict, "-", str(onsets.get(expected.primary_class, "-")), "MISMATCH"))
            continue
        true_onset = onsets.get(expected.primary_class)
        onset_error = 0 if row["onset_step"] is None or true_onset is None else abs(row["onset_step"] - true_onset)
        ok = (row["direction"] == expected.direction and row["verdict"] == expected.verdict and onset_error <= tolerance
              and (expected.verdict not in ARTEFACT_VERDICTS or row["estimator"] == result.own.label))
        rows.append((scenario.name, str(seed), expected.primary_class, row["direction"], row["verdict"], expected.verdict,
                     str(row["onset_step"] or "-"), str(true_onset or "-"), "OK" if ok else "MISMATCH"))
    declared = {e.primary_class for e in scenario.truth}
    moved = {m["primary_class"]: m for m in moved_undeclared(scenario, loop)}  # as truth.json's summary.moved_undeclared
    for name, row in found.items():
        if name in declared:
            continue
        blamed = scenario.control and row["verdict"] in ARTEFACT_VERDICTS
        truth = "not an artefact" if scenario.control else "(not declared)"
        if name in moved:
            truth += f" (the loop moved it: policy {moved[name]['policy_first']:.2f} -> {moved[name]['policy_last']:.2f})"
        rows.append((scenario.name, str(seed), name, row["direction"], row["verdict"], truth, str(row["onset_step"] or "-"),
                     str(onsets.get(name, "-")), "MISMATCH" if blamed else "OK"))
    if not rows:
        rows.append((scenario.name, str(seed), "-", "-", "no drift", "no drift", "-", "-", "OK"))
    return rows


def main(argv: list[str] | None = None) -> int:
    from trajlens.synth.causal_spec import CAUSAL_SCENARIOS

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=10, help="how many seeds of every scenario (default 10)")
    parser.add_argument("--first-seed", type=int, default=0, help="the first seed (default 0: seeds 0..N-1)")
    parser.add_argument("--scenario", action="append", help="only this scenario (repeatable; default: all)")
    parser.add_argument("--onset-tolerance", type=int, default=5, help="steps the onset may miss the truth by")
    args = parser.parse_args(argv)
    names = args.scenario or list(CAUSAL_SCENARIOS)
    unknown = [n for n in names if n not in CAUSAL_SCENARIOS]
    if unknown:
        print(f"unknown scenario {unknown[0]!r} (known: {', '.join(CAUSAL_SCENARIOS)})", file=sys.stderr)
        return 2
    header = ("scenario", "seed", "class", "direction", "verdict", "truth", "onset", "true onset", "")
    print("\t".join(header), flush=True)
    mismatches = 0
    with tempfile.TemporaryDirectory(prefix="trajlens-verdicts-") as work:
        for name in names:
            for seed in range(args.first_seed, args.first_seed + args.seeds):
                for row in judge(CAUSAL_SCENARIOS[name], seed, Path(work), args.onset_tolerance):
                    mismatches += row[-1] == "MISMATCH"
                    print("\t".join(row), flush=True)
    print(f"{mismatches} mismatch(es)" if mismatches else "every verdict matches the truth")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
