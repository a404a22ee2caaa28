"""``trajlens check`` end to end: exit codes, the table, JUnit XML valid against the CI schema, JSON."""

from __future__ import annotations

import json
from xml.etree import ElementTree
from pathlib import Path

import pytest
from cli_run import run_cli
import xmlschema

from trajlens.checks.output import checks_html, checks_markdown, junit_xml, spans
from trajlens.checks.evaluate import CheckResult, RunChecks
from trajlens.checks.conditions import Evidence, Outcome
from trajlens.checks.spec import parse_checks

REPO = Path(__file__).resolve().parents[2]
SCHEMA = xmlschema.XMLSchema(str(Path(__file__).with_name("data") / "junit-10.xsd"))
LR_CHECK = """
[checks.learning_rate_mismatch]
description = "A logged LR differs from the one configured at that step"
measure = "lr_ratio:*"
condition = "threshold"
above = 1.001
below = 0.999

[checks.think_share]
measure = "share:think"
condition = "threshold"
above = 0.15

[checks.grad_norm_run]
measure = "metric:critic/grad_norm"
condition = "consecutive"
above = 30
steps = 3
severity = "warning"
"""


def trajlens(*args, cwd=REPO):
    return run_cli(*args, cwd=cwd)


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "checks.toml"
    path.write_text(LR_CHECK)
    return path


def test_failing_run_exits_1_with_table_junit_and_json(tmp_path, config):
    junit, report = tmp_path / "checks.xml", tmp_path / "checks.json"
    done = trajlens("check", "sample_data/resume-lr", "--config", config, "--junit", junit, "--json", report)
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split()[:4] == ["check", "severity", "status", "fired"]
    row = next(line for line in lines if line.startswith("learning_rate_mismatch"))
    assert "FAIL" in row and "41-159" in row and "step 41: 2, fires when outside [0.999, 1.001]" in row
    assert next(line for line in lines if line.startswith("think_share")).split()[2] == "skip"
    SCHEMA.validate(str(junit))
    document = json.loads(report.read_text())
    records = {r["check"]: r for r in document["results"]}
    assert records["learning_rate_mismatch"]["fired_steps"] == list(range(41, 160))
    assert records["think_share"]["status"] == "skip"
    assert records["grad_norm_run"]["status"] == "pass"
    assert document["counts"] == {"fail": 1, "warn": 0, "pass": 1, "skip": 1}


def test_junit_and_json_may_not_name_one_file(tmp_path, config):
    """One would silently replace the other: refused before any work, nothing written."""
    both = tmp_path / "checks.out"
    done = trajlens("check", "sample_data/resume-lr", "--config", config, "--junit", both, "--json", both)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == f"error: --json {both}: the same file as --junit; give each output its own file"
    assert not both.exists()


def test_junit_cases_map_statuses(tmp_path, config):
    import xml.etree.ElementTree as ElementTree

    junit = tmp_path / "checks.xml"
    trajlens("check", "sample_data/resume-lr", "--config", config, "--junit", junit)
    root = ElementTree.parse(junit).getroot()
    suite = root.find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("3", "1", "1")
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert "41-159" in cases["learning_rate_mismatch"].find("failure").get("message")
    assert cases["think_share"].find("skipped").get("message") == "the run has no trajectories"
    assert cases["grad_norm_run"].find("failure") is None


def test_the_validator_rejects_a_malformed_junit_file(tmp_path):
    bad = tmp_path / "bad.xml"
    bad.write_text('<testsuites><testsuite name="x" tests="1"><testcase/></testsuite></testsuites>')
    assert not SCHEMA.is_valid(str(bad))  # failures, errors and the case name are required


def test_passing_run_exits_0(tmp_path):
    config = tmp_path / "ok.toml"
    config.write_text('[checks.grad]\nmeasure = "metric:critic/grad_norm"\ncondition = "threshold"\nabove = 1000\n')
    done = trajlens("check", "sample_data/resume-lr", "--config", config)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 failed, 0 warned, 1 passed, 0 skipped" in done.stdout


