"""How the tests compare floating-point results: bit for bit only where the same kernel ran.

The rule:

* **Bit-exact** (``torch.equal``, ``DataFrame.equals``, ``==``) only where both sides ran the very
  same kernel on the same inputs (the same function called twice, a value copied, a stored value
  read back), or where the arithmetic is exact (small integers, dyadic fractions, one correctly
  rounded ``+ - * /`` of exactly representable operands).
* **A few ulp** (:func:`assert_close_ulp`, :func:`assert_frame_close_ulp`) everywhere else: a loop
  reference against a vectorised kernel, verl's or TRL's code against ours, a whole-run
  computation against a per-step one. Their summation orders differ, and torch's CPU reductions
  pick their order by the instruction set of the machine, so a result that is bit-identical on
  one x86 machine can be one ulp off on another with the very same torch build.

The tolerance is relative, ``ulps * eps`` of the dtype (float32 eps 1.2e-7, float64 2.2e-16), plus
an absolute floor of ``ulps * eps`` times the largest magnitude in ``expected``, so that values
which cancel to about zero may differ by rounding of the operands they came from. Four ulp is far
below any real defect (a wrong epsilon, mean, Bessel factor or mask moves results by 1e-8 relative
in float64 and 1e-3 in float32, not by 1e-16 or 1e-7).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

DEFAULT_ULPS = 4


def _as_tensor(value: Any) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value
    return torch.as_tensor(np.array(value))  # a copy: polars hands out read-only arrays


def ulp_tolerance(dtype: torch.dtype, ulps: int = DEFAULT_ULPS) -> float:
    """The relative tolerance ``ulps * eps`` of a floating dtype."""
    return ulps * torch.finfo(dtype).eps


def assert_close_ulp(actual: Any, expected: Any, ulps: int = DEFAULT_ULPS, msg: str | None = None) -> None:
    """``actual`` equals ``expected`` to ``ulps`` units in the last place of their dtype.

    Tensors, numpy arrays, sequences and Python floats; dtypes and shapes must match (a Python
    float or a list of them is float64). NaN must sit where ``expected`` has NaN.
    """
    actual_tensor, expected_tensor = _as_tensor(actual), _as_tensor(expected)
    dtype = expected_tensor.dtype
    if not dtype.is_floating_point:
        raise TypeError(f"assert_close_ulp compares floating values, got {dtype}")
    rtol = ulp_tolerance(dtype, ulps)
    finite = expected_tensor[torch.isfinite(expected_tensor)]
    scale = float(finite.abs().max()) if finite.numel() else 0.0
    atol = rtol * scale
    torch.testing.assert_close(actual_tensor, expected_tensor, rtol=rtol, atol=atol, equal_nan=True, msg=msg)


def assert_frame_close_ulp(actual: Any, expected: Any, ulps: int = DEFAULT_ULPS) -> None:
    """Two polars frames equal in schema, row order and every non-float value; floats to ``ulps`` ulp.

    Each float column (struct fields and lists of floats included) is compared with
    :func:`assert_close_ulp` in its own dtype, so float32 columns are held to float32 ulp and
    float64 columns to float64 ulp; nulls must sit in the same places. Everything else is exact.
    """
    import polars as pl
    from polars.testing import assert_frame_equal

    assert actual.schema == expected.schema, f"schemas differ: {actual.schema} != {expected.schema}"
    assert actual.height == expected.height, f"heights differ: {actual.height} != {expected.height}"
    actual, expected = _flatten(actual), _flatten(expected)
    floats = [name for name, kind in expected.schema.items() if kind.is_float()]
    nested = [name for name, kind in expected.schema.items()
              if isinstance(kind, (pl.List, pl.Array)) and kind.inner is not None and kind.inner.is_float()]
    exact = [name for name in expected.columns if name not in floats and name not in nested]
    assert_frame_equal(actual.select(exact), expected.select(exact), check_exact=True)
    for name in floats:
        _compare_float_column(actual[name], expected[name], ulps, name)
    for name in nested:
        found, wanted = actual[name].cast(pl.List(expected.schema[name].inner)), expected[name].cast(
            pl.List(expected.schema[name].inner))
        assert found.list.len().equals(wanted.list.len()), f"{name}: list lengths or nulls differ"
        _compare_float_column(found.explode(), wanted.explode(), ulps, name)


def _flatten(frame: Any) -> Any:
    """Struct columns split into one column per field, ``column.field``, recursively."""
    import polars as pl

    while any(isinstance(kind, pl.Struct) for kind in frame.schema.values()):
        columns = []
        for name, kind in frame.schema.items():
            if isinstance(kind, pl.Struct):
                columns.append(pl.col(name).is_null().alias(f"{name}.<null>"))
                columns += [pl.col(name).struct.field(field.name).alias(f"{name}.{field.name}") for field in kind.fields]
            else:
                columns.append(pl.col(name))
        frame = frame.select(columns)
    return frame


def _compare_float_column(actual: Any, expected: Any, ulps: int, name: str) -> None:
    assert actual.is_null().equals(expected.is_null()), f"{name}: nulls differ"
    valid = ~expected.is_null()
    assert_close_ulp(actual.filter(valid).to_numpy(), expected.filter(valid).to_numpy(), ulps, msg=f"column {name}")
