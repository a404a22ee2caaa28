"""GPU check: the CUDA scan's tests and benchmark in one script, in well under five minutes.

    python benchmarks/gpu_check.py              # tests, then the benchmark
    python benchmarks/gpu_check.py --tests      # tests only
    python benchmarks/gpu_check.py --dry-run    # no GPU needed: the same tests and a small benchmark on CPU
    python benchmarks/gpu_check.py --interpret  # no GPU needed: the Triton kernels' tests in Triton's interpreter

Runs on a machine with torch (CUDA build) and, for the fused kernel, Triton; it needs nothing
else of trajlens's dependencies (no polars, DuckDB or pyarrow): the estimator modules are loaded
without the package ``__init__`` files. Without a CUDA device it says so and exits 0.

Tests (each prints PASS/FAIL): GAE and discounted returns on CUDA against verl's loop in float64
(float32 within 1e-5 at lambda 0.95; float64, which takes the torch path, within 1e-10), at
shapes that cross tile boundaries, with rows ending in observation tokens; a row without model
tokens is refused; the kernel that ran is the fused Triton one when Triton is installed. Then the
Triton kernels called directly at several chunk sizes (down to 16 tokens, so rows of a few
thousand tokens span many chunks), with observation spans across chunk boundaries, whole chunks
without a model token, lambda 0 and 1, and their empty-row and non-finite flags.

Benchmark, float32, gamma 1, lambda 0.95, ~30% observation tokens, B x T from 64 x 8,192 to
256 x 131,072: the fused kernel and the torch path (best of 20 after warm-up, CUDA-synchronised),
ns per token, and a ``clone`` of one input as the memory floor; verl's loop on the same GPU at
64 x 32,768. Targets: the fused kernel (the whole call, flags included) within 5x of the clone
at 64 x 131,072 and above, and parity as above. Exit status 1 when a test or target fails.

``--dry-run`` checks the script itself where there is no GPU (CI does, in
``tests/benchmarks/test_gpu_check.py``): the estimators load the same way, the parity tests run
on CPU tensors (the compiled CPU kernel instead of the fused one, whose check is left out), and
the benchmark table is printed at small sizes, without targets. ``--interpret`` runs the kernel
tests on CPU tensors through ``TRITON_INTERPRET=1`` where Triton is installed (no GPU needed).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import types
from pathlib import Path

import torch
from _verdict import report_targets

ROOT = Path(__file__).resolve().parents[1]
CLONE_FACTOR = 5.0


def load_estimators():
    """``trajlens.estimators.gae`` and ``._scan`` without running the packages' ``__init__``."""
    for name, folder in (("trajlens", ROOT / "trajlens"), ("trajlens.estimators", ROOT / "trajlens" / "estimators")):
        if name not in sys.modules:
            package = types.ModuleType(name)
            package.__path__ = [str(folder)]
            sys.modules[name] = package
    from trajlens.estimators import _scan
    from trajlens.estimators.gae import gae

    return gae, _scan


def make_batch(batch: int, length: int, seed: int = 0, device: str = "cuda"):
    """Rewards, values (float32) and a mask with ~30% observation tokens in spans of ~300."""
    generator = torch.Generator().manual_seed(seed)
    position = torch.arange(length)
    phase = torch.randint(0, 1000, (batch, 1), generator=generator)
    mask = ((position[None, :] + phase) % 1000) < 700
    mask[:, 0] = True
    values = 0.5 * torch.randn(batch, length, generator=generator)
    rewards = -1e-3 * torch.rand(batch, length, generator=generator)
    rewards[:, -1] += torch.randint(0, 2, (batch,), generator=generator).float() * 2 - 1
    return rewards.to(device), values.to(device), mask.to(device)