def test_warnings_fail_only_with_strict(tmp_path):
    config = tmp_path / "warn.toml"
    config.write_text('[checks.lr]\nmeasure = "lr_ratio:critic/lr"\ncondition = "threshold"\nabove = 1.5\n'
                      'severity = "warning"\n')
    for strict, code, failures in ((False, 0, "0"), (True, 1, "1")):
        junit, report = tmp_path / f"{strict}.xml", tmp_path / f"{strict}.json"
        options = ("--strict",) if strict else ()
        done = trajlens("check", "sample_data/resume-lr", "--config", config, *options, "--junit", junit, "--json", report)
        assert done.returncode == code, done.stderr
        # the files a CI job reads say what the exit status says
        SCHEMA.validate(str(junit))
        suites = ElementTree.parse(junit).getroot()
        assert suites.get("failures") == suites.find("testsuite").get("failures") == failures
        assert len(suites.findall(".//failure")) == int(failures)
        document = json.loads(report.read_text())
        assert (document["strict"], document["failed"], document["counts"]["warn"]) == (strict, strict, 1)


def test_config_errors_exit_2_on_one_line(tmp_path):
    config = tmp_path / "bad.toml"
    config.write_text('[checks.a]\nmeasure = "share:thinking"\ncondition = "threshold"\nabove = 0.1\n'
                      '[checks.b]\nmeasure = "share:think"\ncondition = "threshold"\nabove = "high"\n')
    done = trajlens("check", "sample_data/resume-lr", "--config", config)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"error: {config}: check 'a': field 'measure': unknown class 'thinking' for share (one of submit, test_suite, "
        "test_targeted, quick_check, run_script, edit, view, search, think, other); "
        f"{config}: check 'b': field 'above': expected a whole number or a number, found 'high'",
    ]
    assert "Traceback" not in done.stderr


def test_problems_of_one_check_share_the_line(tmp_path):
    config = tmp_path / "checks.toml"
    config.write_text('[checks.x]\nmeasure = "share:think"\ncondition = "trend"\nwindow = 99999999999999999999\n'
                      'direction = "sideways"\n')
    done = trajlens("check", "sample_data/sao-r6", "--config", config)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        f"error: {config}: check 'x': field 'window': expected a whole number of steps, at least 1 and at most "
        f"1000000, found 99999999999999999999; {config}: check 'x': field 'direction': expected increase or "
        "decrease, found 'sideways'"]


def test_a_window_too_large_for_polars_is_a_config_error(tmp_path):
    config = tmp_path / "checks.toml"
    config.write_text('[checks.x]\nmeasure = "share:think"\ncondition = "threshold"\nabove = 0.15\n'
                      'window = 99999999999999999999\n')
    done = trajlens("check", "sample_data/sao-r6", "--config", config)
    assert done.returncode == 2, done.stderr
    assert done.stderr == (f"error: {config}: check 'x': field 'window': expected a whole number of steps, at least 1 "
                           "and at most 1000000, found 99999999999999999999\n")


@pytest.mark.parametrize("args, line", [
    # --until-step 1 ends the watch should --timeout nan or inf ever be accepted again (it alone never would)
    (["--timeout", "nan", "--until-step", "1"], "--timeout: expected a finite number of seconds, at least 0, found nan"),
    (["--timeout", "inf", "--until-step", "1"], "--timeout: expected a finite number of seconds, at least 0, found inf"),
    (["--timeout", "-5"], "--timeout: expected a finite number of seconds, at least 0, found -5"),
    (["--until-step", "-1"], "--until-step: expected a step number, at least 0, found -1"),
    (["--timeout", "1", "--poll", "nan"], "--poll: expected a number of seconds above 0 and at most 86400, found nan"),
    (["--timeout", "1", "--poll", "0"], "--poll: expected a number of seconds above 0 and at most 86400, found 0"),
    (["--timeout", "1", "--poll", "1e300"],
     "--poll: expected a number of seconds above 0 and at most 86400, found 1e+300"),
    (["--timeout", "1", "--settle", "nan"], "--settle: expected a finite number of seconds, at least 0, found nan"),
    (["--timeout", "1", "--settle", "-1"], "--settle: expected a finite number of seconds, at least 0, found -1"),
    (["--until-step", "-1", "--timeout", "nan"], "--until-step: expected a step number, at least 0, found -1; "
     "--timeout: expected a finite number of seconds, at least 0, found nan"),
])
def test_bad_watch_options_exit_2_on_one_line(args, line):
    done = trajlens("check", "sample_data/sao-r6", "--watch", *args)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"error: {line}"]
    assert done.stdout == ""


