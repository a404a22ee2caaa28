"""What `trajlens check` measures does not depend on how the run is cut into batches: the split
measured is the whole run's (a validation pass at step 0 does not decide it), the run's estimator
is identified from the first batch that trains, gdpo_dynamic's moving averages are carried from
batch to batch; and a run directory with a file cut short fails in one line naming it."""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import sys

import polars as pl
import pytest

import trajlens
import trajlens.run.batches as batches
from trajlens.checks import check_run
from trajlens.checks.data import Needs, RunState, open_batches
from trajlens.checks.spec import load_checks
from trajlens.synth import generate

pytestmark = pytest.mark.slow


def _with_validation_step_zero(run_dir) -> None:
    """Step 0 of validation trajectories only, as verl's val_before_train writes it."""
    first = run_dir / "trajectories" / "step=000001"
    trajectories = pl.read_parquet(next(first.glob("*.parquet")))
    validation = trajectories.with_columns(pl.lit(0, trajectories["step"].dtype).alias("step"),
                                           pl.lit("validation").alias("split"),
                                           (pl.lit("val-") + pl.col("trajectory_id")).alias("trajectory_id"))
    (run_dir / "trajectories" / "step=000000").mkdir()
    validation.write_parquet(run_dir / "trajectories" / "step=000000" / "part-0.parquet")


def _without_estimator(run_dir) -> None:
    """The run's config names no estimator: the checks identify it from the logged advantages."""
    runs = next((run_dir / "runs").glob("*.parquet"))
    table = pl.read_parquet(runs)
    config = json.loads(table["config"][0])
    del config["algorithm"]["adv_estimator"]
    table.with_columns(pl.lit(json.dumps(config)).alias("config"),
                       pl.lit(None, pl.String).alias("estimator")).write_parquet(runs)


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    work = tmp_path_factory.mktemp("batches")
    generate("sao-r7", work / "plain", steps=4, batch=8, tokens_per_trajectory=800, tool_calls_per_trajectory=5)
    shutil.copytree(work / "plain", work / "val0")
    _with_validation_step_zero(work / "val0")
    generate("sao-r7", work / "logged", steps=4, batch=8, tokens_per_trajectory=800, tool_calls_per_trajectory=5,
             log_advantages=True)
    _with_validation_step_zero(work / "logged")
    _without_estimator(work / "logged")
    return work


def _one_step_a_batch(monkeypatch, steps: int = 1) -> None:
    monkeypatch.setattr(batches, "plan_batches", functools.partial(batches.plan_batches, max_steps=steps))


def _statuses(result, names):
    return {r.name: (r.status, r.evidence_text()) for r in result.results if r.name in names}


def test_a_run_directory_is_measured_on_its_training_split_whatever_its_first_batch(work, monkeypatch):
    names = ("think_share", "suite_rate_decline", "turns_inflation")  # measured on 4 steps (no 20-step window)
    whole = _statuses(check_run(work / "val0"), names)
    _one_step_a_batch(monkeypatch)
    stepwise = _statuses(check_run(work / "val0"), names)
    assert whole == stepwise
    assert {status for status, _ in whole.values()} <= {"pass", "warn", "fail"}  # measured, not skipped


def test_the_run_s_estimator_is_identified_from_the_first_batch_that_trains(work, tmp_path, monkeypatch):
    store = tmp_path / "store"
    trajlens.ingest([work / "logged"], store)
    whole = _statuses(check_run(store, run_id="sao-r7"), ("advantage_outliers",))
    _one_step_a_batch(monkeypatch)
    stepwise = _statuses(check_run(store, run_id="sao-r7"), ("advantage_outliers",))
    # the same estimator, identified from the first batch that trains (over that batch's tokens)
    for status, evidence in (whole["advantage_outliers"], stepwise["advantage_outliers"]):
        assert status == whole["advantage_outliers"][0] != "skip", evidence
        assert "estimator is gae_whitened (identified from its logged advantages: verl GAE" in evidence, evidence


