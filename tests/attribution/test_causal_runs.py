"""Attribution on the shipped causal runs: the outcomes the loop caused, found from the data alone."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from cli_run import run_cli as cli
from stores import copy_store

import trajlens
from trajlens.attribution import RECOMPUTATIONS, attribute, attribution_html, attribution_markdown
from trajlens.attribution.drift import DriftConfig

pytestmark = pytest.mark.slow

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
PICK = {r.label: r for r in RECOMPUTATIONS}


def _recs(*labels):
    return tuple(PICK[label] for label in labels)


@pytest.fixture(scope="module")
def store(samples_store_path, tmp_path_factory):
    """The sample runs, copied: the tests write attribution tables into it."""
    return trajlens.open(copy_store(samples_store_path, tmp_path_factory.mktemp("causal") / "store"))


@pytest.fixture(scope="module")
def r6(store):
    return attribute(store, "causal-r6", _recs("gae_raw", "gae_whitened"))


def test_r6_names_think_the_negative_streak_and_the_runs_estimator(r6):
    assert r6.own.label == "gae_raw" and r6.own.aggregation == "token-mean"
    think = r6.drift.filter(pl.col("primary_class") == "think")
    assert think.height == 2 and think["direction"][0] == "grew"
    own = think.filter(pl.col("own")).row(0, named=True)
    assert own["estimator"] == "gae_raw" and own["pivot_kind"] == "all-negative batches"
    streak = {int(s) for part in own["pivotal_steps"].split(", ") for s in part.split("-")}
    assert streak <= set(range(58, 65)) and len(streak) >= 2  # the hard steps, nothing else
    assert own["window_low"] > 0.5  # think calls pushed down least: strong positive relative credit
    assert own["r"] > 0.3
    whitened = think.filter(~pl.col("own")).row(0, named=True)
    assert whitened["estimator"] == "gae_whitened"
    assert abs(whitened["window_relative_credit"]) < 0.1  # the counterfactual gives the same calls no such credit
    assert whitened["window_low"] < 0.1
    sentence = next(f for f in r6.findings if "think grew" in f)
    assert sentence.startswith("estimator artefact: think grew")  # the verdict comes first
    assert "under the run's estimator (gae_raw)" in sentence and "all-negative batches" in sentence
    verdict = r6.verdicts.filter(pl.col("primary_class") == "think").row(0, named=True)
    assert verdict["verdict"] == "estimator artefact" and verdict["estimator"] == "gae_raw"
    assert verdict["push_low"] > 0 and "gae_whitened" in verdict["dissenting"]
    assert abs(verdict["onset_step"] - 60) <= 5
    assert any(f.startswith("all-negative batches under the run's estimator (gae_raw)") for f in r6.findings)
    assert r6.flagged


def test_r6_tables_are_store_views_that_join_call_classes(store, r6):
    from trajlens.report import classify_store

    classify_store(store, ["causal-r6"])
    query = (Path(__file__).resolve().parents[2] / "queries" / "call_credit_by_class.sql").read_text()
    frame = store.sql(query, {"run_id": "causal-r6", "estimator": "gae_raw"})
    assert set(frame["aggregation"]) == {"token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"}
    assert frame["fallback_calls"].sum() == 0
    assert frame["calls"].sum() == 4 * 14400
    credit = store.sql("SELECT count(*) AS n, count(token_start) AS spans FROM call_credit WHERE run_id = 'causal-r6'")
    assert credit.row(0) == (8 * 14400, 8 * 14400)
    rows = store.table("class_credit").filter(pl.col("run_id") == "causal-r6").collect()
    assert {"relative_credit", "relative_credit_scaled", "stage"} <= set(rows.columns)


def test_whitened_twin_flags_nothing(store):
    result = attribute(store, "causal-r6-whitened", _recs("gae_raw", "gae_whitened"), write=False)
    assert result.own.label == "gae_whitened"
    assert not result.flagged and result.drift.height == 0
    assert result.step_flags.filter((pl.col("estimator") == "gae_whitened") & pl.col("all_negative")).height == 0


def test_length_bias_under_sequence_mean_and_not_under_token_mean(store):
    result = attribute(store, "causal-grpo-length", _recs("grpo"), write=False)
    bias = {row["aggregation"]: row for row in result.length_bias.iter_rows(named=True)}
    assert bias["seq-mean-token-mean"]["elasticity_high"] < -0.7
    assert abs(bias["token-mean"]["elasticity"]) < 0.2
    assert any("response length grew" in f for f in result.flags)
    # the aggregation, not the estimator, is blamed, and the unbiased aggregation is named
    assert any(f.startswith("aggregation artefact: response length grew")
               and "seq-mean-token-mean weighs tokens by length, which token-mean" in f for f in result.cause_verdicts)


def test_r6_length_fell_with_the_calls_it_stopped_making(r6):
    """causal-r6's responses shrank because edits, views and searches stopped, not because its calls got shorter."""
    import re

    line = next(f for f in r6.cause_verdicts if "response length shrank" in f)
    assert line.startswith("unexplained: ")
    split = re.search(r"of the (-\d+) token change, the calls made account for (-\d+) \(edit (-\d+): ([\d.]+) -> ([\d.]+) "
                      r"calls of \d+ tokens.*\), tokens per call for ([-+]\d+) and other tokens for ([-+]\d+);", line)
    assert split, line
    change, calls, edit, edits_first, edits_last, per_call, other = (float(g) for g in split.groups())
    assert abs(calls + per_call + other - change) <= 2  # each rounded to a token
    assert calls / change > 0.9 and edit < -100 and edits_first >= 1.5 and edits_last <= 0.1
    assert "it follows the calls made, which account for" in line and "(fewer edit, " in line


