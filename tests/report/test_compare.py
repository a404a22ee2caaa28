"""Comparisons on the sample runs read as the seed reports say they should."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from polars.testing import assert_frame_equal
import pytest
from cli_run import run_cli as cli

from trajlens.compare import COMPARISON_COLUMNS, _stats, compare, describe, p_text

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
    # adjusted over the table's rows: never below the raw p, so no more significant than unadjusted
    raw = (table["p_value"] < 0.05).sum()
    assert table["significant"].sum() <= raw
    tested = table.drop_nulls("p_value")
    assert (tested["p_adjusted"] >= tested["p_value"]).all() and (tested["p_adjusted"] > tested["p_value"]).any()
    assert table.filter(pl.col("significant"))["p_adjusted"].max() < 0.05
    effects = table["effect_size"].drop_nulls().abs().to_list()
    assert effects == sorted(effects, reverse=True)
    # behaviour and advantage rows are two families: a behaviour's adjusted p does not depend on the other
    alone = compare(sample_store, "sao-r6:Q4", "sao-r7:Q4", advantages=False)
    assert alone.height < table.height and row(alone, "ran_suite")["p_adjusted"] == suite["p_adjusted"]
    behaviour = table.filter(~pl.col("measure").str.starts_with("advantage:")).drop_nulls("p_value")
    assert behaviour["p_adjusted"].to_list() == _stats.benjamini_hochberg(behaviour["p_value"].to_list())


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
    said = table.filter((pl.col("a_value") != 0) | (pl.col("b_value") != 0))  # zeros are not folded (below)
    numbers = said.select("kind", "a_value", "a_low", "a_high", "b_value", "b_low", "b_high")
    assert numbers.unique().height == said.height


def test_measures_that_are_zero_on_both_sides_are_not_folded(sample_store):
    """Zeros coincide without meaning: a class neither run used keeps its own row, as the
    report's tables keep it (trajlens.intervals.repeat_key)."""
    table = compare(sample_store, "causal-r6", "causal-r6-whitened", advantages=False)
    zeros = table.filter((pl.col("a_value") == 0) & (pl.col("b_value") == 0))
    assert {"share:submit", "share:run_script", "share:other"} <= set(zeros["measure"].to_list())
    assert zeros["same_as"].null_count() == zeros.height
    assert row(table, "ran_suite")["same_as"] == "uses:test_suite"  # equal numbers that say something still fold


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




def test_two_stages_of_a_run_compare_as_the_checks_stage_change_finds(sample_store, monkeypatch):
    """One truth: sao-r6's Q1 against its Q4 gives, row for row, the stage values, intervals,
    effective sizes, z and p of the checks' first-to-last stage_change on the same steps, and
    of the stage report's quartiles (every trajectory drawn)."""
    from trajlens.checks.evaluate import check_run
    from trajlens.checks.spec import parse_checks
    from trajlens.classify import stage_report
    from trajlens.intervals import stage_z
    from trajlens.run import change

    table = compare(sample_store, "sao-r6:Q1", "sao-r6:Q4", advantages=False)
    measures = ("ran_suite", "share:think", "mean:num_turns")
    seen: list[tuple[dict, dict, float | None, float | None]] = []
    stage_p_value = change.stage_p_value  # the stage test of the checks' stage_change (trajlens.run.change)

    def spy(first: dict, second: dict, proportion: bool) -> float | None:
        p = stage_p_value(first, second, proportion)
        seen.append((first, second, stage_z(first, second, proportion), p))
        return p

    monkeypatch.setattr(change, "stage_p_value", spy)
    checks = parse_checks({"checks": {measure.replace(":", "_"): {
        "measure": measure, "condition": "stage_change", "stages": "quartiles", "compare": "first_to_last",
        "direction": "increase"} for measure in measures}}, "test")
    results = check_run(sample_store.path, checks, "sao-r6").results
    assert len(seen) == len(measures)  # one first-to-last pair per check, in the checks' order
    for measure, result, (q1, q4, z, p) in zip(measures, results, seen):
        found = row(table, measure)
        assert (q1["stage"], q4["stage"]) == ("Q1", "Q4")
        for side, stage in (("a", q1), ("b", q4)):
            for column, theirs in (("value", "value"), ("low", "low"), ("high", "high"), ("n", "n_effective")):
                assert found[f"{side}_{column}"] == pytest.approx(stage[theirs], rel=1e-9, abs=1e-12), (measure, side, column)
        assert (result.evidence.value, result.evidence.low, result.evidence.high) == pytest.approx(
            (found["b_value"], found["b_low"], found["b_high"]), rel=1e-9)
        assert found["statistic"] == pytest.approx(z, rel=1e-9)
        assert found["p_value"] == pytest.approx(p, rel=1e-9)
    report = stage_report(sample_store, run_id="sao-r6", split="train", n=10**6)
    for measure, (q1, q4, z, p) in zip(measures, seen):
        for stage in (q1, q4):
            staged = report.rates.filter((pl.col("metric") == measure) & (pl.col("stage") == stage["stage"])).row(0, named=True)
            assert (staged["value"], staged["ci_low"], staged["ci_high"], staged["n_effective"]) == pytest.approx(
                (stage["value"], stage["low"], stage["high"], stage["n_effective"]), rel=1e-9), (measure, stage["stage"])
        if measure != "mean:num_turns":  # the stage report tests the proportions
            change = report.changes.filter((pl.col("metric") == measure) & (pl.col("comparison") == "first_to_last"))
            assert change["z"].item() == pytest.approx(z, rel=1e-9)
            assert change["p_value"].item() == pytest.approx(p, rel=1e-9)
    suite = row(table, "ran_suite")  # the numbers `trajlens check` prints for suite_rate_decline
    assert (suite["a_value"], suite["a_low"], suite["a_high"]) == pytest.approx((0.6412, 0.5888, 0.6904), abs=5e-5)
    assert suite["p_value"] == pytest.approx(0.00102, abs=5e-6)