def test_gdpo_dynamic_s_moving_averages_are_carried_from_batch_to_batch(tmp_path, monkeypatch):
    generate("multireward", tmp_path / "run", steps=6, batch=16, tokens_per_trajectory=300, tool_calls_per_trajectory=4)
    trajlens.ingest([tmp_path / "run"], tmp_path / "store")
    (tmp_path / "checks.toml").write_text("".join(
        f'[checks.g_{stat}]\nmeasure = "advantage:gdpo_dynamic:{stat}"\ncondition = "threshold"\nabove = 100\n'
        f'severity = "error"\n' for stat in ("mean", "skew", "max_sigma")))
    checks = load_checks(tmp_path / "checks.toml")

    def stats() -> pl.DataFrame:
        needs = Needs.of(checks)
        info, found = open_batches(tmp_path / "store", None, needs)
        state = RunState(info, needs)
        for batch in found:
            state.add(batch)
        return state.stats.filter(pl.col("measure").str.starts_with("advantage:gdpo_dynamic")).sort("measure", "step")

    whole = stats()
    _one_step_a_batch(monkeypatch, steps=2)
    in_pairs = stats()
    assert whole.height >= 3 * 6 and whole.select("measure", "step").equals(in_pairs.select("measure", "step"))
    assert (whole["x"] - in_pairs["x"]).abs().max() < 1e-9


def test_a_run_directory_file_cut_short_fails_in_one_line_naming_it(work, tmp_path):
    run_dir = tmp_path / "cut"
    shutil.copytree(work / "plain", run_dir)
    cut = next((run_dir / "tokens" / "step=000002").glob("*.parquet"))
    cut.write_bytes(cut.read_bytes()[: cut.stat().st_size // 2])
    done = subprocess.run([sys.executable, "-m", "trajlens", "check", str(run_dir)], capture_output=True, text=True)
    assert done.returncode == 2 and "Traceback" not in done.stderr  # an input error, as the command's help says
    assert done.stderr.strip().splitlines() == [done.stderr.strip()]
    assert done.stderr.startswith(f"error: {cut}: not a readable Parquet file, expected Parquet, found Parquet magic ")


def _set(path, column, row, value) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    values = table.column(column).to_pylist()
    values[row] = value
    index = table.schema.get_field_index(column)
    pq.write_table(table.set_column(index, table.schema.field(index), pa.array(values, table.schema.field(index).type)), path)


@pytest.mark.parametrize("table, column, value, said", [
    ("tool_calls/step=000002", "token_end", 10**9, "record s0002-t0000 call 0: field 'token_end': expected at most "),
    ("step_metrics", "step", -5, "record 0: field 'step': expected a step of 0 or more, found -5"),
    ("runs", "run_id", "it's", "record 0: field 'run_id': expected 1-128 letters, digits, "),
])
def test_check_refuses_a_run_directory_ingest_refuses_in_its_line(work, tmp_path, table, column, value, said):
    """A call past its trajectory's token arrays, a negative step of a training scalar, a run id no
    store can hold: check stops with ingest's own line, naming the file that holds the value."""
    from cli_run import run_cli

    run_dir = tmp_path / "damaged"
    shutil.copytree(work / "plain", run_dir)
    damaged = next((run_dir / table).glob("*.parquet"))
    _set(damaged, column, 0, value)
    refused = run_cli("ingest", run_dir, "--store", tmp_path / "store")
    assert refused.returncode == 1 and refused.stderr.startswith(f"error: {damaged}: {said}")
    done = run_cli("check", run_dir)
    assert (done.returncode, done.stderr) == (2, refused.stderr)


def test_a_step_without_its_token_file_costs_that_step_alone(work, tmp_path, monkeypatch):
    run_dir = tmp_path / "missing"
    shutil.copytree(work / "plain", run_dir)
    shutil.rmtree(run_dir / "tokens" / "step=000003")
    whole = _statuses(check_run(run_dir), ("advantage_outliers",))
    _one_step_a_batch(monkeypatch)
    stepwise = _statuses(check_run(run_dir), ("advantage_outliers",))
    assert whole == stepwise and whole["advantage_outliers"][0] != "skip", whole
