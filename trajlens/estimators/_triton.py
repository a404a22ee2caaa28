"""A fused reverse scan on CUDA (Triton): GAE and discounted returns in two passes over the tokens.

The torch path on a GPU (:func:`trajlens.estimators._scan._masked_chunk`) compacts the model
tokens, builds TD errors, runs blocked Toeplitz products and gathers back: a dozen kernels and
as many round trips through memory. Here one Triton program owns a row when the rows alone
fill the GPU (at least one a multiprocessor); otherwise each row is cut into chunks of
``CHUNK`` tokens and a program owns a chunk, so a batch of a few long rows fills it too, in two
passes (one, the second, when a program owns a row; see :func:`layout`):

1. :func:`_summary_kernel` walks its chunk from the end in tiles of ``TILE`` tokens and writes
   five numbers: whether the chunk holds a model token, the value at its first model token, and
   the affine map the chunk applies to what comes from its right,
   ``y_start = A * y_carried + B + E * gamma * V_ext`` (``y_carried`` the advantage carried
   into the chunk, ``V_ext`` the value of the next model token past it; only the chunk's last
   model token sees ``V_ext``, which ``E`` weighs).
2. :func:`_apply_kernel` composes the summaries of the chunks to its right (a few dozen
   numbers) into its own ``y_carried`` and ``V_ext``, walks its chunk again and writes
   advantages and returns once.

Within a tile two ``tl.associative_scan`` calls do the work, over the tile loaded back to front:

* the next model token's value, ``V_next``: a "latest model token wins" scan over the values
  one position to the right, falling back on the value carried from the tile before;
* the masked recurrence as a composition of affine maps ``y -> a y + b``, with ``(a, b) =
  (c, delta_t)`` at a model token and ``(1, 0)`` (carry unchanged) at an observation token;
  composing ``(a1, b1)`` then ``(a2, b2)`` gives ``(a2 a1, a2 b1 + b2)``, and the advantage is
  the composed map applied to the advantage carried from the tile before.

Traffic is about 26 bytes a token in float32 with chunks (inputs read twice, outputs written
once) and 17 with a program a row. The second kernel also counts rows without a model token
and sums the advantages (a NaN or infinity shows in the sum), so the flags come back in one
device-to-host copy of two numbers.

Float32 only (Triton passes scalars as float32, so gamma would be rounded for float64); other
dtypes, and any machine without Triton, use the torch path. :data:`AVAILABLE` says whether
Triton imported; :func:`masked_scan` raises if the kernel cannot be built, and the caller falls
back (see :func:`trajlens.estimators._scan.masked_reverse_scan`).
"""

from __future__ import annotations

import functools
import math

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # no Triton: the torch path runs
    triton = None  # type: ignore[assignment, unused-ignore]
    tl = None  # type: ignore[assignment, unused-ignore]

AVAILABLE: bool = triton is not None
TILE = 1024  # tokens a tile when rows are cut into chunks, and warps a program
WARPS = 4
CHUNK = 4096  # tokens a program owns; longer rows get longer chunks, at most MAX_CHUNKS a row
MAX_CHUNKS = 64
ROW_TILE = 2048  # the same when a program owns a whole row
ROW_WARPS = 8

