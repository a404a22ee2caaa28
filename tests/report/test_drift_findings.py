"""A run not attributed yet: its report shows each class drift that attribution would judge,
found by attribution's own test, onset and displacement, with the same numbers."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from trajlens.attribution import RECOMPUTATIONS, attribute
from trajlens.attribution.drift import CLASS_DRIFT_COLUMNS, class_drifts
from trajlens.attribution.verdicts import drift_phrase
from trajlens.classify.stages import assign_stages
from trajlens.engine.classify import run_measures
from trajlens.report.findings import class_counts, drift_findings, with_verdicts

pytestmark = pytest.mark.slow


def _staged(measures: pl.DataFrame) -> pl.DataFrame:
    return assign_stages(measures.select("run_id", "step").unique(), "quartiles").select("step", "stage_index")


@pytest.mark.parametrize("run_id", ["causal-r6", "sao-r6"])
def test_the_drifts_a_report_finds_are_those_attribution_judges(sample_store, run_id):
    measures = run_measures(sample_store, run_id)
    found = class_drifts(class_counts(measures), _staged(measures))
    # the drifts are found before any credit is read: one recomputation (the run's own) is enough
    own = tuple(r for r in RECOMPUTATIONS if r.label == "gae_raw")
    attributed = attribute(sample_store, run_id, own, write=False).drift.select(CLASS_DRIFT_COLUMNS).unique(
        "primary_class", maintain_order=True)
    assert found["primary_class"].to_list() == attributed["primary_class"].to_list()
    assert found.height >= 2  # a growth, and a class it displaced or that decayed on its own
    for mine, theirs in zip(found.iter_rows(named=True), attributed.iter_rows(named=True)):
        for name in CLASS_DRIFT_COLUMNS:
            if isinstance(theirs[name], float):
                # the same counts, pooled in another order: a few ulp at most
                assert mine[name] == pytest.approx(theirs[name], rel=1e-12, abs=1e-300), (run_id, mine["primary_class"], name)
            else:
                assert mine[name] == theirs[name], (run_id, mine["primary_class"], name)


def test_an_unattributed_drift_is_a_finding_that_folds_the_stage_trend(sample_store):
    measures = run_measures(sample_store, "causal-r6")
    drifts = drift_findings(measures, _staged(measures), "causal-r6")
    by_class = {f.subject: f for f in drifts}
    think = by_class["share:think"]
    # the test pools every trajectory of the two stages, not the stage report's N=80 samples: said so
    tested = measures.join(_staged(measures).filter(pl.col("stage_index").is_in([0, 3])), on="step", how="semi").height
    assert tested == 720
    assert think.startswith(drift_phrase({"primary_class": "think", "direction": "grew", "share_first": 0.076,
                                              "share_last": 0.926, "onset_step": 60}) + " (all 720 trajectories of the first "
                            "and last stage, p < 0.001); not attributed yet (`trajlens attribute --run causal-r6`")
    assert think.headline == "think grew 0.08 -> 0.93 from step 60 (not attributed)"
    # test_suite fell only because think took the calls: said so, and weighed as the consequence
    suite = by_class["share:test_suite"]
    assert "displaced by think: of the calls other than think's, its share held (0.15 -> 0.17)" in suite
    assert suite.importance < think.importance and suite.importance < by_class["share:edit"].importance
    # the stage trend of think's share folds into its drift, as into a verdict
    from trajlens.report.findings import Finding

    trend = Finding("think share: 0.076 in Q1 -> 0.926 in Q4", "behaviour", "stage", subject="share:think",
                    checks=("think_share",))
    folded = with_verdicts([trend], drifts)
    assert sum(f.subject == "share:think" for f in folded) == 1
    one = next(f for f in folded if f.subject == "share:think")
    assert one.startswith("think grew 0.08 -> 0.93 from step 60") and "; by stage, think share: 0.076" in one
    assert one.checks == ("think_share",)


def test_a_run_without_a_drift_has_no_drift_finding(sample_store):
    measures = run_measures(sample_store, "causal-r6-whitened")
    assert drift_findings(measures, _staged(measures), "causal-r6-whitened") == []


def test_a_run_without_calls_has_no_drift():
    counts = pl.DataFrame({"step": [1, 1, 2, 2], "count:think": [0.0, 0.0, 0.0, 0.0]})
    staged = pl.DataFrame({"step": [1, 2], "stage_index": [0, 1]})
    assert class_drifts(counts, staged).is_empty()
    assert class_drifts(counts.drop("count:think"), staged).columns == list(CLASS_DRIFT_COLUMNS)


def _counts(think_by_step, trajectories: int = 20, calls: int = 10, seed: int = 0) -> pl.DataFrame:
    """Per trajectory: ``calls`` calls, each think with the step's probability, else edit."""
    rng = np.random.default_rng(seed)
    rows = []
    for step, p in enumerate(think_by_step, start=1):
        think = rng.binomial(calls, p, trajectories).astype(float)
        rows += [{"step": step, "count:think": t, "count:edit": calls - t} for t in think]
    return pl.DataFrame(rows)


