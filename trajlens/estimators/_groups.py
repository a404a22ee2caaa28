"""Group ids to tensor indices, and per-group statistics without a loop over groups.

Groups are found from any id column: int tensors, numpy arrays, lists of strings, a Polars
Series. Members of a group need not be contiguous. Statistics are computed on groups bucketed by
size: each bucket is a (G_n, n) matrix whose rows list the members of one group in batch order,
so a reduction over its last dimension sees the same values in the same order as the reference
trainers' per-group ``torch.stack(...).mean()``. The only Python loop is over distinct group
sizes (usually one or two).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal

import torch

from trajlens.estimators._validate import EstimatorInputError


@dataclass(frozen=True)
class SizeBucket:
    """All groups of one size ``size``: ``members[g, j]`` is the batch row of member j of group g."""

    size: int
    groups: torch.Tensor  # (G_n,) group numbers
    members: torch.Tensor  # (G_n, n) batch rows, in batch order within each group


@dataclass(frozen=True)
class GroupIndex:
    """Group number of each trajectory, and the groups bucketed by size.

    ``index[i]`` is the group of trajectory i, numbered 0..G-1 in order of first appearance.
    """

    index: torch.Tensor  # (B,) int64
    sizes: torch.Tensor  # (G,) int64
    buckets: tuple[SizeBucket, ...]

    @property
    def num_groups(self) -> int:
        return int(self.sizes.shape[0])

    @property
    def batch_size(self) -> int:
        return int(self.index.shape[0])


_FOUND: ContextVar[dict[int, tuple[Any, GroupIndex]] | None] = ContextVar("trajlens_found_groups", default=None)


@contextlib.contextmanager
def found_groups(found: dict[int, tuple[Any, GroupIndex]]) -> Iterator[None]:
    """Within it, :func:`group_index` of an ids object in ``found`` (by identity: ``id(ids) ->
    (ids, its GroupIndex)``) is the index found before, not factorised again: estimators
    recomputed on the same step share its groups, while each still receives the ids themselves."""
    token = _FOUND.set(found)
    try:
        yield
    finally:
        _FOUND.reset(token)


def group_index(fn: str, group_ids: Any, batch_size: int, device: torch.device) -> GroupIndex:
    """Factorise ``group_ids`` (length B) into a :class:`GroupIndex` on ``device``."""
    if isinstance(group_ids, GroupIndex):
        if group_ids.batch_size != batch_size:
            raise EstimatorInputError(
                f"{fn}: group_ids has {group_ids.batch_size} entries but the batch has {batch_size} trajectories"
            )
        return group_ids
    found = (_FOUND.get() or {}).get(id(group_ids))
    if found is not None and found[0] is group_ids and found[1].batch_size == batch_size \
            and found[1].index.device == device:
        return found[1]
    index = _factorise(fn, group_ids)
    if index.shape[0] != batch_size:
        raise EstimatorInputError(
            f"{fn}: group_ids has {index.shape[0]} entries but the batch has {batch_size} trajectories"
        )
    index = index.to(device)
    sizes = torch.bincount(index)
    # rows sorted by group, batch order kept within a group
    order = torch.sort(index, stable=True).indices
    starts = torch.cumsum(sizes, 0) - sizes
    buckets = []
    for size in torch.unique(sizes).tolist():
        groups = (sizes == size).nonzero().flatten()
        offsets = starts[groups][:, None] + torch.arange(size, device=device)[None, :]
        buckets.append(SizeBucket(int(size), groups, order[offsets]))
    return GroupIndex(index, sizes, tuple(buckets))


def _factorise(fn: str, group_ids: Any) -> torch.Tensor:
    if isinstance(group_ids, torch.Tensor):
        if group_ids.dim() != 1:
            raise EstimatorInputError(f"{fn}: group_ids must be one-dimensional, got shape {tuple(group_ids.shape)}")
        if group_ids.is_floating_point():
            raise EstimatorInputError(f"{fn}: group_ids must hold integer or string ids, got {group_ids.dtype}")
        _, inverse = torch.unique(group_ids, return_inverse=True)
        return _first_appearance(inverse)
    if hasattr(group_ids, "to_list") and not isinstance(group_ids, (list, tuple)):  # polars / pandas Series
        group_ids = group_ids.to_list()
    elif hasattr(group_ids, "tolist") and not isinstance(group_ids, (list, tuple)):  # numpy arrays
        group_ids = group_ids.tolist()
    if isinstance(group_ids, (str, bytes)) or not isinstance(group_ids, Sequence):
        raise EstimatorInputError(
            f"{fn}: group_ids must be a tensor or a sequence of ids, got {type(group_ids).__name__}"
        )
    numbers: dict[Any, int] = {}
    try:
        index = [numbers.setdefault(g, len(numbers)) for g in group_ids]
    except TypeError as error:
        raise EstimatorInputError(f"{fn}: group_ids must be hashable ids: {error}") from None
    return torch.tensor(index, dtype=torch.int64)


def _first_appearance(inverse: torch.Tensor) -> torch.Tensor:
    """Renumber group indices in order of first appearance (matches dict insertion order)."""
    if inverse.numel() == 0:
        return inverse
    num = int(inverse.max()) + 1
    first = torch.full((num,), inverse.numel(), dtype=torch.int64, device=inverse.device)
    first.scatter_reduce_(0, inverse, torch.arange(inverse.numel(), device=inverse.device), "amin")
    rank = torch.empty_like(first)
    rank[torch.argsort(first)] = torch.arange(num, device=inverse.device)
    return rank[inverse]


StdConvention = Literal["full", "dim"]


def group_mean_std(
    scores: torch.Tensor, groups: GroupIndex, std: StdConvention = "full"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-trajectory group mean and unbiased group std, each (B,).

    ``std="full"`` reproduces ``torch.std`` of a one-dimensional tensor (verl stacks each group and
    calls it): the mean in the input dtype, squared deviations summed in float64. ``std="dim"``
    reproduces ``tensor.view(-1, n).std(dim=1)`` (TRL). Both agree to rounding. Groups of one get
    a NaN std; callers apply their reference's rule for them.
    """
    mean = torch.empty_like(scores)
    spread = torch.empty_like(scores)
    for bucket in groups.buckets:
        values = scores[bucket.members]  # (G_n, n)
        group_mean = values.mean(dim=1)  # mu_g = sum_i r_i / n
        if bucket.size == 1:
            group_std = torch.full_like(group_mean, float("nan"))
        elif std == "full":
            centred = values.double() - group_mean.double()[:, None]
            group_std = (centred.square().sum(dim=1) / (bucket.size - 1)).sqrt().to(scores.dtype)  # Bessel
        else:
            group_std = values.std(dim=1)
        mean[bucket.members] = group_mean[:, None].expand_as(values)
        spread[bucket.members] = group_std[:, None].expand_as(values)
    return mean, spread


