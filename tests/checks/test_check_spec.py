"""Check files: the shipped defaults parse, and every kind of bad check is one line naming file, check and field."""

from __future__ import annotations

import pytest

from trajlens.checks import CheckConfigError, default_checks, load_checks, parse_checks
from trajlens.checks.step_measures import MEASURE_FAMILIES, parse_measure
from trajlens.checks.spec import DEFAULTS_FILE


def test_defaults_parse_and_cover_the_seed_alarms():
    checks = {check.name: check for check in default_checks()}
    assert checks["think_share"].measure == "share:think" and checks["think_share"].above == 0.15
    assert checks["critic_grad_norm_run"].steps == 3 and checks["critic_grad_norm_run"].above == 30.0
    assert checks["suite_rate_decline"].severity == "warning" and checks["suite_rate_decline"].alpha == 0.05
    assert checks["learning_rate_mismatch"].measure == "lr_ratio:*"
    assert checks["critic_explained_variance_unwhitened"].when.describe() == "algorithm.whiten_advantages == false"
    assert DEFAULTS_FILE.read_text().count("[checks.") == len(checks)


def test_every_family_is_documented():
    for family in MEASURE_FAMILIES:
        assert family.doc and family.source


def _problems(tmp_path, text: str) -> list[str]:
    path = tmp_path / "checks.toml"
    path.write_text(text)
    with pytest.raises(CheckConfigError) as caught:
        load_checks(path)
    return caught.value.problems


@pytest.mark.parametrize("body, field, words", [
    ('measure = "share:thinking"\ncondition = "threshold"\nabove = 0.1', "measure", "unknown class 'thinking'"),
    ('measure = "nonsense:x"\ncondition = "threshold"\nabove = 0.1', "measure", "unknown measure"),
    ('measure = "advantage:ppo:std"\ncondition = "threshold"\nabove = 0.1', "measure", "unknown estimator label 'ppo'"),
    ('measure = "share:think"\ncondition = "threshold"\nabove = "high"', "above", "expected a whole number or a number"),
    ('measure = "share:think"\ncondition = "threshold"\nabove = true', "above", "found True"),
    ('measure = "share:think"\ncondition = "threshold"', "above", "needs 'above' or 'below'"),
    ('measure = "share:think"\ncondition = "threshold"\nabove = 0.1\nseverity = "fatal"', "severity", "error or warning"),
    ('measure = "share:think"\ncondition = "threshold"\nabove = 0.1\nwindow = 0', "window", "at least 1"),
    ('measure = "share:think"\ncondition = "consecutive"\nabove = 0.1', "steps", "required"),
    ('measure = "share:think"\ncondition = "threshold"\nabove = 0.1\nsteps = 3', "steps", "not used by condition 'threshold'"),
    ('measure = "ran_suite"\ncondition = "stage_change"\ndirection = "down"', "direction", "increase or decrease"),
    ('measure = "ran_suite"\ncondition = "stage_change"\ndirection = "decrease"\nalpha = 1.5', "alpha", "between 0 and 1"),
    ('measure = "share:think"\ncondition = "threshold"\nabove = 0.1\ntreshold = 2', "treshold", "unknown field"),
    ('measure = "share:think"\ncondition = "spike"', "condition", "expected one of threshold"),
    ('condition = "threshold"\nabove = 0.1', "measure", "required"),
    ('measure = "metric:critic/grad_norm"\ncondition = "threshold"\nabove = 30\nsignificant = true', "measure",
     "no interval for 'significant'"),
    # integers are bounded: a TOML integer has no limit, and the conditions hand them to polars and numpy
    ('measure = "share:think"\ncondition = "threshold"\nabove = 0.1\nwindow = 99999999999999999999', "window",
     "at most 1000000, found 99999999999999999999"),
    ('measure = "share:think"\ncondition = "trend"\ndirection = "increase"\nwindow = 1000001', "window",
     "at most 1000000"),
    # a trend fits a slope to its window: of fewer than 3 steps it could never be judged
    ('measure = "share:think"\ncondition = "trend"\ndirection = "increase"\nwindow = 2', "window",
     "expected at least 3 steps for a trend (a slope with a residual), at most 1000000, found 2"),
    ('measure = "share:think"\ncondition = "trend"\ndirection = "increase"', "window", "required"),
    ('measure = "share:think"\ncondition = "consecutive"\nabove = 0.1\nsteps = 99999999999999999999', "steps",
     "at most 1000000"),
    ('measure = "share:think"\ncondition = "jump"\nfactor = 2\nbaseline = 99999999999999999999', "baseline",
     "at most 1000000"),
    ('measure = "share:think"\ncondition = "jump"\nfactor = 2\nbaseline = 0', "baseline", "at least 1"),
    ('measure = "share:think"\ncondition = "threshold"\nabove = 0.1\nafter_step = 99999999999999999999', "after_step",
     "at most 2**63-1"),
    ('measure = "share:think"\ncondition = "threshold"\nabove = 0.1\nafter_step = -1', "after_step", "at least 0"),
    ('measure = "ran_suite"\ncondition = "stage_change"\ndirection = "decrease"\n'
     'stages = [["a", 0, 99999999999999999999]]', "stages", "last_step <= 2**63-1"),
    ('measure = "ran_suite"\ncondition = "stage_change"\ndirection = "decrease"\nstages = [["a", -5, 5]]', "stages",
     "0 <= first_step"),
    ('measure = "share:think"\ncondition = "threshold"\nabove = 1' + "0" * 400, "above", "expected a finite number"),
    ('measure = "share:think"\ncondition = "jump"\nfactor = -inf', "factor", "expected a finite number"),
])
def test_a_bad_check_is_one_line_naming_file_check_and_field(tmp_path, body, field, words):
    problems = _problems(tmp_path, f"[checks.my_check]\n{body}\n")
    assert len(problems) == 1
    line = problems[0]
    assert "\n" not in line
    assert line.startswith(f"{tmp_path / 'checks.toml'}: check 'my_check': field '{field}'")
    assert words in line


