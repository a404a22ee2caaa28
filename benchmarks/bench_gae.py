"""Benchmark: the fast GAE against verl's reverse loop over time, in one run.

    python benchmarks/bench_gae.py            # B = 64, T = 32,768 / 65,536 / 131,072
    python benchmarks/bench_gae.py --quick    # B = 16, T = 8,192 / 16,384 (seconds)

For each size it prints: the loop reference's time (verl's ``compute_gae_advantage_return``
loop, written as verl writes it, without the whitening), the fast kernel's time (best and
median of 15 runs after one warm-up), the ratio of the best times, the largest absolute difference of the float32
advantages, and the peak extra memory of one fast call over the bytes of its inputs.

Data: about 30% observation tokens in spans (turns of model tokens, then tool output),
critic values ~ N(0, 0.25), a +-1 outcome reward on the last model token and a small per-token
penalty, gamma = 1.0 and lambda = 0.95. The loop runs on every row (best of two at the first
size, one run at the others; it costs one interpreter round trip per token, so its time
hardly depends on B). Timings are wall-clock on whatever else the machine is running; the
best of several runs is the usual guard against that. On a machine whose cores are busy with
other processes, torch's multi-threaded kernels can stall at every parallel region (a thread
waits for a descheduled sibling) while the loop's tiny single-threaded ops do not; if the
median is far above the best, rerun on a quiet machine or with ``--threads 1``.

Memory is measured honestly for CPU tensors: each size runs in a fresh Python process that
warms up on a tiny batch (one-time library initialisation), builds its inputs, returns freed
heap pages to the OS (``malloc_trim``, so the baseline holds the live inputs only), resets the
kernel's peak-RSS counter (``/proc/self/clear_refs``), runs the
fast GAE once, and reads ``VmHWM``; extra = peak RSS - RSS with the inputs resident. It
therefore includes the two output tensors (advantages and returns, 8 bytes a token), every
temporary, and allocator slack. On CUDA it uses ``torch.cuda.max_memory_allocated``.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from trajlens.estimators import gae  # noqa: E402

GAMMA, LAM = 1.0, 0.95
OBSERVED_SHARE = 0.30
MODEL_SPAN, TOOL_SPAN = 700, 300  # mean tokens per turn and per tool output


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


def gae_loop(token_rewards, values, response_mask, gamma, lam):
    """verl compute_gae_advantage_return's loop over time (no whitening)."""
    mask = response_mask.to(values.dtype)
    nextvalues = 0
    lastgaelam = 0
    advantages_reversed = []
    for t in reversed(range(token_rewards.shape[-1])):
        delta = token_rewards[:, t] + gamma * nextvalues - values[:, t]
        lastgaelam_ = delta + gamma * lam * lastgaelam
        nextvalues = values[:, t] * mask[:, t] + (1 - mask[:, t]) * nextvalues
        lastgaelam = lastgaelam_ * mask[:, t] + (1 - mask[:, t]) * lastgaelam
        advantages_reversed.append(lastgaelam)
    return torch.stack(advantages_reversed[::-1], dim=1)