def group_sizes(groups: GroupIndex) -> torch.Tensor:
    """Size of each trajectory's group, (B,) int64."""
    return groups.sizes[groups.index]


def group_max_minus_min(values: torch.Tensor, groups: GroupIndex) -> torch.Tensor:
    """max - min of ``values`` (B, K) within each group, NaN-aware, (G, K); NaN where a group has no value."""
    finite = ~torch.isnan(values)
    index = groups.index[:, None].expand_as(values)
    shape = (groups.num_groups, values.shape[1])
    high = torch.full(shape, float("-inf"), dtype=values.dtype, device=values.device)
    low = torch.full(shape, float("inf"), dtype=values.dtype, device=values.device)
    high.scatter_reduce_(0, index, torch.where(finite, values, float("-inf")), "amax")
    low.scatter_reduce_(0, index, torch.where(finite, values, float("inf")), "amin")
    spread = high - low
    return torch.where(torch.isfinite(spread), spread, torch.full_like(spread, float("nan")))


def group_mean_std_float32(scores: torch.Tensor, groups: GroupIndex) -> tuple[torch.Tensor, torch.Tensor]:
    """verl ``verl.utils.group_mean_std(scores, index, eps=0.0)`` (``grpo_vectorized``): per-group
    mean and unbiased std in float32, (G,) each, summed with ``index_add_`` in batch order and the
    variance two-pass (about deviations from the float32 mean); a group of one gets mean 0, std 1."""
    values = scores.reshape(-1).to(torch.float32)
    index = groups.index
    count = torch.zeros(groups.num_groups, device=values.device, dtype=torch.float32).index_add_(
        0, index, torch.ones_like(values))
    total = torch.zeros(groups.num_groups, device=values.device, dtype=torch.float32).index_add_(0, index, values)
    mean = total / count.clamp_min(1.0)  # mu_g = sum_g r / n_g
    centred = values - mean[index]
    squares = torch.zeros(groups.num_groups, device=values.device, dtype=torch.float32).index_add_(
        0, index, centred * centred)
    std = torch.sqrt(torch.clamp(squares / (count - 1.0).clamp_min(1.0), min=0.0))  # Bessel, no variance floor
    single = count <= 1.0
    mean = torch.where(single, torch.zeros_like(mean), mean)
    std = torch.where(single, torch.ones_like(std), std)
    return mean, std
