"""A run whose groups hold one trajectory each (single-rollout, as SAO trains) and a group
estimator: ``advantages`` recomputes it when asked and says what a group of one gives; ``view``
and the report recompute only what the run's data allows, and ``view`` says why a label is not
among them in the registry's words. ``compare`` refuses a side compared with itself."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from cli_run import run_cli
from outputs import one_error_line

import trajlens

SINGLE_ROLLOUT = "sao-r6"


def test_advantages_says_a_group_of_one_compares_nothing(samples_store_copy):
    done = run_cli("advantages", samples_store_copy, "--run", SINGLE_ROLLOUT, "-e", "grpo")
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == (
        f"note: every group of run '{SINGLE_ROLLOUT}' has one trajectory, so grpo compares none with another: each has "
        "its advantage for a group of one (docs/estimators.md), and the report recomputes no group estimator on such a run")
    # a run of real groups gets no note
    done = run_cli("advantages", samples_store_copy, "--run", "grpo-leg", "-e", "grpo")
    assert done.returncode == 0 and "note:" not in done.stderr, done.stderr


def test_view_names_what_a_label_it_refuses_needs(samples_store_path, tmp_path):
    store = trajlens.open(samples_store_path)
    trajectory = store.trajectories.filter(pl.col("run_id") == SINGLE_ROLLOUT).select("trajectory_id").head(1).collect().item()
    done = run_cli("view", samples_store_path, "--run", SINGLE_ROLLOUT, "--trajectory", trajectory, "-e", "grpo",
                   "--out", tmp_path / "v.html")
    assert done.returncode == 1
    assert one_error_line(done) == (f"error: --estimator 'grpo': the report recomputes gae_raw, gae_whitened "
                                    f"on run '{SINGLE_ROLLOUT}' (grpo needs groups of two or more)")
    assert not (tmp_path / "v.html").exists()


def test_a_side_compared_with_itself_is_refused(samples_store_path, tmp_path):
    done = run_cli("compare", samples_store_path, "sao-r6:Q4", "sao-r6:Q4", "--out", tmp_path / "cmp")
    assert done.returncode == 1
    assert one_error_line(done) == ("error: sides 'sao-r6:Q4' and 'sao-r6:Q4' are the same trajectories under the same "
                                    "advantages: compare two runs, two stages of the run (sao-r6:Q1 sao-r6:Q4) or two "
                                    "estimator labels")
    assert not (tmp_path / "cmp").exists()


def test_a_run_of_one_stage_compared_with_itself_is_told_no_stage_pair(tmp_path):
    """Agent logs of one step have the one stage Q1: the error does not offer Q1 against Q4."""
    store = tmp_path / "store"
    assert run_cli("ingest", Path(__file__).resolve().parents[1] / "data" / "openai_chat" / "messages.jsonl",
                   "--store", store).returncode == 0
    done = run_cli("compare", store, "messages:Q1", "messages:Q1")
    assert one_error_line(done) == ("error: sides 'messages:Q1' and 'messages:Q1' are the same trajectories under the "
                                    "same advantages: compare two runs or two estimator labels (the run has one "
                                    "stage, Q1)")
    done = run_cli("compare", store, "messages", "messages:Q1")
    assert one_error_line(done) == ("error: sides 'messages' and 'messages:Q1' overlap: the stage's trajectories are "
                                    "part of the whole run's; compare two runs (the run has one stage)")