def test_input_and_usage_errors_exit_2(tmp_path):
    missing = trajlens("check", tmp_path / "nowhere")
    assert missing.returncode == 2 and missing.stderr.startswith("error: ") and "no such file" in missing.stderr
    assert trajlens("check", "sample_data/resume-lr", "--until-step", "3").returncode == 2
    assert trajlens("check", "sample_data/resume-lr", "--watch").returncode == 2
    assert trajlens("check", "sample_data/resume-lr", "--junit", tmp_path / "no" / "x.xml").returncode == 2
    assert trajlens("check", "sample_data/resume-lr", "--bogus").returncode == 2
    store = trajlens("check", "sample_data")  # a folder of runs, not one run
    assert store.returncode == 2 and "Traceback" not in store.stderr


def test_an_output_may_not_write_over_the_run_it_checks(tmp_path):
    """--json or --junit naming the metrics file, or a file inside the run folder, is refused
    before any work, and the input is as it was."""
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_bytes((REPO / "tests" / "data" / "verl" / "file_logger.jsonl").read_bytes())
    before = metrics.read_bytes()
    done = trajlens("check", metrics, "--json", metrics)
    assert done.returncode == 2
    assert done.stderr == f"error: --json {metrics}: would write over the input {metrics}; write it elsewhere\n"
    assert metrics.read_bytes() == before
    inside = REPO / "sample_data" / "resume-lr" / "checks.xml"
    done = trajlens("check", "sample_data/resume-lr", "--junit", inside)
    assert done.returncode == 2 and "would write over the input sample_data/resume-lr" in done.stderr
    assert not inside.exists()
    # the checks' own --config is an input too
    config = tmp_path / "checks.toml"
    config.write_text(trajlens("check", "--print-defaults").stdout)
    written = config.read_bytes()
    for flag in ("--json", "--junit"):
        done = trajlens("check", metrics, "--config", config, flag, config)
        assert done.returncode == 2
        assert done.stderr == f"error: {flag} {config}: would write over the input {config}; write it elsewhere\n"
        assert config.read_bytes() == written


def test_results_may_be_kept_beside_a_stores_runs(samples_store_path, tmp_path):
    """A store is guarded only where ingest writes: its runs, database and hidden files."""
    from stores import copy_store

    store = copy_store(samples_store_path, tmp_path / "store")
    done = trajlens("check", store, "--run", "sao-r6", "--json", store / "checks.json")
    assert done.returncode == 1 and (store / "checks.json").is_file()
    done = trajlens("check", store, "--run", "sao-r6", "--json", store / "runs" / "sao-r6" / "checks.json")
    assert done.returncode == 2 and "among the files of the store" in done.stderr


def test_nothing_checked_is_no_pass(tmp_path):
    """Every check skipped (here: checks of trajectories on a run of training scalars) exits 2,
    as a --watch that saw no step does, and writes no result file."""
    config = tmp_path / "calls.toml"
    config.write_text('[checks.think]\nmeasure = "share:think"\ncondition = "threshold"\nabove = 0.5\n')
    report = tmp_path / "checks.json"
    done = trajlens("check", "sample_data/resume-lr", "--config", config, "--json", report)
    assert done.returncode == 2
    assert done.stderr == ("error: sample_data/resume-lr: every check was skipped (the table says why); "
                           "nothing was checked\n")
    assert "0 failed, 0 warned, 0 passed, 1 skipped" in done.stdout
    assert not report.exists()


def test_print_defaults_prints_the_shipped_file():
    done = trajlens("check", "--print-defaults")
    assert done.returncode == 0
    parse_checks(__import__("tomllib").loads(done.stdout), "stdout")
    assert "[checks.think_share]" in done.stdout


@pytest.mark.parametrize(("extra", "named"), [
    (["sample_data/sao-r6"], "SOURCE"),
    (["--run", "sao-r6", "--strict"], "--run, --strict"),
    (["sample_data/sao-r6", "--config", "mine.toml", "--json", "out.json"], "SOURCE, --config, --json"),
])
def test_print_defaults_refuses_what_it_would_ignore(extra, named):
    # `trajlens check RUN --print-defaults` printed the shipped file as if RUN had been read
    done = trajlens("check", "--print-defaults", *extra)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == f"error: --print-defaults prints the shipped checks and takes nothing else: drop {named}\n"


