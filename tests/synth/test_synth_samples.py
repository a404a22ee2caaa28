"""The shipped samples are small, documented and current (regenerated from today's generator)."""

from __future__ import annotations

import json
from pathlib import Path

from synth_helpers import SAMPLES, assert_same_as_shipped, sample

from trajlens.synth import SCENARIOS, generate, load_truth
from trajlens.synth.readme import run_readme
from trajlens.synth.regenerate import SAMPLES as SHIPPED, SIZE_LIMIT


def test_samples_fit_in_20_mb_and_each_has_a_readme():
    total = sum(p.stat().st_size for p in SAMPLES.rglob("*") if p.is_file())
    assert total <= SIZE_LIMIT
    assert "python -m trajlens.synth.regenerate sample_data" in (SAMPLES / "README.md").read_text()
    for name in SHIPPED:
        run = sample(name)
        readme = (run / "README.md").read_text()
        assert readme.startswith(f"# {name}:") and "## What you should find" in readme


def test_shipped_steps_equal_freshly_generated_ones(tmp_path):
    """Steps regenerated on their own equal the shipped ones row for row: the samples are current."""
    for name, step in (("sao-r6", 120), ("sao-r7", 143), ("grpo-leg", 40), ("multireward", 300)):
        spec = SCENARIOS[name]
        fresh = generate(name, tmp_path / name, steps=1, first_step=step).directory
        for table in ("trajectories", "tool_calls", "tokens"):
            part = Path(table) / f"step={step:06d}" / "part-0.parquet"
            assert_same_as_shipped(fresh / part, sample(name) / part)
        assert load_truth(sample(name))["sizes"]["batch"] == spec.batch
    fresh = generate("resume-lr", tmp_path / "resume").directory
    assert (fresh / "metrics.jsonl").read_bytes() == (sample("resume-lr") / "metrics.jsonl").read_bytes()


def test_readmes_are_rendered_from_the_current_truth():
    for name in SHIPPED:
        run = sample(name)
        expected = run_readme(run, load_truth(run))
        shipped = (run / "README.md").read_text()
        if name == "multireward":  # also quotes a run at the seed's batch size, not shipped
            marker = "The same generator at the seed's batch size"
            assert shipped.split(marker)[0] == expected.split("What reproduces and what cannot")[0]
            continue
        assert shipped == expected, f"regenerate {run}/README.md"


def test_truth_names_its_curves_and_events():
    truth = load_truth(sample("sao-r6"))
    assert truth["curves"]["behaviour.think_share"]["origin"] == "seed"
    assert [e["steps"] for e in truth["events"] if e["kind"] == "all_negative_batch"] == [[119, 120, 121]]
    assert len(truth["per_step"]["step"]) == 135
    json.dumps(truth, allow_nan=False)


def test_the_grad_norm_spike_comes_with_empty_shells_however_small_the_batch():
    """sao-r7's critic/grad_norm of 233 at step 143 is a batch of empty shells (sandbox pods lost),
    as its README says: at 5 trajectories a step, a quarter of them drawn at random could be none."""
    import polars as pl

    step = pl.read_parquet(sample("sao-r7") / "trajectories" / "step=000143" / "part-0.parquet")
    shells = step.filter(pl.col("exit_status") == "sandbox_error")
    assert shells.height >= 1 and shells["num_turns"].to_list() == [1] * shells.height
