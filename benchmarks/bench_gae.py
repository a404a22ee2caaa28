"""Benchmark: the fast GAE against verl's reverse loop and the NumPy/SciPy route, in one run.

    python benchmarks/bench_gae.py            # B = 64, T = 32,768 / 65,536 / 131,072
    python benchmarks/bench_gae.py --quick    # B = 64, T = 8,192 / 16,384

Every figure is measured twice, once as the machine is and once under a background load this
script starts itself (one spinning process per CPU, :mod:`_load`), and both are printed. Per
size and condition:

- **loop s**: verl's ``compute_gae_advantage_return`` loop over time, written as verl writes it
  (without the whitening), on every row (best of two at the first size, one run at the others);
- **lfilter ms**: the plain NumPy/SciPy route: compact each row's model tokens, TD errors on the
  compact rows, ``scipy.signal.lfilter`` backwards, gather back (best of three);
- **fast ms / median**: best and median of ``--repeats`` calls of ``trajlens.estimators.gae``
  after a warm-up;
- **clone / cumsum ns**: ``rewards.clone()`` and ``torch.cumsum(rewards, 1)`` of the same
  (B, T) float32 tensor, the memory and scan floors, timed in turn with the fast calls (fast,
  clone, cumsum, fast, ...; best of ``--repeats`` each, so load hits all three alike) and on as
  many intra-op threads as the fast GAE would use at that moment (**threads**: the counts seen;
  the fast GAE uses one thread per idle CPU, see ``trajlens.estimators._scan``);
- ratios of best times, ``max|diff|`` (fast against the float32 loop), ns per token.

Targets (exit status 1 when one fails, in either condition): at the first size the fast GAE is
at least 300x the loop and at least 2x faster than the lfilter route (wall clock), and within 5x
of the cumsum floor in CPU time (the best CPU time of the same interleaved calls: on a machine
with more runnable tasks than cores, the best wall time of a 4 ms call measures how often the
scheduler lets a call finish in one time slice, which favours the shorter floor; the wall-clock
ratios are printed beside it); at every size ``max|fast - loop| <= 1e-5``; one call's peak extra
memory (a fresh process, quiet) is at most 4x the bytes of its inputs. The ratio to ``clone`` is
printed, not a target.

Data: about 30% observation tokens in spans (turns of model tokens, then tool output), critic
values ~ N(0, 0.25), a +-1 outcome reward on the last model token and a small per-token
penalty, gamma = 1.0 and lambda = 0.95.

Memory: each size runs in a fresh Python process that warms up on a tiny batch, builds its
inputs, returns freed heap pages to the OS (``malloc_trim``), resets the peak-RSS counter
(``/proc/self/clear_refs``), runs the fast GAE once and reads ``VmHWM``; extra = peak RSS - RSS
with the inputs resident. It includes the two outputs (8 bytes a token), every temporary and
allocator slack. On CUDA it uses ``torch.cuda.max_memory_allocated``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _load import condition  # noqa: E402
from _memory import release_free_memory, status_bytes  # noqa: E402
from _verdict import report_targets  # noqa: E402

from trajlens.estimators import _scan, gae  # noqa: E402
from trajlens.estimators.reference.verl import gae_loop  # noqa: E402

GAMMA, LAM = 1.0, 0.95
OBSERVED_SHARE = 0.30
MODEL_SPAN, TOOL_SPAN = 700, 300  # mean tokens per turn and per tool output
LOOP_SPEEDUP = 300.0
LFILTER_SPEEDUP = 2.0
FLOOR_FACTOR = 5.0
PARITY = 1e-5
MEMORY_FACTOR = 4.0


def make_batch(batch: int, length: int, seed: int = 0, device: str = "cpu"):
    """Rewards, values (float32) and a response mask with ~30% observation tokens in spans."""
    generator = torch.Generator().manual_seed(seed)
    mask = torch.zeros(batch, length, dtype=torch.bool)
    for row in range(batch):
        t = 0
        while t < length:  # data generation only: alternating spans
            span = int(torch.randint(MODEL_SPAN // 2, MODEL_SPAN * 3 // 2, (1,), generator=generator))
            mask[row, t : t + span] = True
            t += span + int(torch.randint(TOOL_SPAN // 2, TOOL_SPAN * 3 // 2, (1,), generator=generator))
    values = 0.5 * torch.randn(batch, length, generator=generator)
    rewards = -1e-3 * torch.rand(batch, length, generator=generator)
    last = length - 1 - mask.flip(1).int().argmax(dim=1)
    rewards[torch.arange(batch), last] = torch.randint(0, 2, (batch,), generator=generator).float() * 2 - 1
    return rewards.to(device), values.to(device), mask.to(device)


def gae_lfilter(rewards: np.ndarray, values: np.ndarray, mask: np.ndarray, gamma: float, lam: float) -> np.ndarray:
    """The plain NumPy/SciPy route: compact model tokens, TD errors, ``lfilter`` backwards, gather."""
    from scipy.signal import lfilter

    before = np.cumsum(mask, axis=1) - mask  # model tokens in [0, t): compact slot / next slot
    width = int(before[:, -1].max()) + 2  # V past the last model token is 0
    rows, columns = np.nonzero(mask)
    slots = before[rows, columns]
    compact_rewards = np.zeros((mask.shape[0], width), dtype=rewards.dtype)
    compact_values = np.zeros_like(compact_rewards)
    compact_rewards[rows, slots] = rewards[rows, columns]
    compact_values[rows, slots] = values[rows, columns]
    delta = compact_rewards - compact_values
    delta[:, :-1] += gamma * compact_values[:, 1:]
    one = np.ones(1, dtype=rewards.dtype)
    feedback = np.array([1.0, -gamma * lam], dtype=rewards.dtype)
    scanned = lfilter(one, feedback, delta[:, ::-1], axis=1)[:, ::-1]  # A_k = delta_k + c A_{k+1}
    return np.take_along_axis(scanned, before, axis=1)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _times(call, repeats: int, device: str, warm_up: bool = True) -> list[float]:
    if warm_up:
        call()
    times = []
    for _ in range(repeats):
        _sync(device)
        start = time.perf_counter()
        call()
        _sync(device)
        times.append(time.perf_counter() - start)
    return sorted(times)


def _interleaved(calls: dict, repeats: int, device: str, threads) -> tuple[dict, dict]:
    """Wall and CPU times of each call, taken in turn ``repeats`` times (so load hits them alike), sorted.

    ``threads()`` gives the intra-op threads for the floor calls at that moment: the threads the
    fast GAE would run on if called then, so kernel and floor are timed with the same threading.
    CPU time is the process's (every thread), so it counts the work done, not the time spent
    waiting for a core.
    """
    times: dict[str, list[float]] = {name: [] for name in calls}
    cpu_times: dict[str, list[float]] = {name: [] for name in calls}
    default = torch.get_num_threads()
    for call in calls.values():  # warm-up
        call()
    for _ in range(repeats):
        for name, call in calls.items():
            floor = name != "fast" and device == "cpu"
            if floor:
                torch.set_num_threads(threads())
            _sync(device)
            start, cpu_start = time.perf_counter(), time.process_time()
            call()
            _sync(device)
            times[name].append(time.perf_counter() - start)
            cpu_times[name].append(time.process_time() - cpu_start)
            if floor:
                torch.set_num_threads(default)
    return ({name: sorted(values) for name, values in times.items()},
            {name: sorted(values) for name, values in cpu_times.items()})


class Row(NamedTuple):
    length: int
    loop: float
    lfilter: float
    fast: float
    median: float
    clone: float
    cumsum: float
    diff: float
    threads: str
    fast_cpu: float
    clone_cpu: float
    cumsum_cpu: float


def measure(batch: int, length: int, device: str, repeats: int, loop_repeats: int) -> Row:
    rewards, values, mask = make_batch(batch, length, device=device)
    chunks = len(_scan.rectangular_spans(batch, length))
    used: set[int] = set()

    def threads() -> int:
        count = _scan.cpu_workers(chunks)
        used.add(count)
        return count

    times, cpu_times = _interleaved(
        {"fast": lambda: gae(rewards, values, mask, GAMMA, LAM), "clone": lambda: rewards.clone(),
         "cumsum": lambda: torch.cumsum(rewards, 1)},
        repeats, device, threads,
    )
    fast = gae(rewards, values, mask, GAMMA, LAM).advantages
    loop_times = _times(lambda: gae_loop(rewards, values, mask, GAMMA, LAM), loop_repeats, device, warm_up=False)
    slow = gae_loop(rewards, values, mask, GAMMA, LAM).advantages if length * batch <= 1 << 20 else None
    diff = float((fast - slow).abs().max()) if slow is not None else _diff_by_rows(rewards, values, mask, fast)
    if device == "cpu":
        arrays = rewards.numpy(), values.numpy(), mask.numpy()
        lfilter_best = min(_times(lambda: gae_lfilter(*arrays, GAMMA, LAM), 3, device))
    else:
        lfilter_best = float("nan")
    fast_times = times["fast"]
    return Row(length, loop_times[0], lfilter_best, fast_times[0], fast_times[len(fast_times) // 2],
               times["clone"][0], times["cumsum"][0], diff, "/".join(str(n) for n in sorted(used)),
               cpu_times["fast"][0], cpu_times["clone"][0], cpu_times["cumsum"][0])


def _diff_by_rows(rewards, values, mask, fast) -> float:
    """Largest |fast - loop| computed on a few rows (the loop's cost per step hardly depends on B)."""
    rows = slice(0, 8)
    slow = gae_loop(rewards[rows], values[rows], mask[rows], GAMMA, LAM).advantages
    return float((fast[rows] - slow).abs().max())


def accuracy(batch: int, length: int, device: str) -> None:
    """How far each float32 result is from a float64 computation, at lambda 0.95 and 1."""
    rewards, values, mask = make_batch(batch, length, device=device)
    print(f"\naccuracy at {batch} x {length}, gamma {GAMMA}: largest |difference| of the advantages")
    print(f"{'lambda':>7} {'fast32 - loop32':>16} {'loop32 - exact':>15} {'fast32 - exact':>15} {'max |A|':>8}")
    for lam in (LAM, 1.0):
        fast = gae(rewards, values, mask, GAMMA, lam).advantages.double()
        loop = gae_loop(rewards, values, mask, GAMMA, lam).advantages.double()
        exact = gae_loop(rewards.double(), values.double(), mask, GAMMA, lam).advantages
        print(
            f"{lam:>7} {float((fast - loop).abs().max()):>16.2e} {float((loop - exact).abs().max()):>15.2e} "
            f"{float((fast - exact).abs().max()):>15.2e} {float(exact.abs().max()):>8.2f}"
        )
    print("exact = the loop in float64. At lambda = 1 nothing decays: float32 rounding accumulates over")
    print("the model tokens of a row in the float32 loop; the compiled kernel accumulates in float64.")


def measure_memory(batch: int, length: int, device: str) -> dict:
    """Peak extra bytes of one fast GAE call over its resident inputs (run in this process)."""
    tiny = make_batch(2, 256, device=device)
    gae(*tiny, GAMMA, LAM)  # one-time library initialisation is not the kernel's memory
    del tiny
    rewards, values, mask = make_batch(batch, length, device=device)
    input_bytes = sum(x.numel() * x.element_size() for x in (rewards, values, mask))
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        gae(rewards, values, mask, GAMMA, LAM)
        torch.cuda.synchronize()
        extra = torch.cuda.max_memory_allocated() - before
        method = "torch.cuda.max_memory_allocated"
    else:
        release_free_memory()  # freed temporaries of make_batch must not count as resident inputs
        Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
        before = status_bytes("VmRSS")
        gae(rewards, values, mask, GAMMA, LAM)
        extra = status_bytes("VmHWM") - before
        method = "VmHWM - VmRSS, fresh process"
    return {"input_bytes": input_bytes, "extra_bytes": extra, "method": method}


def memory_in_fresh_process(batch: int, length: int, device: str) -> dict:
    code = (
        "import json, sys; sys.path.insert(0, %r); sys.path.insert(0, %r); import bench_gae as b; "
        "print(json.dumps(b.measure_memory(%d, %d, %r)))" % (str(ROOT), str(Path(__file__).parent), batch, length, device)
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def print_table(label: str, batch: int, rows: list[Row]) -> None:
    tokens = lambda r: batch * r.length  # noqa: E731
    print(f"\n{label}")
    header = (f"{'B x T':>14} {'loop s':>7} {'lfilter ms':>10} {'fast ms':>8} {'median':>7} {'x loop':>7} "
              f"{'x lfilter':>9} {'max|diff|':>9} {'ns/token':>8} {'clone ns':>8} {'cumsum ns':>9} {'/clone':>7} "
              f"{'/cumsum':>7} {'threads':>7}")
    print(header)
    print("-" * len(header))
    for r in rows:
        ns = lambda seconds: seconds / tokens(r) * 1e9  # noqa: E731
        print(
            f"{batch:>5} x {r.length:<7} {r.loop:>7.2f} {r.lfilter * 1e3:>10.1f} {r.fast * 1e3:>8.1f} "
            f"{r.median * 1e3:>7.1f} {r.loop / r.fast:>6.0f}x {r.lfilter / r.fast:>8.1f}x {r.diff:>9.2e} "
            f"{ns(r.fast):>8.2f} {ns(r.clone):>8.2f} {ns(r.cumsum):>9.2f} {r.fast / r.clone:>6.1f}x "
            f"{r.fast / r.cumsum:>6.1f}x {r.threads:>7}"
        )
    print("CPU time (the process's, best of the same calls): ns per token and ratios to the floors")
    for r in rows:
        ns = lambda seconds: seconds / tokens(r) * 1e9  # noqa: E731
        print(f"{batch:>5} x {r.length:<7} fast {ns(r.fast_cpu):.2f}, clone {ns(r.clone_cpu):.2f}, "
              f"cumsum {ns(r.cumsum_cpu):.2f}: {r.fast_cpu / r.clone_cpu:.1f}x clone, "
              f"{r.fast_cpu / r.cumsum_cpu:.1f}x cumsum")
    first, last = rows[0], rows[-1]
    growth = (last.fast / first.fast) / (last.length / first.length)
    print(f"linear growth: time x{last.fast / first.fast:.2f} for tokens x{last.length / first.length:.0f} "
          f"({growth:.2f} of linear)")


def checks(label: str, batch: int, rows: list[Row], device: str) -> list[tuple[str, bool]]:
    head = rows[0]
    size = f"{batch} x {head.length}"
    result = [
        (f"{label}: fast >= {LOOP_SPEEDUP:.0f}x verl's loop at {size}", head.loop / head.fast >= LOOP_SPEEDUP),
        (f"{label}: max |fast - loop| <= {PARITY:g} (float32), every size", all(r.diff <= PARITY for r in rows)),
    ]
    if device == "cpu":
        result += [
            (f"{label}: fast >= {LFILTER_SPEEDUP:.0f}x the compact + lfilter + gather route at {size}",
             head.lfilter / head.fast >= LFILTER_SPEEDUP),
            (f"{label}: fast within {FLOOR_FACTOR:.0f}x of the cumsum floor at {size} (CPU time)",
             head.fast_cpu <= FLOOR_FACTOR * head.cumsum_cpu),
        ]
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes (B = 64, T = 8,192 and 16,384)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (torch's default if omitted)")
    parser.add_argument("--repeats", type=int, default=40,
                        help="fast, clone and cumsum runs per size, taken in turn; the best of each is kept")
    parser.add_argument("--loop-repeats", type=int, default=2, help="loop runs at the first size (1 at the others)")
    parser.add_argument("--no-load", action="store_true", help="skip the run under added load")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    batch, lengths = (64, [8192, 16384]) if args.quick else (64, [32768, 65536, 131072])
    kernel = "compiled row loop (numba)" if _scan.use_compiled(torch.zeros(1, 1)) else "blocked torch scan"
    print(f"torch {torch.__version__}, device {args.device}, {torch.get_num_threads()} CPU threads, "
          f"kernel: {kernel if args.device == 'cpu' else 'torch on ' + args.device}, "
          f"{_scan.worker_count()} worker threads")
    print(f"gamma {GAMMA}, lambda {LAM}, ~{OBSERVED_SHARE:.0%} observation tokens, float32")
    results = []
    for loaded in ([False] if args.no_load else [False, True]):
        with condition(loaded) as label:
            rows = [measure(batch, length, args.device, args.repeats, args.loop_repeats if i == 0 else 1)
                    for i, length in enumerate(lengths)]
        print_table(label, batch, rows)
        results += checks(label, batch, rows, args.device)
    memories = [memory_in_fresh_process(batch, length, args.device) for length in lengths]
    ratios = [m["extra_bytes"] / m["input_bytes"] for m in memories]
    print(f"\npeak extra memory / inputs ({memories[0]['method']}): "
          + ", ".join(f"{batch} x {length}: {ratio:.2f}x" for length, ratio in zip(lengths, ratios)))
    print("inputs = rewards + values (float32) + mask (bool), 9 bytes a token; the extra includes the")
    print("advantages and returns the call returns (8 bytes a token).")
    results.append((f"peak extra memory <= {MEMORY_FACTOR:.0f}x the inputs, every size",
                    all(r <= MEMORY_FACTOR for r in ratios)))
    accuracy(batch, lengths[0], args.device)
    print()
    return report_targets(results)


if __name__ == "__main__":
    sys.exit(main())
