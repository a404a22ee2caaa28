"""OpenRLHF's ``train/generated_samples`` tables, written by its ``WandbLogger`` through wandb."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from end_to_end import through_every_surface  # noqa: E402

from trajlens.errors import InputError  # noqa: E402
from trajlens.ingest import formats, load  # noqa: E402

RUN = Path(__file__).resolve().parents[1] / "data" / "openrlhf" / "wandb-run"


def test_each_step_s_sample_once_though_every_table_repeats_the_earlier_rows():
    assert [s.format.name for s in formats.plan(RUN)] == ["openrlhf"]
    assert len(list(RUN.glob("*.table.json"))) == 3
    run = load(RUN)
    rows = [(r["trajectory_id"], r["step"], r["reward"], r["response_text"]) for r in run.trajectories.to_pylist()]
    assert rows == [("step1", 1, 0.0, "Solve 6*7. Answer: 48"), ("step2", 2, 1.0, "Solve 6*7. Answer: 42"),
                    ("step3", 3, 1.0, "Name a prime. Answer: 7")]


def test_a_table_of_other_columns_is_not_taken_and_a_bad_row_is_named(tmp_path):
    table = json.loads(sorted(RUN.glob("*.table.json"))[-1].read_text())
    table["data"][1][2] = "high"
    path = tmp_path / "t.table.json"
    path.write_text(json.dumps(table))
    with pytest.raises(InputError) as caught:
        load(path)
    assert caught.value.field == "reward" and "row 1" in str(caught.value)
    table["columns"] = ["step", "text", "reward"]
    path.write_text(json.dumps(table))
    assert formats.detect(path) is None


def test_openrlhf_samples_ingest_classify_report_and_check(tmp_path):
    store, _ = through_every_surface(RUN, tmp_path, nothing_to_check=True)  # no tool calls, no scalars
    assert store.sql("SELECT count(*) AS n FROM trajectories")["n"].to_list() == [3]