def test_the_length_attribution_judges_is_the_model_tokens_the_checks_read(tmp_path):
    """A log whose ``model_tokens`` is not its response mask's count (an API usage count): the
    attribution verdict's length and the shipped length check read the same number."""
    import re
    import shutil

    run = tmp_path / "run"
    shutil.copytree(SAMPLE / "causal-grpo-length", run)
    for part in (run / "trajectories").glob("step=*/*.parquet"):
        frame = pl.read_parquet(part)
        frame.with_columns(pl.col("model_tokens") * 13 // 10).write_parquet(part)
    store = tmp_path / "store"
    assert cli("ingest", run, "--store", store, "--run", "len").returncode == 0
    opened = trajlens.open(store)
    result = attribute(opened, "len", _recs("grpo"), write=False)
    verdict = next(f for f in result.cause_verdicts if "response length grew" in f)
    grew = re.search(r"response length grew: (\d+) -> (\d+) model tokens", verdict)
    checked = cli("check", store, "--run", "len")
    line = next(line for line in checked.stdout.splitlines() if line.startswith("response_length_inflation"))
    quarters = re.search(r"Q1 (\d+) \[[^]]*\] -> Q4 (\d+)", line)
    assert grew and quarters and grew.groups() == quarters.groups(), (verdict, line)
    masked = opened.sql("SELECT avg(model_tokens) AS m FROM trajectories WHERE run_id = 'len' AND step <= 15")["m"][0]
    assert int(grew.group(1)) == round(masked)


def test_format_collapses_under_sum_then_normalise_and_not_under_gdpo(store):
    recs = _recs("sum_then_normalize", "gdpo_verl")
    summed = attribute(store, "causal-multireward", recs, write=False)
    gdpo = attribute(store, "causal-multireward-gdpo", recs, write=False)
    assert summed.own.label == "sum_then_normalize" and gdpo.own.label == "gdpo_verl"
    assert any(f.startswith("estimator artefact: reward channel format collapsed") and "gdpo_verl" in f for f in summed.flags)
    assert not any("reward channel format collapsed" in f for f in gdpo.findings)
    # the fall there was, and that it is no collapse, rather than nothing
    assert ("no reward channel collapsed (fell by 50% or more, at p < 0.001): the largest fall, reward channel format "
            "0.72 -> 0.70 (p = 0.42), falls short of it") in gdpo.findings
    assert not any(f.startswith("no reward channel collapsed") for f in summed.findings)
    # from the step its mean over 5 steps had fallen a quarter of the way (0.42 -> 0.00: under 0.32 from step 8)
    assert any(f.startswith("estimator artefact: reward channel format collapsed: 0.42 -> 0.00 from step 8 (")
               for f in summed.cause_verdicts), summed.cause_verdicts
    # dated the same way whatever lag the credit regressions use, as the report's channel finding dates it
    lagged = attribute(store, "causal-multireward", recs, write=False, drift=DriftConfig(k=1))
    assert any("reward channel format collapsed: 0.42 -> 0.00 from step 8 (" in f for f in lagged.cause_verdicts)
    assert summed.channels["rank_misalignment"].drop_nulls().mean() > 0


def test_fragments_render(r6):
    markdown = attribution_markdown(r6)
    assert markdown.startswith("## Attribution: causal-r6") and "| think |" in markdown
    html = attribution_html(r6)
    assert html.startswith("<section") and "<table>" in html and "&" not in html.replace("&gt;", "").replace("&lt;", "").replace("&#x27;", "")


def test_cli_writes_the_verdicts_as_json(samples_store_copy, tmp_path):
    import json

    done = cli("attribute", samples_store_copy, "--run", "causal-r6", "-e", "gae_raw=gae", "-e", "gae_whitened=gae",
               "--option", "gae_raw.whiten=false", "--option", "gae_whitened.whiten=true",
               "--aggregation", "token-mean", "--json", tmp_path / "v.json")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("Verdicts:", 1)[1].lstrip().startswith("- estimator artefact: think grew")  # largest first
    document = json.loads((tmp_path / "v.json").read_text())
    assert document["estimator"] == "gae_raw" and document["aggregation"] == "token-mean"
    think = next(d for d in document["drifts"] if d["class"] == "think")
    assert think["verdict"] == "estimator artefact" and think["direction"] == "grew"
    assert abs(think["onset_step"] - 60) <= 5 and think["dissenting"] == ["gae_whitened"]
    assert think["push"]["low"] > 0 and {c["estimator"] for c in think["counterfactuals"]} == {"gae_raw", "gae_whitened"}
    whitened = next(p for p in think["projection"] if p["estimator"] == "gae_whitened")
    assert whitened["projected_end"] < 0.1 < think["share_last"]  # whitening would have stopped it
    assert isinstance(document["causes"], list)


def test_cli_attribute_and_its_errors(store, tmp_path):
    done = cli("attribute", store.path, "--run", "causal-r6-whitened", "-e", "raw=gae", "--option", "whiten=false",
               "--aggregation", "token-mean", "--out", tmp_path / "a.md")
    assert done.returncode == 0, done.stderr
    assert "## Attribution: causal-r6-whitened" in done.stdout and (tmp_path / "a.md").exists()
    for args, message in (
        (("--run", "nope"), "run 'nope' is not in the store"),
        (("--run", "causal-r6", "-e", "x=gaee"), "estimator must be one of 'gae', 'reinforce'"),
        (("--run", "causal-r6", "--option", "whiten=false"), "--option needs an --estimator"),
        (("--run", "causal-r6", "--k", "90"), "lag k=90: run 'causal-r6' has 90 training steps, "
                                               "so no step has one k steps after it to relate its credit to (k at most 89)"),
    ):
        done = cli("attribute", store.path, *args)
        assert done.returncode == 1 and message in done.stderr and "Traceback" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1


def test_a_token_level_estimator_from_the_registry_credits_calls_by_their_tokens(store):
    from trajlens.estimators import EstimatorChoice

    found = attribute(store, "causal-r6", (EstimatorChoice("rpp", "reinforce_plus_plus", {}),), write=False)
    credit = found.class_credit.filter(pl.col("estimator") == "rpp")
    assert credit.height > 0
    # Token arrays were used: no call fell back to its trajectory's advantage.
    assert found.fallback_calls == 0
    assert credit["fallback_share"].max() == 0.0


def test_the_saved_attribution_reads_back_whole_and_the_report_does_not_recompute(store, r6, monkeypatch):
    from polars.testing import assert_frame_equal

    import trajlens.attribution.api as api
    from trajlens.attribution.report import run_section
    from trajlens.attribution.saved import load_attribution

    saved = load_attribution(store, "causal-r6")
    for name in ("class_credit", "class_summary", "length_bias", "step_flags", "drift"):
        assert_frame_equal(getattr(saved, name), getattr(r6, name))
    assert saved.findings == r6.findings and saved.flags == r6.flags and saved.own == r6.own
    assert [r.label for r in saved.recomputations] == ["gae_raw", "gae_whitened"]
    assert saved.call_credit.select(pl.len()).collect().item() == r6.call_credit.select(pl.len()).collect().item()

    def no_recomputation(*args, **kwargs):
        raise AssertionError("the report recomputed the attribution")

    monkeypatch.setattr(api, "attribute", no_recomputation)
    monkeypatch.setattr(api, "step_call_credit", no_recomputation)
    assert run_section(store, "causal-r6") == attribution_html(r6)
    assert load_attribution(store, "causal-grpo-length") is None


def test_the_report_leads_with_the_saved_verdicts(store, r6):
    from trajlens.report.findings import attribution_findings, ranked

    findings = attribution_findings(store, "causal-r6")
    assert findings[0].startswith("estimator artefact: think grew 0.08 -> 0.93 from step 60 (gae_raw / token-mean")
    assert findings[0].kind == "attribution_artefact" and findings[0].evidence == "attribution"
    unexplained = [f for f in findings if f.startswith("unexplained")]
    assert ranked(unexplained + findings)[0] == findings[0]  # an artefact outweighs an unexplained drift
    assert attribution_findings(store, "causal-grpo-length") == []  # not attributed


def test_the_projection_of_a_twin_matches_what_the_twin_did(store):
    recs = _recs("gae_raw", "gae_whitened")
    raw = attribute(store, "causal-r6", recs, write=False)
    whitened = attribute(store, "causal-r6-whitened", recs, write=False)

    def end(result, estimator, name):
        return result.projection.filter((pl.col("estimator") == estimator) & (pl.col("primary_class") == name)).row(0, named=True)

    projected, actual = end(raw, "gae_whitened", "think"), end(whitened, "gae_whitened", "think")
    assert end(raw, "gae_raw", "think")["share_end"] > 0.8
    assert abs(projected["projected_end"] - actual["share_end"]) < 0.05  # whitening would have stopped it
    assert projected["projected_low"] <= actual["share_end"] + 0.02 and projected["projected_high"] < 0.2

    recs = _recs("sum_then_normalize", "gdpo_verl")
    summed = attribute(store, "causal-multireward", recs, write=False)
    gdpo = attribute(store, "causal-multireward-gdpo", recs, write=False)
    projected, actual = end(summed, "gdpo_verl", "submit"), end(gdpo, "gdpo_verl", "submit")
    assert projected["share_end"] < 0.02 and actual["share_end"] > 0.1  # collapsed; kept under GDPO
    assert projected["projected_low"] > 0.1 and abs(projected["projected_end"] - actual["share_end"]) < 0.2

