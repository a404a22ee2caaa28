"""A run where some trajectories lack a reward channel others have: estimators that need every
channel everywhere (gdpo_verl, gdpo_dynamic) are left out of the report and attribution with a
note, and asked for by name they are a one-line error naming the run, trajectory and channel."""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pytest
from cli_run import run_cli as cli

import trajlens
from trajlens.estimators.registry import estimator_spec, run_facts

GAP = "trajectory '2-b-1' lacks channel 'format'"


@pytest.fixture(scope="module")
def gap_store(tmp_path_factory):
    from tinyrun import tiny_run
    from trajlens.store.layout import RunDirWriter

    run = tiny_run("gap")
    table = run.trajectories
    channels = table.column("reward_channels").to_pylist()
    ids = table.column("trajectory_id").to_pylist()
    channels[ids.index("2-b-1")] = [c for c in channels[ids.index("2-b-1")] if c["name"] != "format"]
    index = table.schema.get_field_index("reward_channels")
    field = table.schema.field("reward_channels")
    run = dataclasses.replace(run, trajectories=table.set_column(index, field, pa.array(channels, field.type)))
    tmp = tmp_path_factory.mktemp("gap")
    with RunDirWriter(tmp / "run", run.runs) as writer:
        writer.write_run(run)
    trajlens.ingest([tmp / "run"], tmp / "store")
    return trajlens.open(tmp / "store")


def test_facts_name_the_first_trajectory_that_lacks_a_channel(gap_store):
    from trajlens.run.advantages import read_run

    facts = run_facts(read_run(gap_store, "gap").trajectories)
    assert facts.channels == 2 and facts.channel_gap == GAP
    assert not estimator_spec("gdpo_verl").applies(facts)
    assert not estimator_spec("gdpo_dynamic").applies(facts)
    assert estimator_spec("gdpo_trl").applies(facts) and estimator_spec("sum_then_normalize").applies(facts)


def test_a_nan_channel_value_counts_as_missing():
    import polars as pl

    frame = pl.DataFrame({"trajectory_id": ["x", "y"], "step": [1, 1], "group_id": ["g", "g"], "reward_channels": [
        [{"name": "a", "value": 1.0}, {"name": "b", "value": 0.0}],
        [{"name": "a", "value": float("nan")}, {"name": "b", "value": 1.0}]]})
    assert run_facts(frame).channel_gap == "trajectory 'y' lacks channel 'a'"
    assert run_facts(frame.head(1)).channel_gap == ""


def test_report_skips_gdpo_with_a_note(gap_store, tmp_path):
    from trajlens.report import report_store

    (report,) = report_store(gap_store, tmp_path / "report")
    notes = [f for f in report.findings if "not computed" in f]
    assert notes == [f"gdpo_verl: not computed ({GAP}; it needs every reward channel on every trajectory)",
                     f"gdpo_dynamic: not computed ({GAP}; it needs every reward channel on every trajectory)"]
    labels = set(gap_store.sql("SELECT DISTINCT estimator FROM advantage_batches")["estimator"])
    assert "sum_then_normalize" in labels and not labels & {"gdpo_verl", "gdpo_dynamic"}


def test_attribution_skips_gdpo_with_a_note(gap_store):
    from trajlens.attribution import attribute

    result = attribute(gap_store, "gap", write=False)
    assert any(n.startswith("gdpo_verl: not computed") and GAP in n for n in result.notes)


def test_advantages_names_run_trajectory_and_channel(gap_store):
    done = cli("advantages", gap_store.path, "--run", "gap", "-e", "gdpo_verl")
    assert done.returncode == 1
    assert done.stderr.strip() == (f"error: run 'gap': gdpo_verl needs every reward channel on every "
                                   f"trajectory ({GAP})")
