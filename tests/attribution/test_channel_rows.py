"""Each trajectory's reward channel values as attribution reads them: one row per value, a null
list or a null entry giving none, whatever its list column holds under a null."""

from __future__ import annotations

import polars as pl

from trajlens.attribution.api import _channel_rows, _channel_values

CHANNEL = pl.Struct({"name": pl.String, "value": pl.Float64})


def test_a_nulled_list_gives_no_value_even_where_its_entries_stay_in_the_buffers():
    frame = pl.DataFrame({
        "reward_channels": [
            [{"name": "correct", "value": 1.0}, {"name": "format", "value": 0.0}],
            [{"name": "correct", "value": 0.0}, {"name": "format", "value": 1.0}],
            [None, {"name": "format", "value": 0.5}],
            [],
        ],
    }, schema={"reward_channels": pl.List(CHANNEL)})
    # when/then nulls the second list but leaves its two entries in the child buffers
    nulled = frame.with_columns(pl.when(pl.int_range(pl.len()) == 1).then(None).otherwise(pl.col("reward_channels"))
                                .alias("reward_channels"))
    rows = _channel_rows(nulled)
    assert rows.to_dicts() == [{"index": 0, "name": "correct", "value": 1.0}, {"index": 0, "name": "format", "value": 0.0},
                               {"index": 2, "name": "format", "value": 0.5}]
    values = _channel_values(nulled)
    assert values["channel:format"].tolist()[:1] == [0.0] and values["channel:format"][2] == 0.5
    assert all(v != v for v in (values["channel:correct"][1], values["channel:correct"][2], values["channel:format"][3]))
