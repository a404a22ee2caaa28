"""Attribution names the run's own estimator from its logged advantages when its config is silent."""

from __future__ import annotations

import polars as pl
from logged_runs import write_logged_run

import trajlens


def _run_with_logged_grpo(directory, *, config, logged="grpo"):
    """Six steps of four groups of four; each trajectory's logged advantage is verl GRPO's (or ``logged``'s)."""
    from trajlens.estimators import recompute

    rows = [{"run_id": "silent", "step": step, "trajectory_id": f"{step}-{group}-{member}",
             "group_id": f"{step}:{group}", "reward": float((step + 3 * group + member * member) % 5)}
            for step in range(1, 7) for group in range(4) for member in range(4)]
    recomputed = recompute(pl.DataFrame(rows), None, logged)
    advantage = dict(zip(recomputed["trajectory_id"].to_list(), recomputed["advantage"].to_list()))
    return write_logged_run(directory, "silent", rows, advantage, config)


def _attributed(tmp_path, config):
    from trajlens.attribution import attribute
    from trajlens.report import classify_store

    trajlens.ingest([_run_with_logged_grpo(tmp_path / "silent", config=config)], store=tmp_path / "store")
    store = trajlens.open(tmp_path / "store")
    classify_store(store)
    return attribute(store, "silent")


def test_a_silent_config_takes_the_estimator_its_logged_advantages_match(tmp_path):
    result = _attributed(tmp_path, {})
    assert result.own.label == "grpo"
    assert any(note.startswith("the run's own estimator, grpo, is identified from its logged advantages")
               for note in result.notes)
    assert any(finding.startswith("run's estimator: grpo") for finding in result.findings)


def test_a_config_that_names_the_estimator_is_taken_without_identification(tmp_path):
    result = _attributed(tmp_path, {"algorithm": {"adv_estimator": "grpo", "norm_adv_by_std_in_grpo": False}})
    assert result.own.label == "dr_grpo"  # what the config says, though the logged advantages are GRPO's
    assert not any("identified" in note for note in result.notes)


def test_attribution_checks_report_and_identify_name_the_estimator_the_verl_config_declares(tmp_path):
    """verl GRPO without the std division is Dr.GRPO: every surface says so, on one store."""
    from trajlens.attribution import attribute
    from trajlens.checks import check_run
    from trajlens.checks.spec import parse_checks
    from trajlens.estimators import identify_advantages
    from trajlens.report import report_store

    config = {"algorithm": {"adv_estimator": "grpo", "norm_adv_by_std_in_grpo": False}}
    trajlens.ingest([_run_with_logged_grpo(tmp_path / "silent", config=config, logged="dr_grpo")],
                    store=tmp_path / "store")
    store = trajlens.open(tmp_path / "store")
    report_store(store, tmp_path / "report", viewers_per_run=0)
    assert "The run trained with `dr_grpo` (from its config: algorithm.adv_estimator=grpo, " \
           "algorithm.norm_adv_by_std_in_grpo=false" in (tmp_path / "report" / "silent" / "stage_report.md").read_text()
    assert attribute(store, "silent").own.label == "dr_grpo"
    checks = parse_checks({"checks": {"run_mean": {"measure": "advantage:run:mean", "condition": "threshold",
                                                   "above": 10}}}, "checks.toml")
    (result,) = check_run(tmp_path / "store", checks, "silent").results
    assert result.status == "pass" and result.reason == "the run's estimator is dr_grpo (from its config)"
    trajectories = store.trajectories.collect()
    assert identify_advantages(trajectories, None, config=config).best.candidate.estimator == "dr_grpo"


def test_an_own_estimator_that_cannot_be_recomputed_is_named_not_replaced(tmp_path):
    """A reward missing from one trajectory: GRPO cannot be recomputed; the superstition table then
    shows every estimator under a title that names the run's, also once saved and loaded."""
    from trajlens.attribution import attribute
    from trajlens.attribution.saved import load_attribution
    from trajlens.attribution.render import attribution_markdown
    from trajlens.estimators import recompute

    rows = [{"run_id": "gap", "step": step, "trajectory_id": f"{step}-{group}-{member}",
             "group_id": f"{step}:{group}", "reward": float((step + 3 * group + member * member) % 5)}
            for step in range(1, 7) for group in range(4) for member in range(4)]
    logged = recompute(pl.DataFrame(rows), None, "grpo")
    advantage = dict(zip(logged["trajectory_id"].to_list(), logged["advantage"].to_list()))
    rows[5]["reward"] = None
    trajlens.ingest([write_logged_run(tmp_path / "gap", "gap", rows, advantage, {"algorithm": {"adv_estimator": "grpo"}})],
                    store=tmp_path / "store")
    store = trajlens.open(tmp_path / "store")
    result = attribute(store, "gap")
    assert (result.own.label, result.own.not_computed) == (None, "grpo")
    from trajlens.attribution.document import verdict_document

    document = verdict_document(result)  # what attribute --json writes
    assert (document["estimator"], document["estimator_not_computed"]) == (None, "grpo")
    assert "grpo: not computed (needs a reward for every trajectory)" in result.notes
    for shown in (result, load_attribution(trajlens.open(tmp_path / "store"), "gap")):
        text = attribution_markdown(shown)
        assert "### Superstition (every estimator; the run's, grpo, was not computed)" in text
        assert "run's estimator)" not in text


