"""What ``Store.write_derived`` and ``Store.drop_derived`` refuse, and a store whose analysis
table's parts do not fit together still answering every other query."""

from __future__ import annotations

import os

import polars as pl
import pytest

import trajlens
from trajlens.errors import ConfigError, QueryError


def _files(store) -> set[str]:
    return {str(path.relative_to(store)) for path in store.rglob("*") if path.is_file()}


@pytest.mark.parametrize(("name", "run_id", "message"), [
    ("mine", "../../evil", r"run id '\.\./\.\./evil': expected 1-128 letters"),
    ("../x", "sao-r6", r"analysis table name '\.\./x': expected letters, digits and '_'"),
    ("trajectories", "sao-r6", r"'trajectories': a table or view every store has"),
    ("measured_splits", "sao-r6", r"'measured_splits': a table or view every store has"),
    ("Tool_Calls", "sao-r6", r"'Tool_Calls': a table or view every store has"),
    ("mine", "nope", r"run 'nope' is not in the store"),
])
def test_a_part_outside_its_table_folder_or_hiding_a_table_is_refused(samples_store_copy, name, run_id, message):
    before = _files(samples_store_copy)
    with pytest.raises(ConfigError, match=message):
        trajlens.open(samples_store_copy).write_derived(name, run_id, pl.DataFrame({"x": [1]}))
    assert _files(samples_store_copy) == before
    store = trajlens.open(samples_store_copy)
    assert store.sql("SELECT count(*) FROM trajectories").item() == store.trajectories.collect().height


def test_dropping_a_path_outside_the_analysis_tables_is_refused(samples_store_copy):
    before = _files(samples_store_copy)
    with pytest.raises(ConfigError, match="analysis table name '../runs/sao-r6/tool_calls'"):
        trajlens.open(samples_store_copy).drop_derived(["../runs/sao-r6/tool_calls"], "part-0")
    with pytest.raises(ConfigError, match=r"names: expected a list of analysis tables, got the text 'mine'"):
        trajlens.open(samples_store_copy).drop_derived("mine", "sao-r6")
    assert _files(samples_store_copy) == before


@pytest.mark.parametrize(("frame", "error", "message"), [
    (pl.DataFrame(), ConfigError, "analysis table mine: the frame has no column"),
    (pl.DataFrame({"a": [object()]}, schema={"a": pl.Object}), ConfigError,
     "analysis table mine: the frame cannot be saved as Parquet"),
    ({"a": [1]}, TypeError, "frame: expected a Polars DataFrame or LazyFrame or an Arrow table, got dict"),
])
def test_a_frame_that_cannot_be_a_table_is_refused_and_leaves_nothing(samples_store_copy, frame, error, message):
    before = _files(samples_store_copy)
    with pytest.raises(error, match=message):
        trajlens.open(samples_store_copy).write_derived("mine", "sao-r6", frame)
    assert _files(samples_store_copy) == before


def test_a_lazy_frame_is_saved_as_its_rows(samples_store_copy):
    store = trajlens.open(samples_store_copy)
    store.write_derived("mine", "sao-r6", pl.LazyFrame({"a": [1, 2]}))
    assert store.sql("SELECT sum(a) FROM mine").item() == 3


def test_a_part_that_does_not_fit_the_others_is_refused(samples_store_copy):
    store = trajlens.open(samples_store_copy)
    store.write_derived("mine", "sao-r6", pl.DataFrame({"a": [1]}))
    with pytest.raises(ConfigError, match=r"analysis table mine: its runs' parts do not fit together \(Field a has "
                                          r"incompatible types: int64 vs large_string\)"):
        store.write_derived("mine", "multireward", pl.DataFrame({"a": ["x"]}))
    store.write_derived("mine", "sao-r6", pl.DataFrame({"a": ["x"]}))  # its own part is replaced, not joined
    assert store.table("mine").collect()["a"].to_list() == ["x"]


def test_parts_that_do_not_fit_leave_out_their_table_alone(samples_store_copy):
    """Parts written apart (by other versions, or by hand) that hold one column as text and as
    numbers: that table's query names the conflict; every other table is still read."""
    store = trajlens.open(samples_store_copy)
    store.write_derived("mine", "sao-r6", pl.DataFrame({"a": [1]}))
    store.write_derived("other", "multireward", pl.DataFrame({"a": ["x"]}))
    derived = samples_store_copy / "derived"
    for name in ("multireward.parquet", ".multireward.parquet.sha256"):
        os.rename(derived / "other" / name, derived / "mine" / name)
    (derived / "other").rmdir()
    store = trajlens.open(samples_store_copy)
    assert store.sql("SELECT count(*) FROM trajectories").item() == store.trajectories.collect().height
    with pytest.raises(QueryError, match=r"^query failed: analysis table mine: its runs' parts do not fit together "
                                         r"\(Field a has incompatible types: .*\); drop one run's part"):
        store.sql("SELECT * FROM mine")
