"""`trajlens report` on degenerate runs, end to end through the CLI: a run of many tiny steps is
reported step by step, and token arrays without a model token are said, not failed on."""

from __future__ import annotations


import pytest
from cli_run import run_cli

from built_runs import built_run, degenerate_store, write_store

STEPS = 300
"""Steps of the run of tiny steps reported here. How the report's time and peak memory grow with
the steps (per step, never faster) is held by ``benchmarks/bench_recompute.py --degenerate``,
run by ``benchmarks/run``, on runs of thousands of steps."""


def test_a_report_on_many_tiny_steps_has_a_row_per_step(tmp_path):
    store = degenerate_store(tmp_path / "store", STEPS, chunk=100)
    done = run_cli("report", store, "--out", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    markdown = (tmp_path / "out" / "degenerate" / "stage_report.md").read_text()
    assert f"| gae_raw | {STEPS} |" in markdown


@pytest.mark.slow
@pytest.mark.parametrize(("mask", "said"), [("all_false", "every response mask is false"),
                                            ("empty", "every token array is empty")])
def test_token_arrays_without_a_model_token_are_said(tmp_path, mask, said):
    store = write_store(tmp_path, [built_run("nomodel", mask=mask)])
    done = run_cli("report", store, "--out", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    findings = (tmp_path / "out" / "README.md").read_text()
    assert f"token arrays hold no model token ({said}, 12 arrays)" in findings
    assert said in (tmp_path / "out" / "index.html").read_text()
    markdown = (tmp_path / "out" / "nomodel" / "stage_report.md").read_text()
    assert "gae_raw" not in markdown


def test_many_tiny_steps_are_read_in_few_batches(tmp_path):
    """The step-wise recomputation shares each read among many tiny steps."""
    import trajlens
    from trajlens.run.batches import plan_batches, train_trajectories

    store = trajlens.open(degenerate_store(tmp_path / "store", 1_000, chunk=250))
    trajectories = train_trajectories(store, "degenerate")
    assert trajectories.height == 1_000
    assert plan_batches(trajectories, max_steps=256) == [(0, 256), (256, 512), (512, 768), (768, 1_000)]
    from trajlens.run.choices import report_advantages

    advantages = report_advantages(store, "degenerate")
    assert [c.label for c in advantages.choices] == ["gae_raw", "gae_whitened"]
    assert advantages.diagnostics.height == 2 * 1_000
