"""Argument checks shared by the estimators.

Every check raises :class:`EstimatorInputError` with one line that names the function, the
argument, what was expected and what was found (dtype and shape), so a caller can fix the call
without reading the traceback.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from trajlens.estimators._errors import EstimatorInputError as EstimatorInputError  # noqa: F401  (re-exported)


def shape_of(x: torch.Tensor) -> str:
    return "(" + ", ".join(str(d) for d in x.shape) + ")"


def float_tensor(fn: str, name: str, x: object, ndim: int | None = None) -> torch.Tensor:
    """``x`` as a floating tensor of ``ndim`` dimensions; a bool or integer tensor is refused."""
    if not isinstance(x, torch.Tensor):
        raise EstimatorInputError(f"{fn}: {name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype == torch.bool:
        raise EstimatorInputError(
            f"{fn}: {name} must be a floating tensor, got a bool tensor of shape {shape_of(x)} "
            "(a mask passed where values are expected?)"
        )
    if not x.is_floating_point():
        raise EstimatorInputError(
            f"{fn}: {name} must be a floating tensor, got {x.dtype} of shape {shape_of(x)}; "
            f"convert it with {name}.float()"
        )
    if ndim is not None and x.dim() != ndim:
        raise EstimatorInputError(
            f"{fn}: {name} must have {ndim} dimension{'s' if ndim != 1 else ''}, got shape {shape_of(x)}"
        )
    return x


def bool_mask(fn: str, name: str, mask: object, ndim: int = 2) -> torch.Tensor:
    """``mask`` as a bool tensor of ``ndim`` dimensions; a float or integer mask is refused."""
    if not isinstance(mask, torch.Tensor):
        raise EstimatorInputError(f"{fn}: {name} must be a bool torch.Tensor, got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise EstimatorInputError(
            f"{fn}: {name} must be a bool tensor (True for model tokens), got {mask.dtype} of shape "
            f"{shape_of(mask)}; convert it with {name}.bool()"
        )
    if mask.dim() != ndim:
        raise EstimatorInputError(f"{fn}: {name} must have {ndim} dimensions, got shape {shape_of(mask)}")
    return mask


def same_shape(fn: str, **tensors: torch.Tensor) -> None:
    """All ``tensors`` have the shape of the first one."""
    items = list(tensors.items())
    first_name, first = items[0]
    for name, x in items[1:]:
        if x.shape != first.shape:
            raise EstimatorInputError(
                f"{fn}: {name} has shape {shape_of(x)} but {first_name} has shape {shape_of(first)}; they must match"
            )


def same_device(fn: str, **tensors: torch.Tensor) -> None:
    items = list(tensors.items())
    first_name, first = items[0]
    for name, x in items[1:]:
        if x.device != first.device:
            raise EstimatorInputError(
                f"{fn}: {name} is on {x.device} but {first_name} is on {first.device}; move them to one device"
            )


def nonempty_batch(fn: str, name: str, x: torch.Tensor) -> None:
    if x.numel() == 0:
        raise EstimatorInputError(f"{fn}: empty batch: {name} has shape {shape_of(x)}")


def rows_have_tokens(fn: str, name: str, mask: torch.Tensor) -> None:
    """Every row of a (B, T) mask, or every (B,) model-token count, has at least one model token."""
    empty_rows = ((mask == 0) if mask.dim() == 1 else ~mask.any(dim=-1)).nonzero().flatten()
    if empty_rows.numel():
        listed = ", ".join(str(int(i)) for i in empty_rows[:8])
        more = f" and {empty_rows.numel() - 8} more" if empty_rows.numel() > 8 else ""
        what = f"{name} counts no model token for trajectories" if mask.dim() == 1 else \
            f"{name} of shape {shape_of(mask)} has rows with no model tokens:"
        raise EstimatorInputError(f"{fn}: {what} {listed}{more}; drop those trajectories first")


def number(fn: str, name: str, value: object) -> float:
    """``value`` as a float when it is a real number (an int or a float, not a bool, and not
    text: ``gamma="0.5"`` is refused, as a trainer's typed config would refuse it)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise EstimatorInputError(f"{fn}: {name} must be a number, got {value!r}")
    try:
        return float(value)
    except OverflowError:
        raise EstimatorInputError(f"{fn}: {name} must be a finite number, got {value!r}") from None


def flag(fn: str, name: str, value: object) -> bool:
    """``value`` when it is a bool: a text such as ``"no"`` would otherwise read as True."""
    if not isinstance(value, bool):
        raise EstimatorInputError(f"{fn}: {name} must be True or False, got {value!r}")
    return value


def unit_interval(fn: str, name: str, value: float) -> float:
    value = number(fn, name, value)
    if not (0.0 <= value <= 1.0) or math.isnan(value):
        raise EstimatorInputError(f"{fn}: {name} must lie in [0, 1], got {value}")
    return value


def positive(fn: str, name: str, value: float, allow_zero: bool = False) -> float:
    value = number(fn, name, value)
    ok = value >= 0.0 if allow_zero else value > 0.0
    if not ok or math.isnan(value):
        bound = ">= 0" if allow_zero else "> 0"
        raise EstimatorInputError(f"{fn}: {name} must be {bound}, got {value}")
    return value


def epsilon(fn: str, value: float) -> float:
    """An epsilon added to a std: finite and 0 or more, for every estimator alike (a negative one
    can divide by nearly zero, an infinite one zeroes every advantage)."""
    value = number(fn, "epsilon", value)
    if not (math.isfinite(value) and value >= 0.0):
        raise EstimatorInputError(f"{fn}: epsilon must be a finite number >= 0, got {value}")
    return value


def choice(fn: str, name: str, value: str, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise EstimatorInputError(f"{fn}: {name} must be one of {', '.join(map(repr, allowed))}, got {value!r}")
    return value


def finite_where(fn: str, name: str, x: torch.Tensor, where: torch.Tensor | None = None) -> None:
    """No NaN or infinity in ``x`` (at the positions ``where`` is True, when given)."""
    bad = ~torch.isfinite(x)
    if where is not None:
        bad &= where
    if bool(bad.any()):
        first = tuple(int(i) for i in bad.nonzero()[0])
        at = "model token " if where is not None else "position "
        raise EstimatorInputError(
            f"{fn}: {name} of shape {shape_of(x)} has a non-finite value at {at}{first}"
        )


def weights_vector(fn: str, weights: object, channels: int, like: torch.Tensor) -> torch.Tensor:
    """Channel weights as a (K,) tensor of ``like``'s dtype and device; ones when ``None``."""
    if weights is None:
        return torch.ones(channels, dtype=like.dtype, device=like.device)
    try:
        w = torch.as_tensor(weights, dtype=like.dtype, device=like.device)
    except (TypeError, ValueError, RuntimeError):
        raise EstimatorInputError(f"{fn}: weights must be numbers, one per channel, got {weights!r}") from None
    if w.dim() != 1 or w.shape[0] != channels:
        raise EstimatorInputError(
            f"{fn}: weights must have one entry per channel ({channels}), got shape {shape_of(w)}"
        )
    if not bool(torch.isfinite(w).all()):
        raise EstimatorInputError(f"{fn}: weights must be finite in {like.dtype}, got {weights!r}")
    if not bool((w != 0).any()):
        raise EstimatorInputError(f"{fn}: weights are all zero, which gives every trajectory an advantage of 0; got {weights!r}")
    return w
