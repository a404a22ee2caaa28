"""Comparisons on the sample runs read as the seed reports say they should."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from cli_run import run_cli as cli

from trajlens.compare import COMPARISON_COLUMNS, compare, describe

pytestmark = pytest.mark.slow

QUERIES = Path(__file__).resolve().parents[2] / "queries"


def row(table: pl.DataFrame, measure: str) -> dict:
    return table.filter(pl.col("measure") == measure).row(0, named=True)


def test_r7_last_quarter_suite_rate_against_r6_is_not_significant(sample_store):
    table = compare(sample_store, "sao-r6:Q4", "sao-r7:Q4")
    assert table.columns == list(COMPARISON_COLUMNS)
    suite = row(table, "ran_suite")
    assert suite["a_value"] == pytest.approx(0.515, abs=0.01) and suite["b_value"] == pytest.approx(0.48, abs=0.01)
    assert suite["a_low"] < suite["a_value"] < suite["a_high"]
    assert suite["difference_low"] < 0 < suite["difference_high"] and not suite["significant"]
    sentence = describe(table.filter(pl.col("measure") == "ran_suite"))[0]
    assert sentence.startswith("sao-r7 (Q4) runs the full suite 0.48 of the time against sao-r6 (Q4)'s 0.52; "
                               "not significant (p = ")
    think = row(table, "share:think")
    assert think["a_value"] > 0.4 and think["b_value"] < 0.1 and think["significant"]
    assert think["p_adjusted"] >= think["p_value"]
    # adjusted over the table's rows: no more significant than unadjusted, and some fewer
    raw = (table["p_value"] < 0.05).sum()
    assert table["significant"].sum() < raw
    assert table.filter(pl.col("significant"))["p_adjusted"].max() < 0.05
    effects = table["effect_size"].drop_nulls().abs().to_list()
    assert effects == sorted(effects, reverse=True)


def test_r6_against_r7_shows_the_think_runs_and_the_density_shift(sample_store):
    table = compare(sample_store, "sao-r6", "sao-r7")
    words = "\n".join(describe(table, 5))
    assert "runs of consecutive think calls" in words and "edits" in words
    assert row(table, "mean:think_runs")["difference"] < 0 and row(table, "mean:edits_per_turn")["difference"] > 0
    # Both runs have critic values: their GAE statistics are compared label by label.
    raw_std = row(table, "advantage:gae_raw:std")
    assert raw_std["a_n"] == 135 and raw_std["b_n"] == 200
    assert row(table, "advantage:gae_whitened:std")["b_value"] == pytest.approx(1.0, abs=1e-3)


def test_measures_with_the_same_numbers_are_one_row(sample_store):
    table = compare(sample_store, "sao-r6", "sao-r7")
    turns = row(table, "mean:num_turns")
    assert turns["same_as"] == "mean:n_calls"  # one call per turn in these runs
    assert "mean:n_calls" not in table["measure"].to_list()
    numbers = table.select("kind", "a_value", "a_low", "a_high", "b_value", "b_low", "b_high")
    assert numbers.unique().height == table.height


def test_grpo_leg_against_r7_grows_longer_and_keeps_running_the_suite(sample_store):
    table = compare(sample_store, "grpo-leg:Q4", "sao-r7:Q4")
    suite = row(table, "ran_suite")
    assert suite["a_value"] > 0.7 and suite["b_value"] < 0.5 and suite["significant"]
    assert row(table, "mean:model_tokens")["difference"] < 0  # GRPO's responses are longer
    assert row(table, "mean:readback_share")["difference"] < 0 and row(table, "mean:readback_share")["significant"]
    assert row(table, "mean:edits_per_turn")["difference"] > 0  # SAO changes by density
    assert not table.filter(pl.col("measure").str.starts_with("advantage:")).height  # no shared estimator


def test_two_estimators_of_one_run_compare_advantages_only(sample_store):
    from trajlens.compare import title

    table = compare(sample_store, "sao-r6:gae_raw", "sao-r6:gae_whitened")
    assert table["measure"].str.starts_with("advantage:gae_raw|gae_whitened:").all()
    assert title(table) == "sao-r6 recomputed under gae_raw vs under gae_whitened"
    sentence = describe(table.filter(pl.col("measure").str.ends_with(":std")))[0]
    assert sentence.startswith("sao-r6 recomputed under gae_whitened has a batch advantage std of ")
    assert "against sao-r6 recomputed under gae_raw's " in sentence and "|" not in sentence
    negative = row(table, "advantage:gae_raw|gae_whitened:all_negative")
    assert negative["a_value"] == pytest.approx(3 / 135) and negative["b_value"] == 0.0
    assert row(table, "advantage:gae_raw|gae_whitened:std")["b_value"] == pytest.approx(1.0, abs=1e-3)


def test_saved_query_agrees_with_the_python_comparison(sample_store):
    from trajlens.report.build import classify_store

    classify_store(sample_store, ["sao-r6", "sao-r7"])
    frame = sample_store.sql((QUERIES / "compare_runs.sql").read_text(), {"run_a": "sao-r6", "run_b": "sao-r7"})
    turns = frame.filter(pl.col("measure") == "num_turns").row(0, named=True)
    python = row(compare(sample_store, "sao-r6", "sao-r7"), "mean:num_turns")
    assert turns["difference"] == pytest.approx(python["difference"], abs=1e-3)
    assert turns["n_a"] == 1350 and turns["n_b"] == 1000




def test_compare_command_writes_three_files(sample_store, tmp_path):
    done = cli("compare", sample_store.path, "sao-r6:Q1", "sao-r6:Q4", "--out", tmp_path / "cmp", "--top", "2",
               "--rows", "5")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "sao-r6 (Q4) against sao-r6 (Q1)" and lines[1].startswith("- sao-r6 (Q4) ")
    assert "adjusted for" in done.stdout and "Benjamini-Hochberg" in done.stdout
    table_rows = [line for line in lines if line.startswith(("share:", "uses:", "mean:", "verification:", "ran_suite",
                                                              "resolved", "advantage:"))]
    assert len(table_rows) == 5 and "more rows" in done.stdout and "full table of" in done.stdout
    csv = pl.read_csv(tmp_path / "cmp" / "comparison.csv")
    assert "share:think" in csv["measure"].to_list()
    page = (tmp_path / "cmp" / "comparison.html").read_text()
    assert "<table>" in page and "Benjamini-Hochberg" in page
    assert "| share:think |" in (tmp_path / "cmp" / "comparison.md").read_text()


@pytest.mark.parametrize("a, b, message", [
    ("sao-r6:Q9", "sao-r7", "'Q9' is neither a stage of run 'sao-r6' (Q1, Q2, Q3, Q4) nor an estimator label"),
    ("nope", "sao-r7", "run 'nope' is not in the store"),
    ("resume-lr", "sao-r7", "side 'resume-lr': no training trajectories to compare"),
])
def test_compare_errors_are_one_line(sample_store, a, b, message):
    done = cli("compare", sample_store.path, a, b)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], done.stderr
