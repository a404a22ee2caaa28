"""A reward channel without signal from the first step (a format reward every trajectory meets):
the shipped checks fail on it from the first steps, so the report says so too; it once said
nothing, as it only told a channel whose signal was lost between the first quarter and the last."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

import trajlens
from cli_run import run_cli

RUN = "causal-multireward"
SAMPLE = Path(__file__).resolve().parents[2] / "sample_data" / RUN


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """The sample run with its ``format`` channel at 1.0 for every trajectory, ingested."""
    work = tmp_path_factory.mktemp("flat-format")
    run = work / RUN
    shutil.copytree(SAMPLE, run)
    field = pl.element().struct
    for path in sorted((run / "trajectories").rglob("*.parquet")):
        table = pq.read_table(path)
        frame = pl.from_arrow(table)
        flat = pl.struct(field.field("name"), pl.when(field.field("name") == "format").then(pl.lit(1.0))
                         .otherwise(field.field("value")).alias("value"))
        channels = pl.col("reward_channels").list.eval(flat).cast(frame.schema["reward_channels"])
        pq.write_table(frame.with_columns(channels).to_arrow().cast(table.schema), path)
    done = run_cli("ingest", run, "--store", work / "store")
    assert done.returncode == 0, done.stderr
    return work / "store"


def test_the_report_tells_a_channel_without_signal_from_the_start(store):
    from trajlens.report.scalars import channel_findings

    by_subject = {f.subject: f for f in channel_findings(trajlens.open(store), RUN)}
    found = by_subject["channel:format"]
    assert str(found) == ("reward channel format: rel_gain 0.00 in the first quarter -> 0.00 in the last (without signal "
                          "from the first quarter: its step mean 1.00 -> 1.00; its group advantage carries no signal)")
    assert found.kind == "saturated_channel"


def test_the_checks_fail_on_it_and_say_why_its_collinearity_is_not_judged(store):
    done = run_cli("check", store, "--run", RUN)
    lines = {line.split()[0]: line for line in done.stdout.splitlines() if line.strip()}
    assert done.returncode == 1
    # its first full 5-step window ends at step 5
    assert " FAIL " in lines["reward_channel_rel_gain"] and "rel_gain:format: step 5: 0 " in lines["reward_channel_rel_gain"]
    assert "no two of the run's reward channels (correctness, format) vary at the same step" in lines["reward_channels_collinear"]