def test_a_call_share_of_one_trajectory_counts_its_calls():
    """With one trajectory there is no spread between trajectories: the share's interval is
    Wilson's on its calls, as the checks' pooled estimate has it (not on one trajectory)."""
    from trajlens.checks.step_measures import MEAN_TRAJECTORY_MEASURES
    from trajlens.compare.table import estimates

    counts = {"count_think": 3, "n_calls": 10}
    one = pl.DataFrame({"step": [1], "ran_suite": [False],
                        **{c: [float(counts.get(c, 0))] for c in MEAN_TRAJECTORY_MEASURES}})
    found = estimates(["share:think", "verification:test_suite"], one)
    # Wilson's interval of 3 of 10: 0.3 [0.10779, 0.60322]
    assert found["share:think"] == pytest.approx((0.3, 0.10779, 0.60322, 10), abs=5e-6)
    assert found["verification:test_suite"] is None  # no verification calls


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
    sentences_only = cli("compare", sample_store.path, "sao-r6:Q1", "sao-r6:Q4", "--rows", "0")
    assert sentences_only.returncode == 0 and "measure" not in sentences_only.stdout
    assert sentences_only.stdout.splitlines()[1:3] == lines[1:3]
    csv = pl.read_csv(tmp_path / "cmp" / "comparison.csv")
    assert "share:think" in csv["measure"].to_list()
    # the full table: every digit of the p-values that print as 1e-12 (once rounded to 0.000000)
    assert_frame_equal(csv.select("measure", "p_value", "p_adjusted"),
                       compare(sample_store, "sao-r6:Q1", "sao-r6:Q4").select("measure", "p_value", "p_adjusted"),
                       check_exact=True)
    assert 0 < csv["p_value"].min() < 1e-6
    page = (tmp_path / "cmp" / "comparison.html").read_text()
    assert "<table>" in page and "Benjamini-Hochberg" in page
    assert "| share:think |" in (tmp_path / "cmp" / "comparison.md").read_text()


@pytest.mark.parametrize("a, b, message", [
    ("sao-r6:Q9", "sao-r7", "'Q9' is neither a stage of run 'sao-r6' (Q1, Q2, Q3, Q4) nor an estimator label"),
    ("nope", "sao-r7", "run 'nope' is not in the store"),
    ("resume-lr", "sao-r7", "side 'resume-lr': no trajectories to compare"),
    # a label the other side's data cannot give is no table without advantages
    ("sao-r6:gae_raw", "grpo-leg", "side 'grpo-leg': run 'grpo-leg' has no gae_raw advantages, and its data cannot give "
                                   "them (estimator labels it has: grpo, dr_grpo, rloo"),
    ("grpo-leg:grpo", "sao-r6:Q4", "side 'sao-r6:Q4': run 'sao-r6' has no grpo advantages"),
    # overlapping sides are not two samples
    ("sao-r6", "sao-r6:Q4", "sides 'sao-r6' and 'sao-r6:Q4' overlap: the stage's trajectories are part of the whole run's"),
    ("sao-r6:gae_raw", "sao-r6", "sides 'sao-r6:gae_raw' and 'sao-r6' are the same trajectories under the same advantages"),
])
def test_compare_errors_are_one_line(sample_store, a, b, message):
    done = cli("compare", sample_store.path, a, b)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], done.stderr


def test_an_out_named_like_a_file_is_refused_before_any_work(sample_store, tmp_path):
    """compare writes a folder: --out x.csv made a folder called x.csv holding comparison.csv."""
    done = cli("compare", sample_store.path, "sao-r6:Q1", "sao-r6:Q4", "--out", tmp_path / "x.csv")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == (f"error: --out {tmp_path / 'x.csv'}: names a file; compare writes a folder (comparison.csv, "
                           "comparison.md and comparison.html): name the folder\n")
    assert list(tmp_path.iterdir()) == []


