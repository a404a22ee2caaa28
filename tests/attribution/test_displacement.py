"""A class whose share moved only because others took its calls is named displaced, on hand-made
units and on the shipped sao-r6, where view's share falls as think's grows."""

from __future__ import annotations

import polars as pl
import pytest

import trajlens
from trajlens.attribution import attribute
from trajlens.attribution.document import verdict_document
from trajlens.attribution.drift import DriftConfig, _displacements, _stage_change, held
from trajlens.intervals import newcombe, wilson
from trajlens.report.findings import IMPORTANCE, attribution_findings

CONFIG = DriftConfig()


def _units(stages: list[dict[str, int]], per_stage: int = 200) -> pl.DataFrame:
    """``per_stage`` trajectories per stage (two stages), each making the given calls of each
    class: rows (stage_index, primary_class, x, n), every class's rows in the same unit order."""
    rows = []
    for name in stages[0]:
        for index, counts in enumerate(stages):
            rows += [{"stage_index": index, "primary_class": name, "x": float(counts[name]),
                      "n": float(sum(counts.values()))}] * per_stage
    return pl.DataFrame(rows)


def _displaced(stages: list[dict[str, int]], structural: tuple[str, ...] = (), per_stage: int = 200) -> dict:
    units = _units(stages, per_stage)
    changes = {name: change for name in stages[0] if (change := _stage_change(units, name, CONFIG))}
    return _displacements(units, changes, structural, CONFIG)


def test_classes_that_keep_their_share_of_the_other_calls_are_displaced_by_the_one_that_grew():
    # think takes 2 of 20 calls, then 14; search and view split the rest 1:1 throughout
    found = _displaced([{"think": 2, "search": 9, "view": 9}, {"think": 14, "search": 3, "view": 3}])
    assert set(found) == {"search", "view"}
    assert found["view"]["displaced_by"] == "think"
    assert (found["view"]["rest_first"], found["view"]["rest_last"]) == pytest.approx((0.5, 0.5))


def test_a_class_that_also_lost_among_the_other_calls_is_not_displaced():
    # view falls from half of the non-think calls to a sixth: it moved on its own too
    found = _displaced([{"think": 2, "search": 9, "view": 9}, {"think": 14, "search": 5, "view": 1}])
    assert "view" not in found and "search" not in found


def test_two_classes_that_trade_calls_with_nothing_beside_them_are_not_displaced():
    # with only each other (and a structural submit) left, neither has a share of other calls to hold
    assert _displaced([{"test_suite": 8, "quick_check": 1, "submit": 1}, {"test_suite": 1, "quick_check": 8, "submit": 1}],
                      structural=("submit",)) == {}


def test_a_structural_class_that_drifts_is_left_out_once_and_displaces_no_other():
    # trajectories shorten around one think call and one final submit: both their shares grow
    found = _displaced([{"think": 1, "search": 9, "view": 9, "submit": 1}, {"think": 1, "search": 2, "view": 2, "submit": 1}],
                       structural=("submit",))
    # submit is no displacer (its count is not the policy's choice); its own share grew as the others fell
    assert {name: row["displaced_by"] for name, row in found.items()} == {
        "search": "think", "view": "think", "submit": "search, view"}
    assert (found["view"]["rest_first"], found["view"]["rest_last"]) == pytest.approx((0.5, 0.5))


def test_a_share_of_too_few_calls_is_not_shown_to_hold():
    # think takes nearly every call: of the rest, search and view hold their 1:1 split, but on a
    # handful of calls in the last stage, so the change's interval is too wide to say so
    found = _displaced([{"think": 2, "search": 9, "view": 9}, {"think": 198, "search": 1, "view": 1}], per_stage=3)
    assert found == {}


def _share(value: float, n: float) -> dict:
    """A pooled stage row of a share ``value`` on an effective size ``n``, with its Wilson interval."""
    low, high = (bound.alias(name) for bound, name in zip(wilson(pl.lit(value * n), pl.lit(n)), ("low", "high")))
    low, high = pl.select(low, high).row(0)
    return {"value": value, "n_effective": n, "low": low, "high": high}