def test_a_run_whose_estimator_only_its_runs_column_names_is_recomputed_and_shown_under_it(tmp_path):
    """A config without algorithm.adv_estimator and runs.estimator = reinforce_plus_plus (an
    estimator the report recomputes only for the runs that declare it): the report's choices,
    the run's own estimator, the viewer and the checks all take it."""
    import json
    import shutil
    from pathlib import Path

    import pyarrow as pa
    import pyarrow.parquet as pq

    from cli_run import run_cli
    from trajlens.run.choices import available_estimators
    from trajlens.run.trained import run_trained_with

    run = shutil.copytree(Path(__file__).resolve().parents[2] / "sample_data" / "grpo-leg", tmp_path / "run")
    runs_file = run / "runs" / "part-0.parquet"
    runs = pq.read_table(runs_file)
    config = json.loads(runs.column("config")[0].as_py())
    del config["algorithm"]["adv_estimator"]
    runs = runs.set_column(runs.schema.get_field_index("config"), "config", [[json.dumps(config)]])
    runs = runs.set_column(runs.schema.get_field_index("estimator"), "estimator",
                           pa.array(["reinforce_plus_plus"], pa.string()))
    pq.write_table(runs, runs_file)
    trajlens.ingest([run], tmp_path / "store")
    store = trajlens.open(tmp_path / "store")

    trained = run_trained_with(store, "grpo-leg")
    assert (trained.label, trained.evidence) == ("reinforce_plus_plus", "runs.estimator=reinforce_plus_plus")
    own = trained.among(available_estimators(store, "grpo-leg"))
    assert own is not None and own.label == "reinforce_plus_plus"
    trajectory = store.trajectories.select("trajectory_id").head(1).collect().item()
    done = run_cli("view", tmp_path / "store", "--run", "grpo-leg", "-t", trajectory, "-o", tmp_path / "page.html")
    assert done.returncode == 0 and done.stdout.strip().endswith("(credit under reinforce_plus_plus)"), done.stderr
    done = run_cli("check", tmp_path / "store", "--run", "grpo-leg")
    assert "(the run's estimator is reinforce_plus_plus " in done.stdout


def test_the_viewer_colours_credit_under_an_identified_estimator_the_report_does_not_recompute(tmp_path):
    """A TRL run whose logged advantages identify ``trl_grpo_group`` (not among the report's
    recomputations): the viewer recomputes it, as attribution does, rather than colouring the
    calls under the report's first estimator while naming none of the run's."""
    from pathlib import Path

    from cli_run import run_cli
    from trajlens.attribution import attribute
    from trajlens.report import classify_store
    from trajlens.report.viewer import run_credit
    from trajlens.run.choices import available_estimators

    source = Path(__file__).resolve().parents[1] / "data" / "trl" / "grpo-run"
    trajlens.ingest([source], tmp_path / "store", run_id="trl")
    store = trajlens.open(tmp_path / "store")
    classify_store(store)
    own = attribute(store, "trl").own.label
    assert own == "trl_grpo_group" and own not in [c.label for c in available_estimators(store, "trl")]
    credit = run_credit(store, "trl")
    assert credit is not None and credit.label == own
    logged = store.sql("SELECT trajectory_id, logged_advantage FROM trajectories WHERE run_id = 'trl'")
    joined = credit.advantages.join(logged, on="trajectory_id")
    assert joined.height == logged.height
    assert (joined["advantage"] - joined["logged_advantage"]).abs().max() < 1e-6  # TRL computes in float32
    done = run_cli("view", tmp_path / "store", "--run", "trl", "--trajectory", logged["trajectory_id"][0],
                   "--out", tmp_path / "v.html")
    assert done.returncode == 0 and done.stdout.strip().endswith(f"(credit under {own})")