if AVAILABLE:

    @triton.jit
    def _latest(has_a, value_a, has_b, value_b):  # type: ignore[no-untyped-def]
        # b comes later in scan order (nearer to the row start): it wins when it is a model token
        return tl.maximum(has_a, has_b), tl.where(has_b > 0, value_b, value_a)

    @triton.jit
    def _affine(a1, b1, a2, b2):  # type: ignore[no-untyped-def]
        # apply (a1, b1) first, then (a2, b2): y -> a2 (a1 y + b1) + b2
        return a2 * a1, a2 * b1 + b2

    @triton.jit
    def _affine2(a1, b1, e1, a2, b2, e2):  # type: ignore[no-untyped-def]
        # two offsets under one slope: b (the TD errors) and e (the weight of V_ext)
        return a2 * a1, a2 * b1 + b2, a2 * e1 + e2

    @triton.jit
    def _last(x, is_last):  # type: ignore[no-untyped-def]
        return tl.sum(tl.where(is_last, x, 0), axis=0)

    @triton.jit  # type: ignore[untyped-decorator]
    def _tile_delta(  # type: ignore[no-untyped-def]
        rewards_ptr, values_ptr, mask_ptr, base, t, is_last, start, stop, carried_value, gamma,
        HAS_VALUES: tl.constexpr,
    ):
        """One tile, back to front: model flags, values, TD errors, whether a model token lies to
        the right of each token inside the chunk, and ``V_next`` to carry to the next tile."""
        inside = t >= start
        model = tl.load(mask_ptr + base + t, mask=inside, other=0) != 0
        reward = tl.load(rewards_ptr + base + t, mask=inside & model, other=0.0).to(tl.float32)
        if HAS_VALUES:
            value = tl.load(values_ptr + base + t, mask=inside, other=0.0).to(tl.float32)
            right = inside & (t + 1 < stop)
            model_right = (tl.load(mask_ptr + base + t + 1, mask=right, other=0) != 0).to(tl.int32)
            value_right = tl.load(values_ptr + base + t + 1, mask=right, other=0.0).to(tl.float32)
            has, nearest = tl.associative_scan((model_right, value_right), 0, _latest)
            delta = reward + gamma * tl.where(has > 0, nearest, carried_value) - value  # r + gamma V_next - V
            carried_value = tl.where(_last(has, is_last) > 0, _last(nearest, is_last), carried_value)
        else:  # returns alone: no values, and nothing reads has
            value = reward
            has = model.to(tl.int32)
            delta = reward
        return model, value, has, delta, carried_value

    @triton.jit  # type: ignore[untyped-decorator]
    def _summary_kernel(  # type: ignore[no-untyped-def]
        rewards_ptr, values_ptr, mask_ptr, summary_ptr, length, chunks, size, tiles, gamma, c,
        HAS_VALUES: tl.constexpr, TILE_SIZE: tl.constexpr,
    ):
        row = tl.program_id(0).to(tl.int64)
        chunk = tl.program_id(1)
        base = row * length
        start = chunk * size
        stop = tl.minimum(start + size, length)
        k = tl.arange(0, TILE_SIZE)
        is_last = k == TILE_SIZE - 1
        zero = tl.sum(tl.zeros([TILE_SIZE], dtype=tl.float32), axis=0)
        slope = zero + 1.0  # A: the chunk's map so far, y_left = A y_carried + B + E gamma V_ext
        offset = zero  # B
        weight = zero  # E
        carried_value = zero  # V_next inside the chunk (0 stands for V_ext, which E weighs)
        seen = zero  # a model token lies right of this tile in the chunk
        first_value = zero  # V at the chunk's first model token
        tile = 0
        while tile < tiles:  # a while loop: Triton's interpreter cannot range over a kernel argument
            t = stop - 1 - tile * TILE_SIZE - k
            tile += 1
            model, value, has, delta, carried_value = _tile_delta(
                rewards_ptr, values_ptr, mask_ptr, base, t, is_last, start, stop, carried_value, gamma, HAS_VALUES)
            a = tl.where(model, c, 1.0)
            b = tl.where(model, delta, 0.0)
            e = tl.where(model & (has == 0), 1.0 - seen, 0.0)  # 1 at the chunk's last model token
            a, b, e = tl.associative_scan((a, b, e), 0, _affine2)
            tile_slope = _last(a, is_last)
            offset = tile_slope * offset + _last(b, is_last)
            weight = tile_slope * weight + _last(e, is_last)
            slope = tile_slope * slope
            first = tl.min(tl.where(model, t, length), axis=0)  # model is False outside
            first_value = tl.where(first < length, tl.sum(tl.where(t == first, value, 0.0), axis=0), first_value)
            seen = tl.where(first < length, 1.0, seen)
        out = summary_ptr + row * chunks + chunk
        plane = chunks * tl.num_programs(0)
        tl.store(out, slope)
        tl.store(out + plane, offset)
        tl.store(out + 2 * plane, weight)
        tl.store(out + 3 * plane, seen)
        tl.store(out + 4 * plane, first_value)

    @triton.jit  # type: ignore[untyped-decorator]
    def _apply_kernel(  # type: ignore[no-untyped-def]
        rewards_ptr, values_ptr, mask_ptr, summary_ptr, out_ptr, plus_values_ptr, flags_ptr, length, chunks, size,
        tiles, gamma, c, HAS_VALUES: tl.constexpr, TILE_SIZE: tl.constexpr, CHUNKS_BLOCK: tl.constexpr,
    ):
        row = tl.program_id(0).to(tl.int64)
        chunk = tl.program_id(1)
        base = row * length
        plane = chunks * tl.num_programs(0)
        # the chunks right of this one, back to front: compose their maps into y and V carried in
        i = tl.arange(0, CHUNKS_BLOCK)
        j = chunks - 1 - i
        right = j > chunk
        at = summary_ptr + row * chunks + j
        slope = tl.load(at, mask=right, other=1.0)
        offset = tl.load(at + plane, mask=right, other=0.0)
        has_model = tl.load(at + 3 * plane, mask=right, other=0.0)
        nearest = tl.min(tl.where(right & (has_model > 0), j, chunks), axis=0)  # chunks: none
        first_value = tl.sum(tl.where(right & (j == nearest), tl.load(at + 4 * plane, mask=right, other=0.0), 0.0),
                             axis=0)  # V_ext, 0 past the row's last model token
        if HAS_VALUES:
            weight = tl.load(at + 2 * plane, mask=right, other=0.0)
            after = right & (j + 1 < chunks)  # V_ext of chunk j: the first model token right of it
            has_after = tl.load(at + 1 + 3 * plane, mask=after, other=0.0)
            value_after = tl.load(at + 1 + 4 * plane, mask=after, other=0.0)
            has_ext, value_ext = tl.associative_scan((has_after, value_after), 0, _latest)
            offset += weight * gamma * tl.where(has_ext > 0, value_ext, 0.0)
        slope, offset = tl.associative_scan((slope, offset), 0, _affine)
        carried = _last(offset, i == CHUNKS_BLOCK - 1)
        carried_value = first_value
        # the chunk itself, with what is carried in
        start = chunk * size
        stop = tl.minimum(start + size, length)
        k = tl.arange(0, TILE_SIZE)
        is_last = k == TILE_SIZE - 1
        total = tl.sum(tl.zeros([TILE_SIZE], dtype=tl.float32), axis=0)
        models = tl.sum(tl.zeros([TILE_SIZE], dtype=tl.int32), axis=0)
        tile = 0
        while tile < tiles:  # a while loop: Triton's interpreter cannot range over a kernel argument
            t = stop - 1 - tile * TILE_SIZE - k
            tile += 1
            inside = t >= start
            model, value, has, delta, carried_value = _tile_delta(
                rewards_ptr, values_ptr, mask_ptr, base, t, is_last, start, stop, carried_value, gamma, HAS_VALUES)
            a = tl.where(model, c, 1.0)
            b = tl.where(model, delta, 0.0)
            a, b = tl.associative_scan((a, b), 0, _affine)
            y = a * carried + b  # A_t = delta_t + c A_next, observation tokens carry
            tl.store(out_ptr + base + t, y, mask=inside)
            if HAS_VALUES:
                tl.store(plus_values_ptr + base + t, y + value, mask=inside)  # R_t = A_t + V_t
            total += tl.sum(tl.where(model & inside, y, 0.0), axis=0)
            models += tl.sum(model.to(tl.int32), axis=0)
            carried = _last(y, is_last)
        # flags: rows without a model token (counted by their first chunk), and the sum of the advantages
        empty_row = (chunk == 0) & (models == 0) & (nearest == chunks)
        tl.atomic_add(flags_ptr, tl.where(empty_row, 1.0, 0.0))
        tl.atomic_add(flags_ptr + 1, total)