def test_a_long_value_is_shortened_in_its_problem_line(tmp_path):
    (line,) = _problems(tmp_path, '[checks.my_check]\nmeasure = "share:think"\ncondition = "threshold"\n'
                                  f'above = 0.1\nwindow = {"9" * 4000}\n')
    assert line.endswith(f"found {'9' * 77}...")


def test_integers_past_a_float_are_not_finite_thresholds(tmp_path):
    problems = _problems(tmp_path, '[checks.a]\nmeasure = "share:think"\ncondition = "threshold"\n'
                                   f'above = 1{"0" * 400}\nbelow = 2{"0" * 400}\n')
    assert [p.split(": ")[2] for p in problems] == ["field 'above'", "field 'below'"]
    assert all("expected a finite number" in p for p in problems)


def test_an_integer_past_python_s_digit_limit_is_invalid_toml(tmp_path):
    (line,) = _problems(tmp_path, f'[checks.a]\nmeasure = "share:think"\ncondition = "threshold"\nabove = {"9" * 5000}\n')
    assert line.startswith(f"{tmp_path / 'checks.toml'}: not valid TOML (") and "\n" not in line


def test_problems_of_several_checks_are_collected(tmp_path):
    problems = _problems(tmp_path, '[checks.a]\nmeasure = "x"\ncondition = "threshold"\nabove = 1\n'
                                   '[checks.b]\nmeasure = "share:think"\ncondition = "threshold"\nabove = "x"\n')
    assert [p.split(": ")[1] for p in problems] == ["check 'a'", "check 'b'"]


def test_a_misspelt_condition_hides_no_other_problem_of_its_check(tmp_path):
    problems = _problems(tmp_path, '[checks.a]\nmeasure = "share:thinkk"\ncondition = "treshold"\nabove = "high"\n'
                                   'severity = "fatal"\n')
    fields = [p.split("field ")[1].split(":")[0] for p in problems]
    assert fields == ["'condition'", "'above'", "'severity'", "'measure'"]


def test_a_missing_or_misspelt_field_hides_no_wrong_value_of_its_check(tmp_path):
    """Every problem of a file at once: the values given are judged though a field is missing."""
    problems = _problems(tmp_path, '[checks.t]\nmeasure = "reward"\ncondition = "trend"\nwindow = 2\nalpha = 1.5\n')
    assert [p.split("field ")[1].split(":")[0] for p in problems] == ["'direction'", "'window'", "'alpha'"]
    problems = _problems(tmp_path, '[checks.t]\nmeasure = "reward"\ncondition = "threshold"\nabvoe = 1.0\n')
    assert [p.split("field ")[1].split(":")[0] for p in problems] == ["'abvoe'", "'above'"]
    assert problems[1].endswith("a threshold check needs 'above' or 'below', found neither")


def test_invalid_toml_and_missing_file_name_the_file(tmp_path):
    problems = _problems(tmp_path, "[checks.a\nmeasure =")
    assert problems[0].startswith(f"{tmp_path / 'checks.toml'}: not valid TOML")
    with pytest.raises(CheckConfigError, match="cannot read the check file"):
        load_checks(tmp_path / "absent.toml")


def test_a_file_that_is_not_utf8_names_its_line_and_byte(tmp_path):
    (tmp_path / "checks.toml").write_bytes(b'[checks.a]\nmeasure = "share:think"\n\xff\xfe = 1\n')
    with pytest.raises(CheckConfigError) as raised:
        load_checks(tmp_path / "checks.toml")
    assert raised.value.problems == [f"{tmp_path / 'checks.toml'}: line 3: expected UTF-8 text (TOML), found the byte 0xff"]