def run_tests(gae, scan, device: str = "cuda") -> list[tuple[str, bool]]:
    from trajlens.estimators import _triton
    from trajlens.estimators.gae import discounted_returns
    from trajlens.estimators.reference.verl import gae_loop

    results = []
    for batch, length in ((3, 1), (4, 100), (5, 2047), (3, 2049), (2, 10_000)):
        rewards, values, mask = make_batch(batch, length, seed=batch * length, device=device)
        if length > 3:
            mask[0, -3:] = False  # a row ending in observation tokens
        exact, exact_returns = gae_loop(rewards.double(), values.double(), mask, 1.0, 0.95)
        fast = gae(rewards, values, mask, 1.0, 0.95)
        error = max(float((fast.advantages.double() - exact).abs().max()),
                    float((fast.returns.double() - exact_returns).abs().max()))
        results.append((f"float32 GAE {batch} x {length} within 1e-5 of the float64 loop ({error:.1e})", error <= 1e-5))
        precise = gae(rewards.double(), values.double(), mask, 1.0, 0.95)
        error64 = float((precise.advantages - exact).abs().max())
        results.append((f"float64 GAE {batch} x {length} within 1e-10 ({error64:.1e})", error64 <= 1e-10))
        returns = discounted_returns(rewards, mask, 0.99)
        exact_g, _ = gae_loop(rewards.double(), torch.zeros_like(values).double(), mask, 0.99, 1.0)
        error_g = float((returns.double() - exact_g).abs().max())
        results.append((f"float32 returns {batch} x {length} within 1e-5 ({error_g:.1e})", error_g <= 1e-5))
    rewards, values, mask = make_batch(3, 50, device=device)
    mask[1] = False
    try:
        gae(rewards, values, mask, 1.0, 1.0)
        refused = False
    except ValueError:
        refused = True
    results.append(("a row without model tokens is refused", refused))
    if device != "cuda":
        return results
    fused = _triton.AVAILABLE and not scan._TRITON_FAILED
    detail = "Triton missing" if not _triton.AVAILABLE else (scan._TRITON_FAILED[0] if scan._TRITON_FAILED else "fused")
    results.append((f"the fused Triton kernel ran ({detail})", fused))
    return results + run_kernel_tests(device)


KERNEL_SHAPES = ((3, 1), (2, 5), (4, 100), (3, 2049), (3, 9000), (1, 20000))
KERNEL_CHUNKINGS = ({}, {"chunk": 64, "tile": 16}, {"chunk": 32, "tile": 32}, {"chunk": 16384, "tile": 2048},
                    {"chunk": 1 << 30})  # the last: a program a row, no summary pass
INTERPRETED_SHAPES = ((3, 1), (2, 5), (4, 100), (3, 700))  # the interpreter runs a tile in milliseconds
INTERPRETED_CHUNKINGS = ({"chunk": 64, "tile": 16}, {"chunk": 32, "tile": 32}, {"chunk": 16, "tile": 16},
                         {"chunk": 1 << 30, "tile": 16})


def run_kernel_tests(device: str = "cuda", shapes=KERNEL_SHAPES, chunkings=KERNEL_CHUNKINGS) -> list[tuple[str, bool]]:
    """The Triton kernels called directly, at chunk sizes down to 16 tokens, against the float64 loop:
    GAE at lambda 0, 0.95 and 1 (advantages and returns, relative to the largest return) and
    discounted returns."""
    from trajlens.estimators import _triton
    from trajlens.estimators.reference.verl import gae_loop

    results = []
    for options in chunkings:
        worst = 0.0
        for batch, length in shapes:
            rewards, values, mask = make_batch(batch, length, seed=batch * length, device=device)
            if length > 3:
                mask[0, -3:] = False  # a row ending in observation tokens
            if length > 200:
                mask[0, int(0.44 * length):int(0.47 * length)] = False  # observation tokens across a chunk boundary
                mask[-1, int(0.01 * length):int(0.94 * length)] = False  # whole chunks without a model token
            for lam in (0.0, 0.95, 1.0):
                exact, exact_returns = gae_loop(rewards.double(), values.double(), mask, 1.0, lam)
                out, plus_values, empty, nonfinite = _triton.masked_scan(rewards, values, mask, 1.0, lam, **options)
                if plus_values is None or empty or nonfinite:
                    worst = math.inf  # a flag raised on good input, or no returns: the line fails
                    continue
                scale = max(1.0, float(exact_returns.abs().max()))
                worst = max(worst, float((out.double() - exact).abs().max()) / scale,
                            float((plus_values.double() - exact_returns).abs().max()) / scale)
            exact_g, _ = gae_loop(rewards.double(), torch.zeros_like(values).double(), mask, 0.99, 1.0)
            returns, none, _, _ = _triton.masked_scan(rewards, None, mask, 0.99, 0.99, **options)
            worst = max(worst, float((returns.double() - exact_g).abs().max()) if none is None else math.inf)
        label = ", ".join(f"{key} {value}" for key, value in options.items()) or "default chunks"
        results.append((f"Triton kernels ({label}) within 1e-5 of the float64 loop ({worst:.1e})", worst <= 1e-5))
    flagged = []
    for options in ({"chunk": 64, "tile": 16}, {"chunk": 1 << 30, "tile": 16}):
        rewards, values, mask = make_batch(3, 500, device=device)
        mask[1] = False
        empty = _triton.masked_scan(rewards, values, mask, 1.0, 0.95, **options)[2]
        mask[1] = True
        mask[0, 400] = True
        rewards[0, 400] = float("nan")
        flagged.append(empty and _triton.masked_scan(rewards, values, mask, 1.0, 0.95, **options)[3])
    results.append(("Triton kernels flag a row without model tokens and a NaN reward", all(flagged)))
    return results


