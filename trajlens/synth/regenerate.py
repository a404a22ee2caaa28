"""Rebuild the shipped sample runs and their READMEs: ``python -m trajlens.synth.regenerate sample_data``.

Every scenario at its default size and seed 0, one folder each, a README per folder and one
index README. The multireward README also quotes a run at the seed's batch size (1024
trajectories per step), generated in a temporary folder and deleted. Fails if the samples
together exceed :data:`SIZE_LIMIT`.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from trajlens.errors import ConfigError
from trajlens.synth.causal import causal_index, causal_readme, generate_causal
from trajlens.synth.causal_spec import CAUSAL_SCENARIOS
from trajlens.synth.generate import SynthResult, generate
from trajlens.synth.readme import index_readme, run_readme
from trajlens.synth.truth import TRUTH_FILE, load_truth

SAMPLES: tuple[str, ...] = ("sao-r6", "sao-r7", "grpo-leg", "multireward", "resume-lr")
"""Scenarios shipped in ``sample_data/``, each in a folder of its name."""
SEED_BATCH = {"batch": 1024, "tool_calls_per_trajectory": 3, "tokens_per_trajectory": 100}
"""Sizes of the multireward run at the seed's batch size quoted in its README."""
SIZE_LIMIT = 30_000_000
"""Bytes all samples may take together."""
CAUSAL_SAMPLES: tuple[str, ...] = tuple(name for name, spec in CAUSAL_SCENARIOS.items() if spec.shipped)
"""Causal runs shipped beside them (:mod:`trajlens.synth.causal`; the scenarios marked ``shipped``)."""
CAUSAL_SIZE_LIMIT = 8_000_000
"""Bytes the causal runs may take together."""


def regenerate(directory: Path | str, *, seed: int = 0, seed_batch: bool = True, progress: bool = False) -> list[SynthResult]:
    """Regenerate every sample into ``directory``, replacing earlier generated folders."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    results = []
    entries = []
    for name in SAMPLES:
        target = directory / name
        _clear(target)
        result = generate(name, target, seed=seed, progress=progress)
        results.append(result)
        extra = _seed_batch_truth(seed, progress) if name == "multireward" and seed_batch else None
        (target / "README.md").write_text(run_readme(target, load_truth(target), extra))
        entries.append((name, _size(target), load_truth(target)))
    causal_entries = []
    for name in CAUSAL_SAMPLES:
        target = directory / name
        _clear(target)
        results.append(generate_causal(name, target, seed=seed))
        (target / "README.md").write_text(causal_readme(target, load_truth(target)))
        causal_entries.append((name, _size(target), load_truth(target)))
    (directory / "README.md").write_text(index_readme(entries) + causal_index(causal_entries))
    causal_total = sum(size for _, size, _ in causal_entries)
    if causal_total > CAUSAL_SIZE_LIMIT:
        raise ConfigError([f"causal samples take {causal_total / 1e6:.1f} MB, more than the "
                           f"{CAUSAL_SIZE_LIMIT / 1e6:.0f} MB allowed"])
    total = sum(size for _, size, _ in entries) + causal_total
    if total > SIZE_LIMIT:
        raise ConfigError([f"samples take {total / 1e6:.1f} MB, more than the {SIZE_LIMIT / 1e6:.0f} MB allowed"])
    return results


def _seed_batch_truth(seed: int, progress: bool) -> dict:
    with tempfile.TemporaryDirectory(prefix="trajlens-synth-") as tmp:
        generate("multireward", Path(tmp) / "run", seed=seed, progress=progress, **SEED_BATCH)
        return load_truth(Path(tmp) / "run")


def _clear(target: Path) -> None:
    if not target.exists():
        return
    if not (target / TRUTH_FILE).is_file():
        raise ConfigError([f"{target} exists and was not written by the generator (no {TRUTH_FILE}); move it away first"])
    shutil.rmtree(target)


def _size(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trajlens.synth.regenerate", description=__doc__.splitlines()[0])
    parser.add_argument("directory", nargs="?", default="sample_data", help="where the samples go (default: sample_data)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-seed-batch", action="store_true", help="skip the seed-batch multireward run quoted in its README")
    args = parser.parse_args(argv)
    try:
        results = regenerate(args.directory, seed=args.seed, seed_batch=not args.no_seed_batch, progress=sys.stderr.isatty())
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    for r in results:
        print(f"{r.scenario}: {r.steps} steps, {r.trajectories} trajectories, {r.tool_calls} tool calls -> {r.directory}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
