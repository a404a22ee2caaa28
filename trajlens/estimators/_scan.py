"""Reverse discounted scans without a Python loop over tokens, and their CPU threading.

Two kernels:

* :func:`reverse_discounted_scan` solves ``y_k = x_k + c * y_{k+1}`` along each row;
* :func:`masked_reverse_scan` solves the same recurrence over the *model* tokens of each row
  (observation tokens skipped and carrying the next model token's value), which is GAE
  (``c = gamma * lambda``, with TD errors built from critic values) and discounted returns
  (``c = gamma``, no values).

The scan cuts a row into blocks of ``BLOCK`` tokens and solves it in three moves:

1. within each block, ``local = x_block @ U.T`` with the upper-triangular Toeplitz matrix
   ``U[i, j] = c^(j - i)`` for ``j >= i`` (one matrix product for the whole batch);
2. the value at the start of each block obeys the same recurrence over blocks, with
   coefficient ``c^BLOCK`` and inputs ``local[:, b, 0]``: solved by the same function,
   recursively (depth log_BLOCK(T); three levels at T = 131,072);
3. each block adds the discounted value carried in from the next block: ``c^(BLOCK - i)``
   times the start value of block b + 1.

Powers of c are computed in float64 and only ever as ``c^k`` with ``0 <= k <= BLOCK``, so
nothing overflows for long sequences (the ``c^-t`` rescaling trick would overflow at t ~ 2,000
for c = 0.95 in float32). Powers below ``sqrt(tiny)`` are flushed to zero: they change no
float32 result that matters and would otherwise put subnormal numbers in the matrix product,
which runs two orders of magnitude slower on CPUs.

On CPU the recurrence runs as a compiled loop over each row when numba is installed
(:mod:`trajlens.estimators._compiled`: one pass, near the memory floor); the blocked torch
scan above is the fallback and the path on other devices.

Threading on CPU. Either kernel is a handful of passes over memory, so torch's intra-op
parallelism buys little and costs a barrier per op: when other processes keep the cores busy,
each parallel op waits for its slowest, descheduled thread, and the whole call slows by an
order of magnitude. Here rows are cut into chunks of about ``CHUNK_TOKENS`` tokens, and a few
worker threads (one per usable CPU, at most torch's thread count) take chunks from a queue, each
running its ops on one intra-op thread (torch's thread count is a per-thread setting; the
compiled loop releases the GIL). The threads meet once, at the end of the call, and a worker the
scheduler holds back simply takes fewer chunks, so a busy machine slows the call in proportion to
the CPU time it leaves us, not by a barrier per op. A batch of one chunk runs in the calling
thread, on one intra-op thread.

How many workers is decided at each call: the CPUs this process may use, less those other
processes keep busy at that moment (the runnable count of ``/proc/loadavg``), at least one. On
a machine whose cores are all taken, a second worker only waits for a core, and waking it and
meeting it at the end costs more than it saves, so the call runs in the calling thread.

On CUDA, float32 batches go to a fused Triton kernel, one program per row
(:mod:`trajlens.estimators._triton`), when Triton is installed; otherwise, or if the kernel
cannot be built (a warning says so, once), the torch kernel runs on the whole batch at once.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple, TypeVar, cast

import numpy as np
import torch
import torch.nn.functional as F

from trajlens.estimators import _compiled

BLOCK = 32
# Tokens per row chunk on CPU: small enough to share a batch among the workers and keep a torch
# chunk's temporaries (about 40 bytes a token) within a few MB, large enough that a torch
# chunk's ~30 op calls stay a small share of its time.
CHUNK_TOKENS = 1 << 18


class MaskedScan(NamedTuple):
    """Result of :func:`masked_reverse_scan`; the flags say which checks the caller must run."""

    scanned: torch.Tensor
    """(B, T) ``y`` of the masked recurrence; at observation tokens the next model token's ``y``."""
    plus_values: torch.Tensor | None
    """(B, T) ``y + values`` when values were given (GAE's returns), else None."""
    empty_row: bool
    """Some row has no model token (results are then undefined)."""
    nonfinite: bool
    """Some TD error (or reward) at a model token is not finite."""