def _synchronize() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def best_time(call, repeats: int = 20) -> float:
    call()
    _synchronize()
    times = []
    for _ in range(repeats):
        _synchronize()
        start = time.perf_counter()
        call()
        _synchronize()
        times.append(time.perf_counter() - start)
    return min(times)


SIZES = ((64, 8192), (64, 32768), (64, 131072), (256, 131072))
DRY_RUN_SIZES = ((4, 4096), (4, 131072))


def run_benchmark(gae, scan, device: str = "cuda", sizes=SIZES, loop_size=(64, 32768)) -> list[tuple[str, bool]]:
    import os

    from trajlens.estimators.reference.verl import gae_loop

    results = []
    print(f"\n{'B x T':>15} {'fused ms':>9} {'ns/token':>9} {'torch ms':>9} {'clone ms':>9} {'x clone':>8} "
          f"{'fused vs torch':>15}")
    for batch, length in sizes:
        rewards, values, mask = make_batch(batch, length, device=device)
        fused = best_time(lambda: gae(rewards, values, mask, 1.0, 0.95))
        os.environ["TRAJLENS_SCAN_KERNEL"] = "torch"
        try:
            plain = best_time(lambda: gae(rewards, values, mask, 1.0, 0.95), repeats=5)
        finally:
            os.environ.pop("TRAJLENS_SCAN_KERNEL")
        clone = best_time(lambda: rewards.clone())
        tokens = batch * length
        print(f"{batch:>6} x {length:<7} {fused * 1e3:>9.3f} {fused / tokens * 1e9:>9.3f} {plain * 1e3:>9.3f} "
              f"{clone * 1e3:>9.3f} {fused / clone:>7.1f}x {plain / fused:>14.1f}x")
        if length >= 131072 and device == "cuda":
            results.append((f"fused within {CLONE_FACTOR:.0f}x of a clone at {batch} x {length} "
                            f"({fused / clone:.1f}x)", fused <= CLONE_FACTOR * clone))
        del rewards, values, mask
        if device == "cuda":
            torch.cuda.empty_cache()
    rewards, values, mask = make_batch(*loop_size, device=device)
    start = time.perf_counter()
    gae_loop(rewards, values, mask, 1.0, 0.95)
    _synchronize()
    loop = time.perf_counter() - start
    fused = best_time(lambda: gae(rewards, values, mask, 1.0, 0.95))
    print(f"verl's loop on {device} at {loop_size[0]} x {loop_size[1]}: {loop:.2f} s; fused {loop / fused:,.0f}x faster")
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", action="store_true", help="the tests only, no benchmark")
    parser.add_argument("--dry-run", action="store_true",
                        help="no GPU needed: the tests on CPU tensors and the benchmark at small sizes, no targets")
    parser.add_argument("--interpret", action="store_true",
                        help="no GPU needed: the Triton kernels' tests through Triton's interpreter on CPU")
    args = parser.parse_args()
    if args.interpret:
        import os

        os.environ["TRITON_INTERPRET"] = "1"  # read when the kernels are defined, so before the import
        load_estimators()
        from trajlens.estimators import _triton

        if not _triton.AVAILABLE:
            print("Triton is not installed: interpreter check skipped")
            return 0
        print(f"torch {torch.__version__}, Triton interpreter on CPU")
        return _report(run_kernel_tests("cpu", INTERPRETED_SHAPES, INTERPRETED_CHUNKINGS))
    if args.dry_run:
        gae, scan = load_estimators()
        print(f"torch {torch.__version__}, dry run on CPU")
        results = run_tests(gae, scan, device="cpu")
        if not args.tests:
            results += run_benchmark(gae, scan, device="cpu", sizes=DRY_RUN_SIZES, loop_size=(4, 2048))
        return _report(results)
    if not torch.cuda.is_available():
        print("no CUDA device: GPU check skipped")
        return 0
    gae, scan = load_estimators()
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    results = run_tests(gae, scan)
    if not args.tests:
        results += run_benchmark(gae, scan)
    return _report(results)


def _report(results: list[tuple[str, bool]]) -> int:
    print()
    return report_targets(results)


if __name__ == "__main__":
    sys.exit(main())