def _result(status: str, steps: tuple[int, ...]) -> CheckResult:
    (check,) = parse_checks({"checks": {"c|x": {"measure": "share:think", "condition": "threshold", "above": 0.15,
                                                "description": "<think>"}}}, "t")
    outcome = Outcome("share:think", steps, Evidence(steps[0] if steps else 1, 0.5, 0.4, 0.6, "> 0.15"), 3)
    return CheckResult(check, status, (outcome,))


def test_report_fragments_escape_and_carry_alarm_steps():
    results = [_result("fail", (1, 2, 3, 7)), _result("pass", ())]
    markdown = checks_markdown(results)
    assert "| `c\\|x` | error | FAIL | 1-3, 7 | step 1: 0.5 [0.4, 0.6], fires when > 0.15 |" in markdown
    html = checks_html(results)
    assert '<tr class="check-fail"><td>c|x</td>' in html and "&lt;" not in html.split("</thead>")[0]
    assert results[0].alarms == {"share:think": (1, 2, 3, 7)}
    assert spans([5, 1, 2, 3, 9, 10]) == "1-3, 5, 9-10"
    xml = junit_xml(RunChecks("r&d", "src<1>", results, 7))
    assert SCHEMA.is_valid(xml)


def test_a_damaged_store_exits_2_never_1(tmp_path):
    """Exit 1 means a check failed: a store whose trajectories cannot be read is an error (2)."""
    import trajlens as api

    store = tmp_path / "store"
    api.ingest([REPO / "sample_data" / "causal-multireward"], store)
    (part,) = sorted((store / "runs" / "causal-multireward" / "trajectories").rglob("*.parquet"))[:1]
    part.write_bytes(part.read_bytes()[:100])
    done = trajlens("check", store, "--run", "causal-multireward")
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"error: {part}") and f"trajlens verify {store}" in line


def test_agent_logs_are_sent_to_ingest_naming_their_format():
    log = REPO / "tests" / "data" / "openai_chat" / "rollouts.jsonl"
    done = trajlens("check", log)
    assert done.returncode == 2
    assert done.stderr == (f"error: {log}: expected a store, a run directory, verl dumps, a metrics JSONL/CSV file or "
                           "TensorBoard event files, found logs of the openai-chat format; ingest them first with "
                           "`trajlens ingest`\n")


def test_verl_dumps_are_checked_as_ingest_reads_them(tmp_path):
    """An experiment folder (rollouts and validation side by side) is planned as ingest plans
    it: every step's rollouts are checked, not only the validation dumps."""
    import shutil

    from trajlens.checks.data import open_source
    from trajlens.ingest import load

    dump = REPO / "tests" / "data" / "verl" / "grpo-sandbox"
    experiment = tmp_path / "experiment"
    shutil.copytree(dump, experiment / "rollouts", ignore=shutil.ignore_patterns("val"))
    shutil.copytree(dump / "val", experiment / "val")
    _, checked = open_source(experiment)
    ingested = load(experiment).trajectories.column("trajectory_id").to_pylist()
    assert sorted(checked.trajectories.get_column("trajectory_id").to_list()) == sorted(ingested)
    assert {"1-0", "2-0", "val-2-0"} <= set(ingested)
    done = trajlens("check", experiment)
    assert "run experiment (2 steps)" in done.stdout, done.stdout + done.stderr


@pytest.mark.parametrize("equals, status, evidence", [
    ("1", "FAIL", "fires when > 10"),  # an integer matches the config's gamma = 1.0: a number is a number
    ("1.0", "FAIL", "fires when > 10"),
    ('"GAE"', "skip", "algorithm.adv_estimator == 'GAE' holds at no step"),
])
def test_a_when_compares_numbers_as_numbers(tmp_path, equals, status, evidence):
    path = "algorithm.adv_estimator" if equals.startswith('"') else "algorithm.gamma"
    config = tmp_path / "when.toml"
    config.write_text('[checks.grad]\nmeasure = "metric:critic/grad_norm"\ncondition = "threshold"\nabove = 10\n'
                      f'when = {{ path = "{path}", equals = {equals} }}\n')
    done = trajlens("check", "sample_data/resume-lr", "--config", config)
    row = next(line for line in done.stdout.splitlines() if line.startswith("grad"))
    assert row.split()[2] == status and evidence in row
    # a when that holds at no step checked nothing: skipped, not passed, and nothing else was checked
    assert done.returncode == (1 if status == "FAIL" else 2)


