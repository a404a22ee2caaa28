"""The overview's trends and the channel findings say what the checks, the saved SQL and
attribution say: a share pooled over calls, first- vs last-quarter means, collapsed vs saturated."""

from __future__ import annotations

import html
import json
from pathlib import Path

import polars as pl
import pytest

import trajlens
from trajlens.report.overview import Trend, run_trends, sparkline, trend_hover

QUERIES = Path(__file__).resolve().parents[2] / "queries"
THINK = {"tool_name": "think", "arguments": '{"thought": "plan"}'}


def _bash(command: str) -> dict:
    return {"tool_name": "bash", "command": command, "arguments": json.dumps({"command": command})}


def _think_share_by_step(store, run_id: str) -> dict[int, float]:
    frame = store.sql((QUERIES / "think_share_by_step.sql").read_text(), {"run_id": run_id})
    return dict(zip(frame["step"].to_list(), frame["think_share"].to_list()))


def _checks_think_share(measures: pl.DataFrame) -> dict[int, float]:
    from trajlens.checks.step_measures import trajectory_measure_stats

    stats = trajectory_measure_stats(measures).filter(pl.col("measure") == "share:think")
    return {row["step"]: row["x"] / row["n"] for row in stats.iter_rows(named=True) if row["n"]}


@pytest.fixture(scope="module")
def uneven_store(tmp_path_factory):
    """Four steps of one trajectory that only thinks beside one that thinks more and more among
    other calls: per step, the mean of the two trajectories' think shares is not the pooled share
    (step 1: (1/1 + 0/2) / 2 = 0.5, pooled 1/3)."""
    from trajlens.report import classify_store
    from trajlens.rows import RunBuilder
    from trajlens.store.layout import RunDirWriter

    builder = RunBuilder("uneven", estimator="grpo", config={}, source_format="test", source="uneven")
    for step in (1, 2, 3, 4):
        members = ([THINK], [THINK] * (2 * step - 2) + [_bash("cat src/mod.py"), _bash("pytest -q")])
        for member, calls in enumerate(members):
            builder.add_trajectory({
                "step": step, "trajectory_id": f"{step}-{member}", "group_id": f"{step}:g", "task_id": "g",
                "reward": float(member), "resolved": bool(member), "model_tokens": 10 * len(calls),
            }, [{**call, "turn": turn} for turn, call in enumerate(calls)], where=f"uneven: {step} {member}")
    run = builder.build()
    root = tmp_path_factory.mktemp("uneven")
    with RunDirWriter(root / "uneven", run.runs) as writer:
        writer.write_run(run)
    trajlens.ingest([root / "uneven"], root / "store")
    store = trajlens.open(root / "store")
    classify_store(store, ["uneven"])
    return store


def test_the_share_trend_is_the_pooled_share_of_the_checks_and_the_saved_sql(uneven_store):
    from trajlens.engine.classify import run_measures

    measures = run_measures(uneven_store, "uneven")
    trend = dict(run_trends(uneven_store, "uneven", measures, "train")[0]["think share"].points)
    assert trend == pytest.approx({1: 1 / 3, 2: 3 / 5, 3: 5 / 7, 4: 7 / 9})
    assert trend == pytest.approx(_checks_think_share(measures))
    assert trend == pytest.approx(_think_share_by_step(uneven_store, "uneven"), abs=5.1e-5)


@pytest.mark.slow
def test_the_share_trend_of_a_sample_run_is_its_think_share_by_step(sample_store):
    from trajlens.engine.classify import run_measures
    from trajlens.report import classify_store

    classify_store(sample_store, ["sao-r6"])
    measures = run_measures(sample_store, "sao-r6")
    trend = dict(run_trends(sample_store, "sao-r6", measures, "train")[0]["think share"].points)
    sql = _think_share_by_step(sample_store, "sao-r6")
    assert sorted(trend) == sorted(sql) and len(sql) == 135
    assert trend == pytest.approx(sql, abs=5.1e-5)
    assert trend == pytest.approx(_checks_think_share(measures))