def test_held_needs_no_change_seen_and_the_whole_interval_inside_the_band():
    row = _share(0.5, 10_000.0)
    assert held(row, _share(0.505, 10_000.0), 0.1)  # 0.005 +- 0.014
    assert not held(row, _share(0.52, 10_000.0), 0.1)  # 0.02 +- 0.014: a change, if small
    # a share of the other calls that went 0.23 -> 0.30 did not hold, though 0.07 < 0.1
    assert not held(_share(0.23, 3_000.0), _share(0.30, 3_000.0), 0.1)
    assert not held(row, _share(0.58, 100.0), 0.1)  # 0.08 +- 0.14
    assert not held(row, _share(0.65, 10_000.0), 0.1)
    assert not held(_share(1.0, 50.0), _share(1.0, 50.0), 0.1)


def test_held_is_the_comparisons_interval_of_the_change():
    """The interval is Newcombe's, as `trajlens compare` gives a share's difference: near 0 it is
    wider than the normal one, so a change of a rare class's share is not called held."""
    first, last = _share(0.02, 400.0), _share(0.01, 400.0)
    low, high = newcombe(first, last)
    assert low == pytest.approx(-0.0299, abs=1e-4) and high == pytest.approx(0.0083, abs=1e-4)
    # the normal interval, -0.01 +- 0.0168, lies inside +-0.028; Newcombe's does not
    assert held(first, last, 0.031) and not held(first, last, 0.028)


@pytest.fixture(scope="module")
def r6(samples_store_path):
    return attribute(trajlens.open(samples_store_path), "sao-r6", write=False)


def test_sao_r6s_view_decays_as_think_grows_and_its_verdict_says_so(r6):
    verdicts = {row["primary_class"]: row for row in r6.verdicts.iter_rows(named=True)}
    assert verdicts["think"]["direction"] == "grew" and verdicts["think"]["displaced_by"] == ""
    view = verdicts["view"]
    assert view["direction"] == "decayed" and view["displaced_by"] == "think"
    assert abs(view["rest_last"] - view["rest_first"]) < CONFIG.min_change < view["share_first"] - view["share_last"]
    assert "; displaced by think: of the calls other than think's, its share held (0.30 -> 0.30), so it decayed as " \
           "think grew" in view["reason"]
    drifts = {drift["class"]: drift for drift in verdict_document(r6)["drifts"]}
    assert (drifts["view"]["displaced_by"], drifts["think"]["displaced_by"]) == (["think"], [])


def test_the_pivotal_steps_name_the_window_they_were_chosen_in(r6):
    """sao-r6's think credit was highest at steps 119-121, after the window searched around the
    drift's onset: the steps it names say which window they are the highest of."""
    own = r6.drift.filter((pl.col("primary_class") == "think") & pl.col("own")).row(0, named=True)
    assert (own["pivotal_steps"], own["pivot_kind"]) == (
        "88", "the steps of 73-88 around the onset where it had the highest relative credit of all classes")


def test_the_report_weighs_a_displaced_drift_by_nothing_of_its_own_size(samples_store_copy):
    store = trajlens.open(samples_store_copy)
    attribute(store, "sao-r6", write=True)
    findings = {f.subject: f for f in attribution_findings(store, "sao-r6")}
    view, think = findings["share:view"], findings["share:think"]
    assert view.importance == max(IMPORTANCE[view.kind], IMPORTANCE["behaviour"])  # the drift's weight, no size bonus
    assert think.importance > IMPORTANCE[think.kind]


def test_the_reason_names_several_displacing_classes_in_words():
    from trajlens.attribution.verdicts import displacement_text

    text = displacement_text({"displaced_by": "search, view", "direction": "decayed", "rest_first": 0.5, "rest_last": 0.48})
    assert text == ("displaced by search and view: of the calls other than search and view's, its share held "
                    "(0.50 -> 0.48), so it decayed as search and view grew")


def test_a_displaced_class_leads_with_what_displaced_it_and_reads_its_own_push_after(r6):
    """sao-r6's view share fell because think took its calls: its line leads with that, and the
    verdict its own push reads (learning) follows as that, not as a rival cause."""
    from trajlens.attribution.render import verdict_lines

    view = next(line for line in verdict_lines(r6) if "view decayed" in line)
    assert view.startswith("displaced by think: view decayed 0.28 -> 0.16 from step 68 (gae_raw / token-mean: "
                           "read on its own push, learning: ")
    assert view.endswith("so it decayed as think grew)")
    think = next(line for line in verdict_lines(r6) if "think grew" in line)
    assert not think.startswith("displaced") and "read on its own push" not in think
    detailed = next(finding for finding in r6.findings if "view decayed" in finding)
    assert detailed.startswith("displaced by think: view decayed 0.28 -> 0.16 from step 68; cumulative push ")
