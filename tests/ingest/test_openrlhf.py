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


def test_two_different_samples_of_one_step_are_named_not_one_kept(tmp_path):
    path = tmp_path / "t.table.json"
    path.write_text(json.dumps({"columns": ["global_step", "text", "reward"],
                                "data": [[1, "x", 1.0], [1, "x", 1.0], [2, "z", 0.5], [1, "y", 0.0]]}))
    with pytest.raises(InputError) as caught:
        load(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: record row 3: field 'global_step': expected one sample per step")
    assert message.endswith("found step 1 unlike its sample at row 1")
    run = load(path, strict=False)
    assert run.trajectories.column("trajectory_id").to_pylist() == ["step2"]
    assert [p.record for p in run.problems] == ["row 3"]


def test_openrlhf_samples_ingest_classify_report_and_check(tmp_path):
    store, _ = through_every_surface(RUN, tmp_path, nothing_to_check=True)  # no tool calls, no scalars
    assert store.sql("SELECT count(*) AS n FROM trajectories")["n"].to_list() == [3]
