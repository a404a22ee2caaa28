"""The ingest and sql commands as a user runs them: exit codes, one-line errors.

Most run in this process through the CLI's entry point (tests/cli_run.py); a real process runs
ingest then sql, a user error, the shell and Ctrl-C.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from cli_run import run_cli as trajlens
from cli_run import run_cli_subprocess

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def test_ingest_then_sql_in_a_process(tmp_path, tiny_run_dir):
    done = run_cli_subprocess("ingest", tiny_run_dir, "--store", tmp_path / "store")
    assert done.returncode == 0, done.stderr
    assert "ingested 1 run(s)" in done.stdout and "tiny" in done.stdout
    query = "SELECT step, count(*) AS n FROM trajectories WHERE step >= $lo GROUP BY step ORDER BY step"
    done = run_cli_subprocess("sql", tmp_path / "store", query, "--param", "lo=2")
    assert done.returncode == 0, done.stderr
    assert "│ 2    ┆ 4   │" in done.stdout


def test_sql_writes_csv(tmp_path, tiny_run_dir):
    trajlens("ingest", tiny_run_dir, "--store", tmp_path / "store")
    out = tmp_path / "counts.csv"
    done = trajlens("sql", tmp_path / "store", "SELECT tool_name, count(*) AS n FROM tool_calls GROUP BY 1 ORDER BY 1", "--out", out)
    assert done.returncode == 0, done.stderr
    assert out.read_text().splitlines() == ["tool_name,n", "bash,8", "think,8"]


@pytest.mark.parametrize(
    "args, message",
    [
        (("ingest", "{tmp}/missing", "--store", "{tmp}/store"), "missing: no such file or directory"),
        (("sql", "{tmp}/nowhere", "SELECT 1"), "no such store directory"),
        (("sql", "{store}", "SELECT nope FROM runs"), "query failed"),
        (("sql", "{store}", "SELECT 1", "--param", "novalue"), "expected NAME=VALUE"),
        (("sql", "{store}", "{tmp}/missing.sql"), "no such query file"),
        (("advantages", "{store}", "--run", "tiny", "-e", "gae", "--option", "whiten=no"), "'whiten': expected bool, found 'no'"),
        (("advantages", "{store}", "--run", "tiny", "-e", "gae", "--option", "gama=0.5"), "gae takes no option 'gama'"),
        (("advantages", "{store}", "--run", "tiny", "-e", "gae", "--option", "gamma=abc"), "'gamma': expected float"),
        # digits of another script are no release and no step (str.isdigit took them)
        (("advantages", "{store}", "--run", "tiny", "-e", "grpo", "--trainer", "verl==\u0663.\u0664"),
         "expected a release such as 0.9.0, found '\u0663.\u0664'"),
        (("sample", "{store}", "--run", "tiny", "--stages", "a:\u0661-\u0665", "--out", "{tmp}/s.md"),
         "--stages 'a:\u0661-\u0665': expected quartiles, early_late, or NAME:FIRST-LAST parts, such as early:1-40"),
        (("sample", "{store}", "--run", "tiny", "--stages", "a:1-1,", "--out", "{tmp}/s.md"),
         "--stages 'a:1-1,' (an empty part): expected quartiles, early_late, or NAME:FIRST-LAST"),
        (("advantages", "{store}", "--run", "tiny", "-e", "nope"), "--estimator: estimator must be one of 'gae', "),
        (("sql", "{tmp}/tiny-run", "SELECT 1"),
         "tiny-run: not a trajlens store but a run directory; ingest it into a store with `trajlens ingest "),
        (("ingest", "{tmp}/tiny-run", "--store", "{tmp}/s2", "--limit", "record_mb=0.0000001"),
         "--limit record_mb: expected at least one byte (9.5e-07 MB), found '0.0000001'"),
        (("advantages", "{store}", "--run", "tiny", "-e", "gpg", "--option", "f_norm=1e39"),
         "gpg option 'f_norm': expected a finite number that float32 holds (0, or 1.175e-38 to 3.403e+38 in size), "
         "found 1e+39"),
        (("advantages", "{store}", "--run", "tiny", "-e", "grpo", "--option", "epsilon=1e-300"),
         "grpo option 'epsilon': expected a finite number that float32 holds"),
        (("advantages", "{store}", "--run", "tiny", "-e", "gdpo_dynamic", "--option", "config=3"),
         "'config': expected a table of DynamicWeightConfig fields, found 3"),
        (("advantages", "{store}", "--run", "tiny", "-e", "gdpo_dynamic", "--option", 'config={{"alpha": 0.1}}'),
         "'config': unknown field 'alpha' (fields: ema_alpha,"),
    ],
)
def test_user_errors_are_one_line_without_traceback(tmp_path, tiny_run_dir, args, message):
    store = tmp_path / "store"
    trajlens("ingest", tiny_run_dir, "--store", store)
    done = trajlens(*(a.format(tmp=tmp_path, store=store) for a in args))
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]


def test_a_user_error_in_a_process_is_one_line_without_traceback(tmp_path):
    done = run_cli_subprocess("sql", tmp_path / "nowhere", "SELECT 1")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "no such store directory" in lines[0]


def test_corrupt_parquet_from_cli(tmp_path, tiny_run_dir):
    victim = sorted((tiny_run_dir / "tool_calls").rglob("*.parquet"))[0]
    victim.write_bytes(b"PAR1 not really")
    done = trajlens("ingest", tiny_run_dir, "--store", tmp_path / "store")
    assert done.returncode == 1
    assert str(victim) in done.stderr and "not a readable Parquet file" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "store" / "runs").exists() or not any((tmp_path / "store" / "runs").iterdir())


def test_usage_errors_show_usage_not_a_traceback():
    done = trajlens("ingest")
    assert done.returncode == 2
    assert "Missing argument" in done.stderr and "Traceback" not in done.stderr


def test_version():
    import trajlens as package

    done = trajlens("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"trajlens {package.__version__}"


def test_shell_route_from_the_readme(tmp_path, tiny_run_dir):
    """`trajlens shell STORE` opens the store with the library's DuckDB, whatever CLI is installed."""
    trajlens("ingest", tiny_run_dir, "--store", tmp_path / "store")
    done = subprocess.run([sys.executable, "-m", "trajlens", "shell", str(tmp_path / "store")],
                          input="SELECT count(*) AS calls\nFROM tool_calls;\n.tables\n", capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "│ 16    │" in done.stdout
    assert "runs  trajectories  tool_calls  tokens  step_metrics" in done.stdout
    assert "measured_splits" in done.stdout  # a view, queryable as the tables are
    refused = subprocess.run([sys.executable, "-m", "trajlens", "sql", str(tmp_path / "store"),
                              "SELECT * FROM read_csv('/etc/passwd')"], capture_output=True, text=True)
    assert refused.returncode == 1 and "measured_splits" in refused.stderr and "not files" in refused.stderr


def test_the_shell_refuses_closed_input_and_bytes_that_are_not_utf8_in_one_line(tmp_path, tiny_run_dir):
    trajlens("ingest", tiny_run_dir, "--store", tmp_path / "store")
    shell = [sys.executable, "-m", "trajlens", "shell", str(tmp_path / "store")]
    closed = subprocess.run(shell, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                            preexec_fn=lambda: __import__("os").close(0))
    assert closed.returncode == 1 and closed.stderr == (
        "error: shell: standard input is closed; give the statements with -c SQL or on standard input\n")
    for given in ({"input": b"SELECT \xff;\n"}, {"args": ["-c", b"SELECT \xff".decode("utf-8", "surrogateescape")]}):
        done = subprocess.run(shell + given.get("args", []), input=given.get("input", b""), capture_output=True)
        assert done.returncode == 1 and done.stderr == (
            b"error: shell: line 1: expected UTF-8 text, found the byte 0xff at character 8\n"), done.stderr


def test_database_file_opens_in_duckdb_from_1_0(tmp_path, tiny_run_dir):
    """trajlens.duckdb is written in storage format v1.0.0 (version number 64 in its header)."""
    import duckdb

    trajlens("ingest", tiny_run_dir, "--store", tmp_path / "store")
    header = (tmp_path / "store" / "trajlens.duckdb").read_bytes()[:16]
    assert header[8:12] == b"DUCK" and int.from_bytes(header[12:16], "little") == 64
    connection = duckdb.connect(str(tmp_path / "store" / "trajlens.duckdb"), read_only=True)
    assert connection.execute("SELECT count(*) FROM trajectories").fetchone() == (8,)


def test_ctrl_c_exits_130_and_leaves_the_store_as_it_was(tmp_path):
    import signal
    import time
    from pathlib import Path

    source = Path(__file__).resolve().parents[2] / "sample_data" / "sao-r7"
    process = subprocess.Popen([sys.executable, "-m", "trajlens", "ingest", str(source), "--store", str(tmp_path / "store")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while process.poll() is None and time.monotonic() < deadline and not (tmp_path / "store" / ".staging").exists():
        time.sleep(0.01)  # interrupt once it is writing the run
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    if process.returncode == 0:
        pytest.skip("the ingest finished before the interrupt")
    assert process.returncode == 130, err
    assert err.strip().splitlines()[-1] == "interrupted" and "Traceback" not in err
    assert not (tmp_path / "store").exists()


def test_a_command_module_that_fails_to_import_is_an_error(monkeypatch, capsys):
    from trajlens.cli import _app

    monkeypatch.setattr(_app, "_registered", False)
    monkeypatch.setattr(_app, "COMMAND_MODULES", (*_app.COMMAND_MODULES, "trajlens.cli.no_such_command"))
    assert _app.main(["--version"]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "command module trajlens.cli.no_such_command failed to import" in lines[0]


def test_a_missing_dependency_names_the_install_command(monkeypatch, capsys):
    from trajlens.cli import _app

    def missing(name):
        raise ModuleNotFoundError("No module named 'yaml'", name="yaml")

    monkeypatch.setattr(_app, "_registered", False)
    monkeypatch.setattr(_app, "COMMAND_MODULES", ("trajlens.cli.attribution",))
    monkeypatch.setattr(_app.importlib, "import_module", missing)
    assert _app.main(["--version"]) == 1
    assert capsys.readouterr().err.strip() == ("error: the trajlens command line (trajlens.cli.attribution) needs "
                                               "pyyaml: install it with `pip install pyyaml`")


@pytest.mark.parametrize("args", [
    ("synth", "sao-r6", "--steps", "2", "--seed", "-1", "--out", "{tmp}/run"),
    ("synth", "sao-r6", "--steps", "2", "--seed", str(2**64), "--out", "{tmp}/run"),
    ("synth", "causal-r6", "--steps", "2", "--seed", str(2**63), "--out", "{tmp}/run"),
    ("sample", "{tmp}/store", "--run", "r", "--seed", "-1"),
    ("report", "{tmp}/store", "--seed", "-1", "--out", "{tmp}/report"),
    ("report", "{tmp}/store", "--viewers", "-1", "--out", "{tmp}/report"),
    ("attribute", "{tmp}/store", "--run", "r", "--k", "0"),
    ("compare", "{tmp}/store", "a", "b", "--top", "-1"),
    ("sql", "{tmp}/store", "SELECT 1", "--rows", "-1"),
])
def test_out_of_range_counts_are_usage_errors_and_write_nothing(tmp_path, args):
    done = trajlens(*(a.format(tmp=tmp_path) for a in args))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith("error: Invalid value") and done.stderr.count("\n") == 1
    assert done.stderr.rstrip().endswith(f"(see trajlens {args[0]} --help)")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args, line", [
    (("sample", "store", "--n"), "error: Option '--n' requires an argument (see trajlens sample --help)"),
    (("sample",), "error: Missing argument 'store' (see trajlens sample --help)"),
    (("nosuch",), "error: No such command 'nosuch' (see trajlens --help)"),
])
def test_a_usage_error_is_one_line_pointing_at_the_command_s_help(args, line):
    done = trajlens(*args)
    assert (done.returncode, done.stderr) == (2, line + "\n")


def test_no_arguments_prints_the_help_and_no_error():
    done = trajlens()
    assert done.returncode == 2 and "Commands" in done.stdout + done.stderr and "error:" not in done.stderr


def test_a_run_named_twice_is_classified_and_reported_once(tmp_path, tiny_run_dir):
    store = tmp_path / "store"
    trajlens("ingest", tiny_run_dir, "--store", store)
    done = trajlens("classify", store, "--run", "tiny", "--run", "tiny")
    assert done.returncode == 0, done.stderr
    assert "classified 1 run(s), 8 trajectories" in done.stdout
    done = trajlens("report", store, "--run", "tiny", "--run", "tiny", "--out", tmp_path / "report")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "report" / "README.md").read_text().count("\n## tiny") == 1


def test_a_recomputation_with_options_is_saved_under_a_label_that_says_so(tmp_path, tiny_run_dir):
    """Not as the plain estimator: compare reuses saved labels, and the checks recompute the plain one."""
    store = tmp_path / "store"
    trajlens("ingest", tiny_run_dir, "--store", store)
    for extra in ((), ("--option", "epsilon=1000"), ("--trainer", "trl==1.5", "--option", "epsilon=0.5"),
                  ("--option", "epsilon=1000", "--label", "mine")):
        done = trajlens("advantages", store, "--run", "tiny", "-e", "grpo", *extra)
        assert done.returncode == 0, done.stderr
    saved = trajlens("sql", store, "SELECT DISTINCT estimator FROM advantage_batches ORDER BY 1", "--out", tmp_path / "l.csv")
    assert saved.returncode == 0, saved.stderr
    assert (tmp_path / "l.csv").read_text().splitlines() == [
        "estimator", "grpo", "grpo+epsilon=1000", "grpo@trl==1.5+epsilon=0.5", "mine"]


def test_a_label_the_report_reads_names_only_its_own_computation(tmp_path, tiny_run_dir):
    """`grpo` and `gae_raw` are what the report, the checks and compare read under those names: a
    recomputation with other settings under such a label is refused, and nothing is saved."""
    store = tmp_path / "store"
    assert trajlens("ingest", tiny_run_dir, "--store", store).returncode == 0
    refused = {
        ("-e", "grpo", "--option", "epsilon=1000", "--label", "grpo"):
            "error: --label: 'grpo' names grpo with its defaults (the report, the checks and compare read it so), "
            "not this recomputation; name it otherwise, or drop --label to save it as 'grpo+epsilon=1000'",
        ("-e", "gae", "--label", "gae_raw"):
            "error: --label: 'gae_raw' names gae with gamma=1.0, lam=1.0, whiten=False (the report, the checks and "
            "compare read it so), not this recomputation; name it otherwise, or drop --label to save it as 'gae'",
        ("-e", "grpo", "--label", "rloo"):
            "error: --label: 'rloo' names rloo with its defaults (the report, the checks and compare read it so), "
            "not this recomputation; name it otherwise, or drop --label to save it as 'grpo'",
        ("-e", "grpo", "--trainer", "trl==1.5", "--label", "grpo"):
            "error: --label: 'grpo' names grpo with its defaults (the report, the checks and compare read it so), "
            "not this recomputation; name it otherwise, or drop --label to save it as 'grpo@trl==1.5'",
    }
    for args, message in refused.items():
        done = trajlens("advantages", store, "--run", "tiny", *args)
        assert (done.returncode, done.stderr.strip()) == (1, message)
    from trajlens import open as open_store

    assert "advantage_batches" not in open_store(store).tables()
    for args in (("-e", "gae", "--option", "whiten=false", "--label", "gae_raw"),
                 ("-e", "gae", "--option", "whiten=false", "--option", "lam=1.0", "--label", "gae_raw"),
                 ("-e", "grpo", "--trainer", "verl==0.9.0", "--label", "grpo")):
        done = trajlens("advantages", store, "--run", "tiny", *args)
        assert done.returncode == 0, (args, done.stderr)


def test_a_run_whose_own_convention_is_not_the_reports_is_saved_under_its_release(tmp_path):
    """causal-multireward comes from verl, whose sum_then_normalize is not the registry's default
    (TRL's, which the report computes): recomputed as the run's trainer did, it is labelled with
    that release; as the report computes it (TRL's convention), it may take the report's label."""
    store = tmp_path / "store"
    assert trajlens("ingest", REPO / "sample_data" / "causal-multireward", "--store", store).returncode == 0
    args = ("advantages", store, "--run", "causal-multireward", "-e", "sum_then_normalize")
    refused = trajlens(*args, "--label", "sum_then_normalize")
    assert refused.returncode == 1 and refused.stderr.endswith(
        "drop --label to save it as 'sum_then_normalize@verl==0.9.1'\n")
    for extra in ((), ("--trainer", "trl==1.16.0", "--label", "sum_then_normalize")):
        assert trajlens(*args, *extra).returncode == 0
    saved = trajlens("sql", store, "SELECT estimator, avg(std) AS std FROM advantage_batches GROUP BY 1 ORDER BY 1",
                     "--out", tmp_path / "l.csv")
    assert saved.returncode == 0, saved.stderr
    rows = (tmp_path / "l.csv").read_text().splitlines()
    assert [row.split(",")[0] for row in rows] == ["estimator", "sum_then_normalize", "sum_then_normalize@verl==0.9.1"]
    assert rows[1] != rows[2].replace("@verl==0.9.1", "")  # two computations, two numbers


def test_steps_whose_advantages_are_not_numbers_get_a_note(tmp_path):
    """With epsilon=0, as verl allows, a group of equal rewards divides 0 by 0: saved as the trainer
    computes it, but said, not left for a reader to find as NaN rows."""
    store = tmp_path / "store"
    assert trajlens("ingest", REPO / "sample_data" / "multireward", "--store", store).returncode == 0
    done = trajlens("advantages", store, "--run", "multireward", "-e", "grpo", "--option", "epsilon=0")
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == ("note: 41 of 320 steps have advantages that are not numbers (NaN), from step 2: with "
                                   "epsilon=0 a group whose rewards are all equal divides 0 by 0, as the trainer would")


def test_odd_values_and_paths_are_named_as_what_they_are(tmp_path, tiny_run_dir):
    store = tmp_path / "store"
    trajlens("ingest", tiny_run_dir, "--store", store)
    (tmp_path / "q.sql").mkdir()
    (tmp_path / "afile").write_text("")
    (tmp_path / "two.sql").write_text("SELECT 1;\nSELECT 2;\n")
    cases = [
        (("sql", store, "SELECT $s AS x", "--param", "s:json=NaN"),
         "error: --param 's:json=NaN': not a json (expected JSON, whose numbers are finite, found NaN)"),
        (("sql", store, "SELECT $s AS x", "--param", "s:json=1e400"),
         "error: --param 's:json=1e400': not a json (expected finite numbers, found 1e400)"),
        (("sql", store, tmp_path / "q.sql"), f"error: {tmp_path / 'q.sql'}: expected a query file, found a folder"),
        (("sql", store, tmp_path / "two.sql"), f"error: {tmp_path / 'two.sql'}: expected one SQL statement, found 2"),
        (("sql", store, "think_share_by_step", "--param", "run_id=tiny"),
         f"error: think_share_by_step: query failed: table call_classes does not exist yet in {store}; `trajlens "
         "classify STORE` creates it"),
        (("sql", store, "SELECT 1", "--out", tmp_path / "afile" / "x.csv"),
         f"error: --out {tmp_path / 'afile' / 'x.csv'}: folder {tmp_path / 'afile'} is a file, not a folder"),
    ]
    for args, message in cases:
        done = trajlens(*args)
        assert (done.returncode, done.stderr.strip()) == (1, message)


def test_the_help_of_attribute_lists_every_aggregation_mode():
    from trajlens.estimators.aggregation import AGGREGATION_MODES

    done = trajlens("attribute", "--help", env={"COLUMNS": "400"})
    listed = re.search(r"repeatable: (.*?) \(default", " ".join(done.stdout.replace("│", " ").split())).group(1)
    assert re.split(r", | or ", listed) == list(AGGREGATION_MODES)


def test_steps_where_every_advantage_is_alike_get_a_note(tmp_path, tiny_run_dir):
    """Every group's rewards equal: every advantage is 0, and its shape statistics are nan; said."""
    import shutil

    import polars as pl

    run = tmp_path / "run"
    shutil.copytree(tiny_run_dir, run)
    for part in (run / "trajectories").rglob("*.parquet"):
        frame = pl.read_parquet(part)
        frame.with_columns(pl.lit(1.0, frame["reward"].dtype).alias("reward")).write_parquet(part)
    store = tmp_path / "store"
    assert trajlens("ingest", run, "--store", store).returncode == 0
    import trajlens as library

    (run_id,) = library.open(store).run_ids()
    done = trajlens("advantages", store, "--run", run_id, "-e", "grpo")
    assert done.returncode == 0, done.stderr
    assert "give every trajectory the same advantage (0 when each group's rewards are equal), so their skew, " \
           "kurtosis and bimodality are undefined (nan)" in done.stderr