def test_a_declared_stage_without_steps_says_so(sample_store):
    done = cli("compare", sample_store.path, "sao-r6:a", "sao-r6:b", "--stages", "a:1-10,b:200-300")
    assert done.returncode == 1
    assert done.stderr == "error: side 'sao-r6:b': stage 'b' (steps 200-300) holds no training step of run 'sao-r6'\n"


def test_a_comparison_does_not_change_with_what_earlier_commands_stored(samples_store_copy):
    """Advantages another command saved under labels the report does not recompute (opo, gpg
    here) join neither the table nor the family its p-values are adjusted over."""
    import trajlens

    before = compare(trajlens.open(samples_store_copy), "grpo-leg:Q1", "grpo-leg:Q4")
    for estimator in ("opo", "gpg"):
        assert cli("advantages", samples_store_copy, "--run", "grpo-leg", "-e", estimator).returncode == 0
    store = trajlens.open(samples_store_copy)
    assert {"opo", "gpg"} <= set(store.sql("SELECT DISTINCT estimator FROM advantage_batches")["estimator"])
    after = compare(store, "grpo-leg:Q1", "grpo-leg:Q4")
    assert after.equals(before)
    assert not after["measure"].str.contains(":opo:|:gpg:").any()
    # a side may still name a stored label
    assert compare(store, "grpo-leg:opo", "grpo-leg:gpg").height > 0


def test_the_words_tell_no_measure_on_which_the_sides_are_equal(sample_store):
    table = compare(sample_store, "sao-r6:Q4", "sao-r7:Q4")
    equal = table.with_columns(pl.lit(0.0).alias("difference"), pl.lit(0.0).alias("effect_size"))
    assert describe(equal) == []
    assert len(describe(table)) == 3


def test_the_notes_name_the_t_tests_the_p_values_come_from(sample_store):
    """The stage test reads its statistic on Student's t (``intervals.stage_p_value``): the stage
    report and the comparison's note name the t tests the comparison's own test column names,
    and no z test."""
    import trajlens
    from trajlens.report.compare_page import comparison_section

    table = compare(sample_store, "sao-r6:Q1", "sao-r6:Q4")
    names = set(table["test"].unique())
    assert names == {"two-proportion t", "Welch t"}
    note = comparison_section("c", table, []).lower()
    assert all(f"{name.lower()} test" in note for name in names) and "z test" not in note
    stage = trajlens.stage_report(sample_store, run_id="sao-r6").to_markdown()
    changes = stage[stage.index("## First stage to last"):]
    assert "Two-proportion t test on the N=80 sample of each stage" in changes and "z test" not in changes
    assert "| change (sample) | t | p |" in changes


def test_a_p_value_below_the_floor_reads_the_same_on_every_surface(sample_store, tmp_path):
    """r7 against r6 has p-values that round to 0.0: the console's table, its sentences, the
    Markdown and the page each say ``< 1e-15`` (one function, :func:`p_text`), never ``0``."""
    assert (p_text(0.0), p_text(3e-16), p_text(0.0123), p_text(None)) == ("< 1e-15", "< 1e-15", "0.012", "")
    done = cli("compare", sample_store.path, "sao-r6", "sao-r7", "--no-advantages", "--rows", "3",
               "--out", tmp_path / "cmp")
    assert done.returncode == 0, done.stderr
    table = compare(sample_store, "sao-r6", "sao-r7", advantages=False)
    assert table["p_value"].min() == 0.0  # what the rows below must not print as 0
    first = table.row(0, named=True)
    assert first["p_value"] < 1e-15 and first["p_adjusted"] < 1e-15
    line = next(line for line in done.stdout.splitlines() if line.startswith(first["measure"]))
    assert line.split()[-6:-2] == ["<", "1e-15", "<", "1e-15"] and " 0 " not in line, line
    assert "(p < 1e-15, p < 1e-15 adjusted" in done.stdout
    markdown = (tmp_path / "cmp" / "comparison.md").read_text()
    assert f"| {first['measure']} |" in markdown and "| < 1e-15 | < 1e-15 * |" in markdown
    assert '<td class="num">&lt; 1e-15</td>' in (tmp_path / "cmp" / "comparison.html").read_text()


def test_a_comparison_without_advantage_rows_says_why(sample_store):
    """sao-r6 (single rollouts, GAE) and grpo-leg (groups, GRPO) share no estimator: the advantage
    rows are missing for a reason the console gives, not without a word; with --no-advantages
    nothing is said."""
    done = cli("compare", sample_store.path, "sao-r6", "grpo-leg", "--rows", "0")
    assert done.returncode == 0, done.stderr
    said = ("no advantage rows: no estimator can be recomputed on both sides (`trajlens advantages` says what each "
            "one needs)")
    assert said in done.stdout.splitlines()
    quiet = cli("compare", sample_store.path, "sao-r6", "grpo-leg", "--rows", "0", "--no-advantages")
    assert said not in quiet.stdout and "advantage" not in quiet.stdout.lower()
    both = cli("compare", sample_store.path, "sao-r6:Q1", "sao-r6:Q4", "--rows", "0")
    assert "no advantage rows" not in both.stdout
