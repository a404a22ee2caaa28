"""The ``call_credit`` file of a run of many small steps: their rows written together, a row
group of many steps, the same rows as written a step at a time."""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow.parquet as pq
from polars.testing import assert_frame_equal

import trajlens
from trajlens.attribution import api

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "report"))
from built_runs import degenerate_store  # noqa: E402


def _credit(store_path: Path):
    store = trajlens.open(store_path)
    api.attribute(store, "degenerate")
    files = list((store_path / "derived" / "call_credit").glob("*.parquet"))
    assert len(files) == 1
    return pq.ParquetFile(files[0]).metadata.num_row_groups, store.table("call_credit").collect()


def test_the_credit_of_many_small_steps_is_written_in_row_groups_of_many_steps(tmp_path, monkeypatch):
    grouped_groups, grouped = _credit(degenerate_store(tmp_path / "grouped", 40, chunk=20))
    monkeypatch.setattr(api, "CALL_CREDIT_GROUP_ROWS", 1)  # a row group per step, as each step comes
    step_groups, stepwise = _credit(degenerate_store(tmp_path / "stepwise", 40, chunk=20))
    assert grouped["step"].n_unique() == step_groups == 40
    assert grouped_groups == 1
    assert_frame_equal(grouped, stepwise, check_exact=True)
