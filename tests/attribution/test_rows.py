"""RowBlocks stacks a step's rows at a time into the frame a diagonal concat of their frames gives."""

from __future__ import annotations

import numpy as np
import polars as pl
from polars.testing import assert_frame_equal

from trajlens.attribution._rows import RowBlocks


def _blocks() -> list[dict]:
    return [
        {"step": np.full(2, 3), "reward": pl.Series([1.0, None]), "count:edit": np.array([1.0, np.nan]),
         "estimator": np.array(["grpo", "gae"]), "primary_class": np.array(["edit", "view"], dtype=object)},
        {"step": np.full(1, 4), "reward": pl.Series([0.5]), "count:view": np.array([2.0]),
         "estimator": np.array(["rloo"]), "primary_class": np.array(["think"], dtype=object)},
        {"step": np.full(0, 5), "reward": pl.Series([], dtype=pl.Float64), "count:edit": np.zeros(0),
         "estimator": np.array([], dtype="<U1"), "primary_class": np.array([], dtype=object)},
        {"step": np.full(2, 6), "reward": pl.Series([2.0, 3.0]), "count:edit": np.array([0.0, 4.0]),
         "count:view": np.array([1.0, 1.0]), "estimator": np.array(["grpo", "grpo"]),
         "primary_class": np.array(["edit", "edit"], dtype=object), "channel:format": np.array([1.0, 0.0])},
    ]


def test_stacked_blocks_are_the_diagonal_concat_of_their_frames():
    rows = RowBlocks()
    for block in _blocks():
        rows.append(block)
    expected = pl.concat([pl.DataFrame(block) for block in _blocks()], how="diagonal_relaxed")
    stacked = rows.frame()
    assert_frame_equal(stacked, expected)
    # a column a block lacks is null there, not NaN; a NaN a block holds stays NaN
    assert stacked["count:view"].null_count() == 2 and stacked["count:edit"].is_nan().sum() == 1
    assert stacked["count:edit"].null_count() == 1


def test_frames_and_column_blocks_stack_alike():
    as_frames, as_columns = RowBlocks(), RowBlocks()
    for block in _blocks():
        as_frames.append(pl.DataFrame(block))
        as_columns.append(block)
    assert_frame_equal(as_frames.frame(), as_columns.frame())
    assert len(as_frames) == 4 and as_frames and not RowBlocks()
