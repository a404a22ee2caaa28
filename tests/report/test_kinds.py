"""Each kind of log gets a report that fits it: a run with validation data only, an RL run
without tools, single-step agent logs; each named for what it is and its main finding first."""

from __future__ import annotations

import pytest
from built_runs import built_run, write_store
from cli_run import run_cli as cli

import trajlens
from trajlens.report import report_store


@pytest.fixture(scope="module")
def validation_store(tmp_path_factory):
    root = tmp_path_factory.mktemp("kinds")
    return write_store(root, [built_run("valonly", split="val"), built_run("trained")])


def test_a_validation_only_run_is_reported_as_what_it_is_beside_a_training_run(validation_store, tmp_path):
    written = {r.run_id: r for r in report_store(trajlens.open(validation_store), tmp_path / "out", viewers_per_run=1)}
    valonly, trained = written["valonly"], written["trained"]
    assert (valonly.split, valonly.kind) == ("val", "validation split only")
    assert "no train split: reported on its val split (val)" in valonly.findings
    assert (trained.split, trained.kind) == ("train", "RL run with tools")
    assert not any(f.startswith("recomputed under") or f.startswith("as trained") for f in valonly.findings)
    assert (tmp_path / "out" / "valonly" / "stage_report.md").read_text().startswith(
        "# valonly\n\nvalidation split only; trajectories of split val.")


def test_split_option_of_report_and_sample(validation_store, tmp_path):
    done = cli("report", validation_store, "--out", tmp_path / "val", "--split", "val", "--viewers", "0")
    assert done.returncode == 0, done.stderr
    readme = (tmp_path / "val" / "README.md").read_text()
    assert "no val split: reported on its train split" in readme  # the training run has no val split
    done = cli("sample", validation_store, "--run", "valonly", "--n", "2")
    assert done.returncode == 0, done.stderr
    assert "run 'valonly' has no train split: sampling its val split" in done.stderr
    assert "| Q1 |" in done.stdout or "Q1" in done.stdout