def test_the_hover_says_the_trend_s_quarter_values():
    trend = Trend([(1, 10.0), (2, 0.0), (12, 5.0)], 5.0, 2.5)
    title = "trend: 5 in the first quarter -> 2.5 in the last"
    assert trend_hover("trend", trend) == title
    assert f"<title>{html.escape(title)}</title>" in sparkline("trend", trend)


@pytest.mark.slow
def test_the_hover_gives_the_findings_q1_and_q4(sample_store):
    """sao-r7's first length point is above its first quarter; sao-r6's think share in the hover
    is the pooled Q1 and Q4 share of the finding beside it ("0.074 in Q1 -> 0.482 in Q4")."""
    from trajlens.engine.classify import run_measures
    from trajlens.report import classify_store

    trends = run_trends(sample_store, "sao-r7", run_measures(sample_store, "sao-r7"), "train")[0]
    assert trends["model tokens"].points[0] == (1, pytest.approx(408.4))  # above the first quarter's value
    assert trend_hover("model tokens", trends["model tokens"]) == "model tokens: 346 in the first quarter -> 398 in the last"
    classify_store(sample_store, ["sao-r6"])
    think = run_trends(sample_store, "sao-r6", run_measures(sample_store, "sao-r6"), "train")[0]["think share"]
    assert trend_hover("think share", think) == "think share: 0.074 in the first quarter -> 0.482 in the last"


@pytest.mark.slow
def test_a_channel_that_collapsed_is_not_called_saturated(sample_store):
    """causal-multireward's format channel fell to 0 (attribution: collapsed); multireward's rose to
    its maximum of 1: both leave the group advantage without signal, the finding says which."""
    from trajlens.attribution.causes import channel_collapse, collapse_onset
    from trajlens.attribution.statistics import channel_measures
    from trajlens.report.scalars import channel_findings
    from trajlens.run.partitions import scan_run_table

    collapsed = next(f for f in channel_findings(sample_store, "causal-multireward") if "channel format" in f)
    trajectories = scan_run_table(sample_store, "causal-multireward", "trajectories").filter(
        pl.col("split") == "train").collect()
    channels = channel_measures(trajectories)
    change = channel_collapse(channels["step"].to_numpy(), channels["mean:format"].to_numpy())
    assert change is not None  # what `trajlens attribute` calls collapsed
    onset = collapse_onset(channels["step"].to_numpy(), channels["mean:format"].to_numpy(), change)
    assert 5 <= onset <= 12  # its step mean halves from about step 8 on
    assert f"(collapsed from step {onset}: its step mean {change.first:.2f} -> {change.last:.2f}; " in collapsed
    assert "saturated" not in collapsed and collapsed.kind == "saturated_channel"
    saturated = next(f for f in channel_findings(sample_store, "multireward") if "channel format" in f)
    assert "(saturated: its step mean 0.82 -> 0.99; its group advantage carries no signal)" in saturated


def test_the_class_line_beside_a_run_s_story_is_the_story_s_class():
    """The sparkline drew the class that moved most (edit, on a run whose story is think's rise and
    fall): it draws the class of the leading finding, and the one that moved most only when the
    lead speaks of no class's share."""
    from trajlens.report.findings import RECOMPUTED, Finding
    from trajlens.report.overview import lead_class_trend, moved_share

    think, edit = Trend([(1, 0.1), (2, 0.7)], 0.1, 0.2), Trend([(1, 0.2), (2, 0.5)], 0.2, 0.55)
    trends = {"reward": Trend([(1, 0.0), (2, 1.0)], 0.0, 1.0), "edit share": edit}
    drift = Finding("estimator artefact: think grew", "attribution_artefact", "attribution", subject="share:think")
    drawn = lead_class_trend(trends, {"think": think, "edit": edit}, [drift])
    assert list(drawn) == ["reward", "think share"] and drawn["think share"] is think
    assert moved_share(drawn) == ("think", True)
    critic = Finding("critic grad_norm at its clip", "explained_variance", "summary-critic")
    assert lead_class_trend(trends, {"think": think, "edit": edit}, [critic, drift]) is trends
    recomputed = Finding("recomputed under gae_raw: think grew", "attribution_artefact", "attribution", RECOMPUTED,
                         subject="share:think")
    assert lead_class_trend(trends, {"think": think, "edit": edit}, [recomputed]) is trends
