"""The Python API reads a run's saved classes as the CLI does: a tool map given to `trajlens
classify` (or to `classify_store`) decides every surface, and classifying again without it goes
back to the shipped maps."""

from __future__ import annotations

import polars as pl

import trajlens
from cli_run import run_cli

RUN = "sao-r6"


def _think_share(report: trajlens.StageReport) -> list[float]:
    rates = report.rates.filter(pl.col("metric") == "share:think").sort("stage_index")
    return rates["population_value"].to_list()


def test_stage_report_reads_the_classes_a_tool_map_gave(samples_store_copy, tmp_path):
    shipped = _think_share(trajlens.stage_report(trajlens.open(samples_store_copy), run_id=RUN))
    assert max(shipped) > 0.2
    tool_map = tmp_path / "map.toml"
    tool_map.write_text('[map]\nname = "no-think"\n\n[[tools]]\nname = ["think"]\nclass = "other"\n')
    assert run_cli("classify", samples_store_copy, "--tool-map", tool_map).returncode == 0
    store = trajlens.open(samples_store_copy)
    assert _think_share(trajlens.stage_report(store, run_id=RUN)) == [0.0] * len(shipped)
    cli = run_cli("sample", samples_store_copy, "--run", RUN, "--out", tmp_path / "sample.csv")
    assert cli.returncode == 0, cli.stderr
    sampled = pl.read_csv(tmp_path / "sample.csv").filter(pl.col("metric") == "share:think")
    assert sampled["population_value"].to_list() == [0.0] * len(shipped)
    # Classifying again without the map goes back to the shipped maps, through the API too.
    trajlens.classify_store(trajlens.open(samples_store_copy), [RUN])
    assert _think_share(trajlens.stage_report(trajlens.open(samples_store_copy), run_id=RUN)) == shipped
    trajlens.classify_store(trajlens.open(samples_store_copy), [RUN], tool_map=tool_map)
    assert _think_share(trajlens.stage_report(trajlens.open(samples_store_copy), run_id=RUN)) == [0.0] * len(shipped)


def test_each_run_reads_its_own_saved_classes(samples_store_copy, tmp_path):
    """Runs never classified (or holding no trajectories) leave the others' saved classes alone."""
    tool_map = tmp_path / "map.toml"
    tool_map.write_text('[map]\nname = "no-think"\n\n[[tools]]\nname = ["think"]\nclass = "other"\n')
    trajlens.classify_store(trajlens.open(samples_store_copy), [RUN], tool_map=tool_map)
    report = trajlens.stage_report(trajlens.open(samples_store_copy), stages="early_late")
    think = report.rates.filter(pl.col("metric") == "share:think")
    assert think.filter(pl.col("run_id") == RUN)["population_value"].to_list() == [0.0, 0.0]
    assert think.filter(pl.col("run_id") == "sao-r7")["population_value"].max() > 0.05


def test_a_report_says_which_rules_classified_the_saved_classes(samples_store_copy, tmp_path):
    """Classes saved under other rules than this trajlens has are read as saved (with the tool map
    they were given), and the stage report says under which rules, and how to classify again."""
    from trajlens.classify import RULES_VERSION
    from trajlens.classify.per_trajectory import RULES_COLUMN

    store = trajlens.open(samples_store_copy)
    trajlens.classify_store(store, [RUN])
    saved = trajlens.open(samples_store_copy).table("trajectory_measures").filter(pl.col("run_id") == RUN).collect()
    assert saved[RULES_COLUMN].unique().to_list() == [RULES_VERSION]
    assert f"classification rules v{RULES_VERSION}. " in trajlens.stage_report(store, run_id=RUN).to_markdown()
    trajlens.open(samples_store_copy).write_derived("trajectory_measures", RUN,
                                                    saved.with_columns(pl.lit("1.5").alias(RULES_COLUMN)))
    said = (f"classification rules v1.5, as `trajlens classify` saved the classes (this trajlens has v{RULES_VERSION}: "
            "`trajlens classify STORE` classifies them again)")
    assert said in trajlens.stage_report(trajlens.open(samples_store_copy), run_id=RUN).to_markdown()
    cli = run_cli("sample", samples_store_copy, "--run", RUN)
    assert cli.returncode == 0 and said in cli.stdout
    assert run_cli("classify", samples_store_copy, "--run", RUN).returncode == 0
    assert f"classification rules v{RULES_VERSION}. " in run_cli("sample", samples_store_copy, "--run", RUN).stdout