def supports(x: torch.Tensor) -> bool:
    """Whether the Triton kernel can take ``x``: float32 on a CUDA device, Triton installed."""
    return AVAILABLE and x.is_cuda and x.dtype == torch.float32


def layout(rows: int, length: int, processors: int, chunk: int | None = None) -> tuple[int, int]:
    """(tokens a program owns, chunks a row) for a (rows, length) batch on ``processors`` SMs.

    When the rows alone fill the GPU (at least one a multiprocessor) each program owns a row and
    the summary pass is skipped; otherwise rows are cut into chunks of ``chunk`` tokens
    (:data:`CHUNK` by default), doubled until a row has at most :data:`MAX_CHUNKS` of them.
    """
    if chunk is None:
        if rows >= processors:
            return length, 1
        chunk = CHUNK
    while chunk * MAX_CHUNKS < length:
        chunk *= 2
    return chunk, -(-length // chunk)


@functools.lru_cache(maxsize=16)  # one entry a CUDA device
def _processors(device: torch.device) -> int:
    return int(torch.cuda.get_device_properties(device).multi_processor_count)


def masked_scan(
    x: torch.Tensor, values: torch.Tensor | None, mask: torch.Tensor, gamma: float, c: float,
    *, chunk: int | None = None, tile: int | None = None, warps: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None, bool, bool]:
    """The masked reverse scan on CUDA: (y, y + values or None, empty row?, non-finite?).

    ``x``, ``values`` (B, T) float32 CUDA tensors, ``mask`` (B, T) bool on the same device.
    ``chunk`` (a power of two; at least ``T`` for a program a row), ``tile`` (a power of two,
    at most ``chunk``) and ``warps`` override the layout :func:`layout` and the tuned constants
    choose.
    """
    rows, length = x.shape
    x = x.contiguous()
    mask_bytes = mask.contiguous().view(torch.uint8)
    out = torch.empty_like(x)
    plus_values = torch.empty_like(x) if values is not None else None
    if not rows or not length:
        return out, plus_values, bool(rows), False
    values_arg = values.contiguous() if values is not None else x
    processors = _processors(x.device) if x.is_cuda else 1  # 1 on CPU: Triton's interpreter
    size, chunks = layout(rows, length, processors, chunk)
    per_row = chunks == 1
    tile = tile or (ROW_TILE if per_row else TILE)
    shape = dict(HAS_VALUES=values is not None, TILE_SIZE=tile, num_warps=warps or (ROW_WARPS if per_row else WARPS))
    tiles = -(-min(size, length) // tile)
    flags = torch.zeros(2, dtype=torch.float32, device=x.device)
    summary = out  # read by the second kernel only for the chunks right of a program's own: none a row
    if not per_row:
        summary = torch.empty((5, rows, chunks), dtype=torch.float32, device=x.device)
        _summary_kernel[(rows, chunks)](x, values_arg, mask_bytes, summary, length, chunks, size, tiles,
                                        float(gamma), float(c), **shape)
    _apply_kernel[(rows, chunks)](
        x, values_arg, mask_bytes, summary, out, plus_values if plus_values is not None else out, flags, length,
        chunks, size, tiles, float(gamma), float(c), CHUNKS_BLOCK=max(2, triton.next_power_of_2(chunks)), **shape,
    )
    empty_rows, total = flags.tolist()  # the one wait for the device
    return out, plus_values, empty_rows > 0, not math.isfinite(total)