def test_parsed_values_are_typed():
    (check,) = parse_checks({"checks": {"c": {
        "measure": "ran_suite", "condition": "stage_change", "direction": "decrease",
        "stages": [["early", 1, 50], ["late", 151, 200]], "min_change": 0, "alpha": 0.01}}}, "inline")
    assert check.stages == (("early", 1, 50), ("late", 151, 200))
    assert isinstance(check.min_change, float) and check.alpha == 0.01 and check.source == "inline"


def test_measure_names_parse():
    assert parse_measure("advantage:run:all_negative").parameter == "run:all_negative"
    assert parse_measure("rel_gain:*").wildcard
    with pytest.raises(ValueError, match="takes no '\\*'"):
        parse_measure("share:*")
    with pytest.raises(ValueError, match="takes no parameter"):
        parse_measure("ran_suite:x")


def test_measure_tables_in_the_docs_match_the_declarations():
    from pathlib import Path

    from trajlens.checks.step_measures import render_markdown

    doc = (Path(__file__).resolve().parents[2] / "docs" / "checks.md").read_text()
    assert render_markdown().strip() in doc, "regenerate the tables in docs/checks.md from render_markdown()"


def test_the_estimator_labels_are_the_registry_s_report_variants():
    from trajlens.checks.step_measures import ADVANTAGE_LABELS, LABELS, parse_measure
    from trajlens.estimators.registry import ESTIMATOR_REGISTRY, InReport
    from trajlens.run.choices import ESTIMATOR_CHOICES

    expected = [(variant.label, spec.name, dict(variant.options)) for spec in ESTIMATOR_REGISTRY.values()
                if spec.report is not InReport.NEVER for variant in spec.variants()]
    assert [(label.label, label.estimator, label.options) for label in ADVANTAGE_LABELS] == expected
    assert [(c.label, c.estimator, c.options) for c in ESTIMATOR_CHOICES] == expected  # the report's too
    for label in LABELS:
        assert parse_measure(f"advantage:{label}:std").parameter == f"{label}:std"
    for spec in ESTIMATOR_REGISTRY.values():  # every estimator the report knows is checkable
        assert spec.report is InReport.NEVER or any(label.estimator == spec.name for label in ADVANTAGE_LABELS)


def test_yes_no_advantage_statistics_pool_as_shares_of_steps():
    """all_negative and all_positive are yes or no per step: pooled, a share of steps with a
    Wilson interval (as compare gives them); the other batch statistics are means."""
    from trajlens.checks.step_measures import parse_measure
    from trajlens.compare.table import ADVANTAGE_STATISTICS

    kinds = {s.name: s.kind != "mean" for s in ADVANTAGE_STATISTICS}
    for stat, proportion in kinds.items():
        assert parse_measure(f"advantage:gae_raw:{stat}").proportion is proportion, stat
    assert kinds["all_negative"] and not kinds["mean"]
    assert parse_measure("share:think").proportion and not parse_measure("mean:num_turns").proportion


STAGE_CHANGE = 'measure = "share:think"\ncondition = "stage_change"\ndirection = "increase"\n'


@pytest.mark.parametrize("stages, words", [
    ("[]", ["field 'stages': no stage given"]),
    ('[["only", 1, 200]]', ["field 'stages': expected at least two stages to compare"]),
    ('[["a", 1, 100], ["a", 50, 135]]', ["field 'stages': 'a' is named twice",
                                          "field 'stages': 'a' (steps 1-100) overlaps 'a' (steps 50-135)"]),
    ('[["a", 1, 100], ["b", 50, 135]]', ["field 'stages': 'a' (steps 1-100) overlaps 'b' (steps 50-135)"]),
])
def test_explicit_stages_are_read_as_the_stage_report_reads_them(tmp_path, stages, words):
    problems = _problems(tmp_path, f"[checks.c]\n{STAGE_CHANGE}stages = {stages}")
    assert len(problems) == len(words)
    for problem, expected in zip(problems, words):
        assert problem.startswith(f"{tmp_path / 'checks.toml'}: check 'c': {expected}")


def test_a_wrong_field_does_not_hide_a_wrong_measure(tmp_path):
    problems = _problems(tmp_path, '[checks.b]\nmeasure = "share:thinking"\ncondition = "threshold"\nabove = "x"')
    assert [p.split(": ", 2)[2][:14] for p in problems] == ["field 'above':", "field 'measure"]
    assert "unknown class 'thinking'" in problems[1]


def test_a_trend_made_in_python_spans_three_steps_or_more():
    """Made without a check file, its default window of 1 was skipped on every run."""
    from trajlens.checks.spec import Check, CheckConfigError

    with pytest.raises(CheckConfigError, match=r"check 't': a trend's window spans 3 steps or more .*, got 1"):
        Check(name="t", measure="share:think", condition="trend", direction="increase")
    assert Check(name="t", measure="share:think", condition="trend", direction="increase", window=3).window == 3
