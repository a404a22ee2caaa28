"""Token arrays whose values are all finite pass on one sum per array; any NaN or infinity, in
float32 or float64, with or without nulls beside it, is still named at its first row as the exact
test names it."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from trajlens import rows
from trajlens.rows import _surely_finite, _token_problems


def _tokens(values: np.ndarray, lengths: list[int], *, nulls: np.ndarray | None = None) -> pa.Table:
    offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
    count = int(sum(lengths))
    return pa.table({
        "trajectory_id": [f"t{i}" for i in range(len(lengths))],
        "response_mask": pa.ListArray.from_arrays(offsets, pa.array(np.ones(count, dtype=bool))),
        "values": pa.ListArray.from_arrays(offsets, pa.array(values, mask=nulls)),
        **{name: pa.ListArray.from_arrays(offsets, pa.array(np.zeros(count, dtype=np.float32)))
           for name in ("token_rewards", "log_probs", "logged_advantages")},
    })


def _problems(table: pa.Table) -> list[tuple[int, str]]:
    return [(problem.row, str(problem.error)) for problem in _token_problems(table, "f.parquet")]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize("with_nulls", [False, True])
def test_a_value_that_is_not_finite_is_named_as_the_exact_test_names_it(monkeypatch, dtype, bad, with_nulls):
    rng = np.random.default_rng(5)
    lengths = [7, 0, 12, 5, 9]
    values = rng.standard_normal(sum(lengths)).astype(dtype) * 1e3
    values[[9, 30]] = bad  # rows 2 and 4
    nulls = (rng.random(values.size) < 0.2) & ~np.isin(np.arange(values.size), [9, 30]) if with_nulls else None
    table = _tokens(values, lengths, nulls=nulls)
    found = _problems(table)
    assert [row for row, _ in found] == [2, 4]
    assert "expected finite numbers" in found[0][1]
    monkeypatch.setattr(rows, "_surely_finite", lambda values: False)  # the exact test alone
    assert _problems(table) == found


def test_finite_values_pass_on_their_sum_and_what_it_cannot_tell_goes_to_the_exact_test():
    finite = pa.chunked_array([pa.array(np.full(1000, 3e38, dtype=np.float32))])  # float32 sums never overflow
    assert _surely_finite(finite)
    huge = pa.chunked_array([pa.array(np.full(4, 1e308))])  # finite, but the sum overflows: not sure
    assert not _surely_finite(huge)
    assert _problems(_tokens(np.full(4, 1e308), [2, 2])) == []
    assert not _surely_finite(pa.chunked_array([pa.array([1.0, None])]))
    assert _surely_finite(pa.chunked_array([pa.array([1.0, 2.0]), pa.array([3.0])]))