@functools.lru_cache(maxsize=64)
def _toeplitz(c: float, size: int, dtype: torch.dtype, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """``U`` (size, size) with ``U[i, j] = c^(j - i)`` for j >= i, and the powers ``c^0..c^size``.

    Cached: a call builds at most one per recursion level, and they are tiny (64 x 64).
    """
    exponents = torch.arange(size + 1, dtype=torch.float64, device=device)
    powers = torch.pow(torch.tensor(c, dtype=torch.float64, device=device), exponents)
    tiny = torch.finfo(dtype).tiny ** 0.5
    powers = torch.where(powers < tiny, torch.zeros_like(powers), powers).to(dtype)
    i = torch.arange(size, device=device)
    lag = i[None, :] - i[:, None]  # j - i
    upper = torch.where(lag >= 0, powers[lag.clamp(min=0)], torch.zeros((), dtype=dtype, device=device))
    return upper, powers


def reverse_discounted_scan(x: torch.Tensor, c: float, block: int = BLOCK) -> torch.Tensor:
    """Solve ``y_k = x_k + c * y_{k+1}`` (``y_n = 0``) along the last dimension of ``x`` (R, n).

    Returns a new (R, n) tensor. ``c`` is a Python float in [0, 1].
    """
    rows, n = x.shape
    if c == 0.0:
        return x.clone()
    upper, powers = _toeplitz(float(c), min(n, block), x.dtype, x.device)
    if n <= block:
        return x @ upper.T  # y_i = sum_{j >= i} c^(j-i) x_j
    num_blocks = -(-n // block)
    pad = num_blocks * block - n
    blocks = (F.pad(x, (0, pad)) if pad else x).reshape(rows, num_blocks, block)
    local = blocks @ upper.T  # (R, nb, block): the scan inside each block, nothing carried in
    starts = reverse_discounted_scan(local[:, :, 0].contiguous(), float(c**block), block)
    carried = F.pad(starts[:, 1:], (0, 1))  # y at the start of the next block (0 after the last)
    decay = powers[1:].flip(0)  # c^(block - i), i = 0..block-1
    local.addcmul_(carried[:, :, None], decay)  # y_i = local_i + c^(block - i) * y_(next block start)
    out = local.view(rows, num_blocks * block)
    return out[:, :n] if pad else out


def masked_reverse_scan(
    x: torch.Tensor, values: torch.Tensor | None, response_mask: torch.Tensor, gamma: float, c: float
) -> MaskedScan:
    """Solve the recurrence over model tokens only, chunk of rows by chunk.

    With ``values`` (GAE): ``y_k = delta_k + c * y_next`` with ``delta_k = x_k + gamma * V_next
    - V_k``, ``next`` the next model token of the row (``V = 0`` past the last one). Without:
    ``y_k = x_k + c * y_next``. Entries of ``x`` and ``values`` at observation tokens are
    ignored. ``x``, ``values`` (B, T) float of one dtype, ``response_mask`` (B, T) bool.

    On CPU the compiled row loop of :mod:`._compiled` runs when numba is installed; on CUDA the
    fused Triton scan of :mod:`._triton` for float32 when Triton is installed; otherwise the
    torch kernel (:func:`_masked_chunk`). ``TRAJLENS_SCAN_KERNEL=torch`` forces the torch kernel.
    """
    rows_total, length = x.shape
    if x.is_cuda and _cuda_kernel(x):
        from trajlens.estimators import _triton

        try:
            return MaskedScan(*_triton.masked_scan(x, values, response_mask, gamma, c))
        except Exception as error:  # a Triton that cannot build the kernel: say so once, use torch
            _TRITON_FAILED.append(repr(error))
            warnings.warn(f"trajlens: the Triton scan failed ({error!r}); using the torch scan", RuntimeWarning,
                          stacklevel=3)
    if x.device.type != "cpu":
        scanned = torch.empty_like(x)
        plus_values = torch.empty_like(x) if values is not None else None
        flags: Sequence[Any] = _masked_chunk(x, values, response_mask, gamma, c, scanned, plus_values)
        return MaskedScan(scanned, plus_values, *flags)
    spans = rectangular_spans(rows_total, length)
    if use_compiled(x):
        return _compiled_scan(x, values, response_mask, gamma, c, spans)
    scanned = torch.empty_like(x)
    plus_values = torch.empty_like(x) if values is not None else None

    def work(span: tuple[int, int]) -> tuple[bool, bool]:
        start, stop = span
        return _masked_chunk(
            x[start:stop], None if values is None else values[start:stop], response_mask[start:stop], gamma, c,
            scanned[start:stop], None if plus_values is None else plus_values[start:stop],
        )

    flags = _run_single_threaded(work, spans)
    return MaskedScan(scanned, plus_values, any(f[0] for f in flags), any(f[1] for f in flags))


_TRITON_FAILED: list[str] = []


def _cuda_kernel(x: torch.Tensor) -> bool:
    """Whether the fused Triton scan (:mod:`._triton`) runs for the CUDA tensor ``x``."""
    if _TRITON_FAILED or os.environ.get("TRAJLENS_SCAN_KERNEL", "") == "torch" or x.dtype != torch.float32:
        return False
    from trajlens.estimators import _triton

    return _triton.supports(x)


def use_compiled(x: torch.Tensor) -> bool:
    """Whether :func:`masked_reverse_scan` runs the compiled CPU loop for ``x``."""
    return (
        _compiled.AVAILABLE
        and x.device.type == "cpu"
        and x.dtype in (torch.float32, torch.float64)
        and os.environ.get("TRAJLENS_SCAN_KERNEL", "") != "torch"
    )


def _compiled_scan(
    x: torch.Tensor, values: torch.Tensor | None, mask: torch.Tensor, gamma: float, c: float,
    spans: list[tuple[int, int]],
) -> MaskedScan:
    rows, length = x.shape
    offsets = np.arange(rows + 1, dtype=np.int64) * length
    flat = flat_masked_scan(
        x.contiguous().numpy().reshape(-1),
        None if values is None else values.contiguous().numpy().reshape(-1),
        mask.contiguous().numpy().reshape(-1), offsets, gamma, c, spans,
    )
    return MaskedScan(
        torch.from_numpy(flat.scanned.reshape(rows, length)),
        None if flat.plus_values is None else torch.from_numpy(flat.plus_values.reshape(rows, length)),
        flat.empty_row, flat.nonfinite,
    )


class FlatScan(NamedTuple):
    """:class:`MaskedScan` over flat arrays with row offsets (NumPy)."""

    scanned: np.ndarray
    plus_values: np.ndarray | None
    empty_row: bool
    nonfinite: bool


def flat_masked_scan(
    x: np.ndarray, values: np.ndarray | None, mask: np.ndarray, offsets: np.ndarray, gamma: float, c: float,
    spans: list[tuple[int, int]] | None = None,
) -> FlatScan:
    """:func:`masked_reverse_scan` on flat (N,) arrays whose rows are ``offsets[i]:offsets[i + 1]``.

    Needs numba (:data:`._compiled.AVAILABLE`). ``spans`` (row ranges) default to chunks of
    about ``CHUNK_TOKENS`` tokens; they run on the single-threaded workers.
    """
    if spans is None:
        spans = row_spans(offsets)
    scanned = np.empty_like(x)
    if values is None:
        plus_values = None

        def work(span: tuple[int, int]) -> tuple[bool, bool]:
            return _compiled.masked_returns_rows(x, mask, offsets[span[0] : span[1] + 1], float(c), scanned)
    else:
        plus_values = np.empty_like(x)

        def work(span: tuple[int, int]) -> tuple[bool, bool]:
            return _compiled.masked_gae_rows(x, values, mask, offsets[span[0] : span[1] + 1], float(gamma), float(c),
                                             scanned, plus_values)

    flags = _run_single_threaded(work, spans)
    return FlatScan(scanned, plus_values, any(f[0] for f in flags), any(f[1] for f in flags))


def rectangular_spans(rows: int, length: int) -> list[tuple[int, int]]:
    """Row ranges of about ``CHUNK_TOKENS`` tokens each for a (rows, length) batch (at least one row each)."""
    rows_per_chunk = max(1, CHUNK_TOKENS // max(length, 1))
    return [(start, min(start + rows_per_chunk, rows)) for start in range(0, rows, rows_per_chunk)]


def row_spans(offsets: np.ndarray, tokens: int = CHUNK_TOKENS) -> list[tuple[int, int]]:
    """Consecutive row ranges of about ``tokens`` tokens each (at least one row each)."""
    rows = offsets.shape[0] - 1
    cuts = np.searchsorted(offsets, np.arange(tokens, int(offsets[-1]), tokens), side="left")
    bounds = np.unique(np.concatenate([[0], np.clip(cuts, 1, max(rows, 1)), [rows]]))
    return [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:]) if b > a] or [(0, rows)]


def _masked_chunk(
    x: torch.Tensor,
    values: torch.Tensor | None,
    mask: torch.Tensor,
    gamma: float,
    c: float,
    out: torch.Tensor,
    out_plus_values: torch.Tensor | None,
) -> tuple[bool, bool]:
    """One chunk of :func:`masked_reverse_scan`, written into ``out``; returns its two flags."""
    before = torch.cumsum(F.pad(mask[:, :-1], (1, 0)), dim=1, dtype=torch.int64)  # model tokens in [0, t)
    counts = before[:, -1] + mask[:, -1]
    if not bool((counts > 0).all()):
        return True, False
    # compact width: V past the last model token is 0, one dump column, whole scan blocks
    width = -(-(int(counts.max()) + 2) // BLOCK) * BLOCK
    slot = torch.where(mask, before, width - 1)
    delta = _compact(x, slot, width)
    if values is not None:
        compact_values = _compact(values, slot, width)
        delta[:, :-1].add_(compact_values[:, 1:], alpha=gamma)  # delta_k = x_k + gamma * V_{k+1} - V_k
        delta.sub_(compact_values)
        del compact_values
    del slot
    if not bool(torch.isfinite(delta.sum())):  # one cheap pass; the caller finds the culprit
        return False, True
    compact = reverse_discounted_scan(delta, c)  # y_k = delta_k + c * y_{k+1}
    del delta
    torch.gather(compact, 1, before, out=out)
    if out_plus_values is not None:
        torch.add(out, cast(torch.Tensor, values), out=out_plus_values)  # R_t = A_t + V_t
    return False, False


def _compact(x: torch.Tensor, slot: torch.Tensor, width: int) -> torch.Tensor:
    """Rows of ``x`` with model tokens moved left in order, zero-padded to ``width``."""
    out = torch.zeros(x.shape[0], width, dtype=x.dtype, device=x.device)
    out.scatter_(1, slot, x)
    out[:, -1] = 0  # the dump column collected the observation tokens
    return out


_POOL: ThreadPoolExecutor | None = None
_S = TypeVar("_S")
_R = TypeVar("_R")
_POOL_LOCK = threading.Lock()
_WORKER = threading.local()


def _single_thread_worker() -> None:
    torch.set_num_threads(1)  # a per-thread setting: this worker's ops run on it alone
    _WORKER.ready = True


def usable_cpus() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def worker_count() -> int:
    """Most worker threads for CPU chunks: the CPUs this process may use, capped by torch's thread count."""
    return max(1, min(usable_cpus(), torch.get_num_threads()))


def idle_cpus(loadavg: Path = Path("/proc/loadavg")) -> int:
    """CPUs no other task is running or waiting for right now (at least 1).

    From the runnable count in ``/proc/loadavg`` (the fourth field, ``runnable/total``), which
    counts the calling thread itself; without that file (not Linux), every usable CPU.
    """
    try:
        runnable = int(loadavg.read_text().split()[3].split("/")[0])
    except (OSError, IndexError, ValueError):
        return usable_cpus()
    return max(1, usable_cpus() - max(0, runnable - 1))


def cpu_workers(chunks: int) -> int:
    """Threads a CPU call of ``chunks`` row chunks runs on if made now (1: the calling thread alone)."""
    workers = min(worker_count(), chunks)
    return min(workers, idle_cpus()) if workers > 1 else 1


def _pool() -> ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=os.cpu_count() or 1, thread_name_prefix="trajlens-scan",
                                       initializer=_single_thread_worker)
        return _POOL


def _run_single_threaded(work: Callable[[_S], _R], spans: list[_S]) -> list[_R]:
    """``[work(s) for s in spans]`` on single-threaded workers, each span its own task.

    Spans are taken from a queue, so a worker the scheduler holds back takes fewer of them; the
    threads meet only once, at the end. A single span, or a call from inside a worker, runs here.
    """
    workers = 1 if getattr(_WORKER, "ready", False) else cpu_workers(len(spans))
    if workers == 1:
        with _one_intra_op_thread():
            return [work(s) for s in spans]
    queue = iter(enumerate(spans))
    lock = threading.Lock()
    results: list[Any] = [None] * len(spans)

    def drain() -> None:
        while True:
            with lock:
                item = next(queue, None)
            if item is None:
                return
            results[item[0]] = work(item[1])

    for future in [_pool().submit(drain) for _ in range(workers)]:
        future.result()
    return results


def _one_intra_op_thread() -> contextlib.AbstractContextManager[None]:
    """Run the block's torch ops on one intra-op thread (this thread's setting; restored after)."""
    return _intra_op_threads(1)


def intra_op_threads_for(elements: int) -> contextlib.AbstractContextManager[None]:
    """Run the block's torch ops on one intra-op thread when they handle fewer than two chunks
    of values (``2 * CHUNK_TOKENS``), else on torch's own setting; restored after.

    On small tensors a parallel op gains little and waits at its barrier for every thread,
    which beside a busy process means waiting for a descheduled one. The choice depends on the
    size alone, never on the machine's load: a parallel reduction sums in another order than a
    serial one, and a step's statistics must not change with how busy the machine is.
    """
    return _intra_op_threads(1 if elements < 2 * CHUNK_TOKENS else torch.get_num_threads())


@contextlib.contextmanager
def _intra_op_threads(threads: int) -> Iterator[None]:
    previous = torch.get_num_threads()
    if threads >= previous:
        yield
        return
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