def accuracy(batch: int, length: int, device: str) -> None:
    """How far each float32 result is from a float64 computation, at lambda 0.95 and 1."""
    rewards, values, mask = make_batch(batch, length, device=device)
    print(f"\naccuracy at {batch} x {length}, gamma {GAMMA}: largest |difference| of the advantages")
    print(f"{'lambda':>7} {'fast32 - loop32':>16} {'loop32 - exact':>15} {'fast32 - exact':>15} {'max |A|':>8}")
    for lam in (LAM, 1.0):
        fast = gae(rewards, values, mask, GAMMA, lam).advantages.double()
        loop = gae_loop(rewards, values, mask, GAMMA, lam).double()
        exact = gae_loop(rewards.double(), values.double(), mask, GAMMA, lam)
        print(
            f"{lam:>7} {float((fast - loop).abs().max()):>16.2e} {float((loop - exact).abs().max()):>15.2e} "
            f"{float((fast - exact).abs().max()):>15.2e} {float(exact.abs().max()):>8.2f}"
        )
    print("exact = the loop in float64. At lambda = 1 nothing decays: float32 rounding accumulates over")
    print("the ~23k model tokens of a row, in the loop more than in the blocked scan.")


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_fast(rewards, values, mask, repeats: int, device: str) -> tuple[float, float]:
    """Best and median seconds of ``repeats`` fast calls after one warm-up."""
    gae(rewards, values, mask, GAMMA, LAM)  # warm-up
    times = []
    for _ in range(repeats):
        _sync(device)
        start = time.perf_counter()
        gae(rewards, values, mask, GAMMA, LAM)
        _sync(device)
        times.append(time.perf_counter() - start)
    times.sort()
    return times[0], times[len(times) // 2]


def time_loop(rewards, values, mask, repeats: int, device: str) -> tuple[float, torch.Tensor]:
    """Best seconds of ``repeats`` loop runs, and the loop's advantages."""
    best = float("inf")
    for _ in range(repeats):
        _sync(device)
        start = time.perf_counter()
        slow = gae_loop(rewards, values, mask, GAMMA, LAM)
        _sync(device)
        best = min(best, time.perf_counter() - start)
    return best, slow


def _status(field: str) -> int:
    text = Path("/proc/self/status").read_text()
    return int(re.search(rf"{field}:\s+(\d+)", text).group(1)) * 1024


def _release_free_memory() -> None:
    """Hand freed heap pages back to the OS (glibc ``malloc_trim``), so RSS counts live memory only."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if name:
        try:
            ctypes.CDLL(name).malloc_trim(0)
        except (OSError, AttributeError):
            pass


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
        _release_free_memory()  # freed temporaries of make_batch must not count as resident inputs
        Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
        before = _status("VmRSS")
        gae(rewards, values, mask, GAMMA, LAM)
        extra = _status("VmHWM") - before
        method = "VmHWM - VmRSS, fresh process"
    return {"input_bytes": input_bytes, "extra_bytes": extra, "method": method}


def memory_in_fresh_process(batch: int, length: int, device: str) -> dict:
    code = (
        "import json, sys; sys.path.insert(0, %r); sys.path.insert(0, %r); import bench_gae as b; "
        "print(json.dumps(b.measure_memory(%d, %d, %r)))" % (str(ROOT), str(Path(__file__).parent), batch, length, device)
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (B = 16, T = 8,192 and 16,384)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (torch's default if omitted)")
    parser.add_argument("--repeats", type=int, default=15, help="fast runs per size; the best is kept")
    parser.add_argument("--loop-repeats", type=int, default=2, help="loop runs at the first size (1 at the others)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    batch, lengths = (16, [8192, 16384]) if args.quick else (64, [32768, 65536, 131072])
    print(f"torch {torch.__version__}, device {args.device}, {torch.get_num_threads()} CPU threads")
    print(f"gamma {GAMMA}, lambda {LAM}, ~{OBSERVED_SHARE:.0%} observation tokens, float32\n")
    header = (
        f"{'B x T':>14} {'obs':>5} {'loop s':>7} {'fast ms':>8} {'median':>7} {'ratio':>6} "
        f"{'max|diff|':>9} {'ns/token':>8} {'peak extra/inputs':>17}"
    )
    print(header)
    print("-" * len(header))
    rows = []
    for length in lengths:
        rewards, values, mask = make_batch(batch, length, device=args.device)
        observed = 1.0 - float(mask.float().mean())
        fast_seconds, fast_median = time_fast(rewards, values, mask, args.repeats, args.device)
        fast = gae(rewards, values, mask, GAMMA, LAM).advantages
        loop_repeats = args.loop_repeats if length == lengths[0] else 1
        loop_seconds, slow = time_loop(rewards, values, mask, loop_repeats, args.device)
        diff = float((fast - slow).abs().max())
        del slow, fast, rewards, values
        memory = memory_in_fresh_process(batch, length, args.device)
        ratio = memory["extra_bytes"] / memory["input_bytes"]
        per_token = fast_seconds / (batch * length) * 1e9
        rows.append((length, loop_seconds, fast_seconds, diff, per_token, ratio))
        print(
            f"{batch:>5} x {length:<7} {observed:>5.2f} {loop_seconds:>7.2f} {fast_seconds * 1e3:>8.1f} "
            f"{fast_median * 1e3:>7.1f} {loop_seconds / fast_seconds:>5.0f}x {diff:>9.2e} {per_token:>8.2f} "
            f"{ratio:>16.2f}x"
        )
    print(f"\nmemory: {memory['method']}; inputs = rewards + values (float32) + mask (bool), 9 bytes a token;")
    print("        the extra includes the advantages and returns the call returns (8 bytes a token).")
    first, last = rows[0], rows[-1]
    growth = (last[2] / first[2]) / (last[0] / first[0])
    print(f"linear growth: time x{last[2] / first[2]:.2f} for tokens x{last[0] / first[0]:.0f} "
          f"(ns/token {first[4]:.2f} -> {last[4]:.2f}, {growth:.2f} of linear)")
    head = rows[0]
    checks = [
        (f"speed ratio at {batch} x {head[0]} >= 50x", head[1] / head[2] >= 50),
        ("max |fast - loop| <= 1e-5 (float32), every size", all(r[3] <= 1e-5 for r in rows)),
        ("peak extra memory <= 4x the inputs, every size", all(r[5] <= 4.0 for r in rows)),
    ]
    for label, ok in checks:
        print(f"{'PASS' if ok else 'FAIL'}  {label}")
    accuracy(batch, lengths[0], args.device)


if __name__ == "__main__":
    main()
