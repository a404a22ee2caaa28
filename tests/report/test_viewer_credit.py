"""The trajectory page's per-call credit is attribution's: one rule for which model tokens a
call owns (its own and its turn's reasoning before it), on the page and in ``call_credit``."""

from __future__ import annotations

import json
import math
import re

import polars as pl
import pytest

import trajlens
from cli_run import run_cli
from trajlens.report.viewer import run_credit, viewer_page

RUN = "sao-r6"


@pytest.fixture(scope="module")
def attributed(samples_store_path, tmp_path_factory):
    from stores import copy_store

    store = copy_store(samples_store_path, tmp_path_factory.mktemp("viewer-credit") / "store")
    done = run_cli("attribute", store, "--run", RUN, "--out", store.parent / "attribution.md")
    assert done.returncode == 0, done.stderr
    return trajlens.open(store)


def page_calls(page: str) -> dict[tuple[str, int], float | None]:
    blocks = re.findall(r'<script type="application/json" id="trajectory-\d+">(.*?)</script>', page)
    calls = {}
    for block in blocks:
        data = json.loads(block.replace("<\\/", "</"))
        calls.update({(data["id"], call["i"]): call["credit"] for call in data["calls"]})
    return calls


@pytest.mark.parametrize("label", ["gae_raw", "gae_whitened"])
def test_each_call_shows_the_credit_attribution_saved(attributed, label):
    saved = (attributed.table("call_credit")
             .filter((pl.col("run_id") == RUN) & (pl.col("estimator") == label) & (pl.col("aggregation") == "token-mean"))
             .collect())
    step = 80
    trajectory = saved.filter(pl.col("step") == step)["trajectory_id"][0]
    page = viewer_page(attributed, RUN, trajectory, run_credit(attributed, RUN, label, steps=[step]), step=step)
    shown = page_calls(page)
    wanted = {(t, i): a for t, i, a in saved.filter(pl.col("step") == step)
              .select("trajectory_id", "call_index", "advantage").iter_rows()}
    compared = [key for key in shown if key in wanted]
    assert len(compared) >= 20
    for key in compared:
        want = wanted[key]
        if want is None or math.isnan(want):
            assert shown[key] is None, key
        else:
            # the stored value, not rounded, for the page to round once (up to float32's last bits)
            assert shown[key] == pytest.approx(want, rel=1e-6, abs=1e-7), key


@pytest.mark.parametrize(("run_id", "own"), [("sao-r7", "gae_whitened"), ("multireward", "grpo_batch_std")])
def test_the_page_colours_credit_under_the_estimator_the_run_trained_with(samples_store_copy, tmp_path, run_id, own):
    """Not the first estimator the run's data allows (gae_raw, grpo): the report's sentence, the
    checks and attribution all name the run's own, and so does the page, by default."""
    from trajlens.run.trained import run_trained_with

    store = trajlens.open(samples_store_copy)
    assert run_trained_with(store, run_id).label == own
    trajectory = store.trajectories.filter(pl.col("run_id") == run_id).select("trajectory_id").head(1).collect().item()
    page = tmp_path / "page.html"
    done = run_cli("view", samples_store_copy, "--run", run_id, "--trajectory", trajectory, "--out", page)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith(f"(credit under {own})")
    assert f'"estimator":"{own}"' in page.read_text()


def test_a_call_the_harness_rejected_owns_no_tokens_on_the_page_as_in_call_credit(tmp_path):
    """A rejected call's tokens go to the next call that ran, on the page as in ``call_credit``."""
    import shutil
    from pathlib import Path

    run = tmp_path / "run"
    shutil.copytree(Path(__file__).resolve().parents[2] / "sample_data" / "causal-r6", run)
    step = 10
    for part in (run / "tool_calls").glob(f"step={step:06d}/*.parquet"):
        calls = pl.read_parquet(part)
        calls.with_columns(pl.col("format_error") | (pl.col("call_index") % 5 == 2)).write_parquet(part)
    store = tmp_path / "store"
    for command in (("ingest", run, "--store", store, "--run", "fe"), ("attribute", store, "--run", "fe", "--out", tmp_path / "a.md")):
        done = run_cli(*command)
        assert done.returncode == 0, done.stderr
    opened = trajlens.open(store)
    saved = (opened.table("call_credit")
             .filter((pl.col("step") == step) & (pl.col("estimator") == "gae_raw") & (pl.col("aggregation") == "token-mean"))
             .collect())
    trajectory = saved["trajectory_id"][0]
    shown = page_calls(viewer_page(opened, "fe", trajectory, run_credit(opened, "fe", "gae_raw", steps=[step]), step=step))
    wanted = {(t, i): a for t, i, a in saved.select("trajectory_id", "call_index", "advantage").iter_rows()
              if any(key[0] == t for key in shown)}
    rejected = [key for key in shown if key[1] % 5 == 2]
    assert rejected and all(key not in wanted for key in rejected)
    assert [shown[key] for key in rejected] == [None] * len(rejected)
    after = [(t, i + 1) for t, i in rejected if (t, i + 1) in wanted]
    assert after, "a call follows a rejected one"
    assert {key for key in shown if shown[key] is not None} == set(wanted)
    for key, want in wanted.items():
        assert shown[key] == pytest.approx(want, rel=1e-6, abs=1e-7), key


def test_a_step_the_runs_estimator_cannot_be_recomputed_on_gets_a_page_without_credit(tmp_path):
    """A trajectory with no model token keeps its step from GAE (only reading the arrays shows it):
    the page of any trajectory of that step is written without credit, and says why; another
    step's page has its credit."""
    import pyarrow.parquet as pq

    from trajlens.synth import generate

    run = tmp_path / "r6"
    generate("sao-r6", run, steps=2, batch=8, tokens_per_trajectory=60, tool_calls_per_trajectory=3)
    empty = pl.col("trajectory_id") == "s0001-t0000"
    for table, column, value in (("trajectories", "model_tokens", pl.lit(0)),
                                 ("tokens", "response_mask", pl.col("response_mask").list.eval(pl.lit(False)))):
        for path in (run / table).glob("*/*.parquet"):
            given = pq.read_table(path)
            frame = pl.from_arrow(given).with_columns(pl.when(empty).then(value).otherwise(pl.col(column)).alias(column))
            pq.write_table(frame.to_arrow().cast(given.schema), path)
    assert run_cli("ingest", run, "--store", tmp_path / "store").returncode == 0
    done = run_cli("view", tmp_path / "store", "--run", RUN, "-t", "s0001-t0001", "--out", tmp_path / "one.html")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == (f"wrote {tmp_path / 'one.html'} (no credit: no estimator the run allows can be recomputed "
                           "on its step 1)\n")
    done = run_cli("view", tmp_path / "store", "--run", RUN, "-t", "s0002-t0001", "--out", tmp_path / "two.html")
    assert done.stdout == f"wrote {tmp_path / 'two.html'} (credit under gae_raw)\n"