def _quartiles(steps: int) -> pl.DataFrame:
    return pl.DataFrame({"step": range(1, steps + 1), "stage_index": [4 * i // steps for i in range(steps)]})


def test_a_share_that_went_and_came_back_is_an_excursion_drift():
    """think 0.06 in Q1, 0.66 in Q3, 0.07 in Q4: the first-to-last test sees no move; the habit the
    run took up and dropped is a drift to its furthest stage, said so."""
    think = [0.06] * 40 + [0.66] * 20 + [0.06] * 20
    drifts = class_drifts(_counts(think), _quartiles(80))
    row = drifts.filter(pl.col("primary_class") == "think").row(0, named=True)
    assert (row["direction"], row["peak_steps"]) == ("grew", "41-60")
    assert row["share_first"] < 0.1 and row["share_last"] > 0.6 and row["share_end"] < 0.1
    assert 36 <= row["onset_step"] <= 41  # the mean over the k = 5 steps from the onset crosses a quarter of the way
    assert drift_phrase(row).endswith(f"from step {row['onset_step']} (by steps 41-60), then fell back to "
                                      f"{row['share_end']:.2f}")
    # the finding says the test where it belongs: first stage against those steps, before the return
    measures = _counts(think).rename(lambda c: c.replace("count:", "count_"))
    finding = next(f for f in drift_findings(measures, _quartiles(80), "r") if f.subject == "share:think")
    assert finding.startswith(f"think grew {row['share_first']:.2f} -> {row['share_last']:.2f} from step {row['onset_step']} "
                              "(by steps 41-60; all 800 trajectories of the first stage and those steps, p < 0.001), "
                              f"then fell back to {row['share_end']:.2f}; not attributed yet")
    # a drift from the first stage to the last is told as before, its end its reach
    grown = class_drifts(_counts([0.06] * 40 + [0.66] * 40), _quartiles(80)).row(0, named=True)
    assert (grown["peak_steps"], grown["share_end"]) == ("", grown["share_last"])
    # a wobble smaller than min_excursion is no excursion
    assert class_drifts(_counts([0.2] * 40 + [0.35] * 20 + [0.2] * 20), _quartiles(80)).is_empty()


def test_a_drift_that_turned_back_within_the_last_stage_says_how_far_it_went():
    """think 0.05 to step 60, then 0.05 -> 0.70 by step 78 and none from step 79 (a run that gave
    it up at once): its last quarter's 0.23 hides both moves, so the drift says where it went."""
    think = [0.05] * 60 + list(np.linspace(0.05, 0.7, 18)) + [0.0] * 12
    row = class_drifts(_counts(think, trajectories=40), _quartiles(90)).filter(
        pl.col("primary_class") == "think").row(0, named=True)
    assert row["direction"] == "grew" and 0.15 < row["share_last"] < 0.35
    assert row["peak_steps"] == "74-78" and 0.55 < row["peak_share"] < 0.75 and row["share_end"] < 0.02
    assert drift_phrase(row).endswith(f"from step {row['onset_step']}, to {row['peak_share']:.2f} by steps 74-78, then "
                                      f"back to {row['share_end']:.2f} at the run's end")
    # the finding's test is of the first stage against the last, so it follows that change, not the turn
    measures = _counts(think, trajectories=40).rename(lambda c: c.replace("count:", "count_"))
    finding = next(f for f in drift_findings(measures, _quartiles(90), "r") if f.subject == "share:think")
    assert finding.startswith(f"think grew {row['share_first']:.2f} -> {row['share_last']:.2f} from step {row['onset_step']} "
                              "(all 1,800 trajectories of the first and last stage, p < 0.001), "
                              f"to {row['peak_share']:.2f} by steps 74-78, then back to")
    # edit, the rest of the calls, decayed and came back the other way: the same turn, mirrored
    edit = class_drifts(_counts(think, trajectories=40), _quartiles(90)).filter(
        pl.col("primary_class") == "edit").row(0, named=True)
    assert edit["direction"] == "decayed" and edit["peak_steps"] == "74-78"
    assert edit["peak_share"] == pytest.approx(1 - row["peak_share"]) and edit["share_end"] > 0.98
    assert ", to 0.3" in drift_phrase(edit) and drift_phrase(edit).endswith("then back to 1.00 at the run's end")
    # steps without calls (the policy stopped early at steps 70-72) are no share of 0 for either class
    quiet = _counts(think, trajectories=40).with_columns(
        pl.when(pl.col("step").is_between(70, 72)).then(0.0).otherwise(pl.col(c)).alias(c) for c in ("count:think", "count:edit"))
    for name in ("think", "edit"):
        found = class_drifts(quiet, _quartiles(90)).filter(pl.col("primary_class") == name).row(0, named=True)
        assert found["peak_steps"] == "74-78", name
    # a drift that holds to the end, eases back by less than min_excursion, or overshot before the
    # last stage (the stages show that) is told as before
    held = [0.05] * 60 + list(np.linspace(0.05, 0.7, 18)) + [0.7] * 12
    eased = [0.05] * 60 + list(np.linspace(0.05, 0.7, 18)) + [0.6] * 12
    overshot = [0.05] * 20 + [0.8] * 20 + [0.45] * 50
    for shares in (held, eased, overshot):
        row = class_drifts(_counts(shares, trajectories=40), _quartiles(90)).filter(
            pl.col("primary_class") == "think").row(0, named=True)
        assert row["direction"] == "grew", shares
        assert (row["peak_steps"], row["peak_share"]) == ("", None) and "at the run's end" not in drift_phrase(row)