@pytest.mark.parametrize("path, equals, holds", [
    ("algorithm.whiten_advantages", '"false"', "a switch (true or false)"),
    ("algorithm.whiten_advantages", "0", "a switch (true or false)"),
    ("algorithm", "false", "a table"),
])
def test_a_when_of_another_kind_than_the_config_s_value_is_skipped_not_passed(tmp_path, path, equals, holds):
    """A when that could never hold (text for a switch) checked nothing: the gate does not pass."""
    config = tmp_path / "when.toml"
    config.write_text('[checks.ev]\nmeasure = "metric:critic/grad_norm"\ncondition = "threshold"\nabove = 10\n'
                      f'when = {{ path = "{path}", equals = {equals} }}\n')
    done = trajlens("check", "sample_data/resume-lr", "--config", config)
    row = next(line for line in done.stdout.splitlines() if line.startswith("ev "))
    assert row.split()[2] == "skip"
    assert f"{path} holds {holds} in the run's config, never " in row
    assert done.returncode == 2 and "every check was skipped" in done.stderr


def test_a_check_after_the_run_s_last_step_says_so_even_with_a_when(tmp_path):
    config = tmp_path / "after.toml"
    config.write_text('[checks.ev]\nmeasure = "metric:critic/grad_norm"\ncondition = "threshold"\nabove = 10\n'
                      'after_step = 500\nwhen = { path = "algorithm.whiten_advantages", equals = false }\n')
    done = trajlens("check", "sample_data/resume-lr", "--config", config)
    row = next(line for line in done.stdout.splitlines() if line.startswith("ev "))
    assert row.split()[2] == "skip" and row.endswith("no step after 500")


def test_junit_holds_any_character_of_a_check_s_name_or_description(tmp_path):
    config = tmp_path / "odd.toml"
    config.write_text('[checks."grad<norm> & \\"x\\""]\ndescription = "bell \\u0007 here"\n'
                      'measure = "metric:critic/grad_norm"\ncondition = "threshold"\nabove = 10\n')
    junit = tmp_path / "odd.xml"
    assert trajlens("check", "sample_data/resume-lr", "--config", config, "--junit", junit).returncode == 1
    SCHEMA.validate(str(junit))
    case = ElementTree.parse(junit).getroot().find(".//testcase")
    assert case.get("name") == 'grad<norm> & "x"' and "bell \\u0007 here" in case.find("failure").text


@pytest.mark.parametrize("layout", ["dumps-and-logger", "experiment-folder"])
def test_a_verl_folder_with_its_file_logger_is_checked_as_ingest_stores_it(tmp_path, layout):
    """verl dumps with the file logger's JSONL beside them (or an experiment folder: rollout/,
    val/ and the logger's file) are one run to ingest; check refused them as logs of two formats.
    It now reads them as ingest does: the scalars of the logger file are judged, with the verdicts
    check gives on the ingested store."""
    import shutil

    verl = REPO / "tests" / "data" / "verl"
    folder = tmp_path / "exp"
    rollouts = folder / "rollout" if layout == "experiment-folder" else folder
    rollouts.mkdir(parents=True)
    for dump in (verl / "grpo-sandbox").glob("*.jsonl"):
        shutil.copy(dump, rollouts)
    shutil.copytree(verl / "grpo-sandbox" / "val", folder / "val")
    shutil.copy(verl / "file_logger.jsonl", folder)
    config = tmp_path / "checks.toml"
    config.write_text('[checks.grad]\nmeasure = "metric:critic/grad_norm"\ncondition = "threshold"\nabove = 10\n')
    direct = trajlens("check", folder, "--config", config, "--json", tmp_path / "direct.json")
    assert direct.returncode == 1, direct.stderr
    assert trajlens("ingest", folder, "--store", tmp_path / "store").returncode == 0
    stored = trajlens("check", tmp_path / "store", "--config", config, "--json", tmp_path / "stored.json")
    results = [json.loads((tmp_path / name).read_text())["results"] for name in ("direct.json", "stored.json")]
    assert results[0] == results[1] and results[0][0]["fired_steps"] == [1]
    assert stored.stdout.replace(str(tmp_path / "store"), str(folder)) == direct.stdout
