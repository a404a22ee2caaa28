"""The estimator registry, and every registered estimator through every path that reads it.

Paths: ``recompute`` on frames, the ``trajlens advantages`` command on a real store, the
report's estimator choices, and ``docs/estimators.md`` / the README table.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from trajlens.estimators import EstimatorInputError, recompute
from trajlens.estimators.registry import (
    ESTIMATOR_REGISTRY,
    InReport,
    Input,
    RunFacts,
    Statistics,
    declared_estimators,
    estimator_spec,
    render_markdown,
    render_readme_table,
    run_facts,
)

REPO = Path(__file__).resolve().parents[2]
NAMES = list(ESTIMATOR_REGISTRY)
CHANNEL = pl.Struct({"name": pl.String, "value": pl.Float64})


def full_frames(seed: int = 0) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Two steps of two groups of three, with every input any estimator reads."""
    rng = np.random.default_rng(seed)
    rows, token_rows = [], []
    for step in (1, 2):
        for group in ("a", "b"):
            for member in range(3):
                trajectory_id = f"{step}-{group}-{member}"
                length = int(rng.integers(3, 7))
                mask = [True] * length
                mask[1] = False  # an observation span inside the response
                correct, style = float(rng.integers(0, 2)), float(rng.random())
                rows.append({
                    "run_id": "r", "step": step, "trajectory_id": trajectory_id, "group_id": f"{step}:{group}",
                    "task_id": group, "split": "train", "reward": correct + style,
                    "reward_channels": [{"name": "correct", "value": correct}, {"name": "style", "value": style}],
                    "model_tokens": sum(mask), "reward_baseline": 0.5,
                })
                probabilities = rng.uniform(0.05, 0.95, length)
                token_rows.append({
                    "run_id": "r", "step": step, "trajectory_id": trajectory_id, "response_mask": mask,
                    "values": rng.normal(size=length).tolist(), "token_rewards": None,
                    "log_probs": np.log(probabilities).tolist(),
                    "sum_pi_squared": (probabilities**2 + rng.uniform(0, 0.05, length)).tolist(),
                })
    f32 = pl.List(pl.Float32)
    trajectories = pl.DataFrame(rows, schema_overrides={"reward_channels": pl.List(CHANNEL)})
    tokens = pl.DataFrame(token_rows, schema_overrides={
        "values": f32, "token_rewards": f32, "log_probs": f32, "sum_pi_squared": f32})
    return trajectories, tokens


def test_every_entry_is_complete():
    for name, spec in ESTIMATOR_REGISTRY.items():
        assert spec.name == name
        assert spec.summary and spec.reference and spec.reference_version, name
        assert callable(spec.tensor_function()), name
        assert not spec.option_problems(spec.defaults()), name
        assert len({o.name for o in spec.options}) == len(spec.options), name
        for option in spec.options:
            assert option.doc, (name, option.name)
        labels = [v.label for v in spec.variants()]
        assert len(set(labels)) == len(labels)
        for variant in spec.variants():
            assert not spec.option_problems(variant.options), (name, variant.label)


def test_labels_are_unique_across_the_registry():
    labels = [v.label for s in ESTIMATOR_REGISTRY.values() for v in s.variants()]
    assert len(labels) == len(set(labels))


def test_unknown_estimator_and_bad_options_are_one_line_errors():
    with pytest.raises(EstimatorInputError, match="estimator must be one of 'gae'"):
        estimator_spec("ppo")
    trajectories, tokens = full_frames()
    with pytest.raises(EstimatorInputError) as caught:
        recompute(trajectories, tokens, "grpo", epsilon="small", nope=1, score="tokens")
    message = str(caught.value)
    assert "\n" not in message
    assert "grpo takes no option 'nope'" in message and "option 'epsilon': expected float" in message
    assert "option 'score': expected one of reward, token_rewards" in message
    with pytest.raises(EstimatorInputError, match="gdpo_dynamic option 'config'.*'nope'"):
        recompute(trajectories, tokens, "gdpo_dynamic", config={"nope": 1})
    assert recompute(trajectories, tokens, "gdpo_dynamic", config={"ema_alpha": 0.2}).height == trajectories.height


@pytest.mark.parametrize("name", NAMES)
def test_recompute_runs_every_estimator(name):
    trajectories, tokens = full_frames()
    spec = estimator_spec(name)
    facts = run_facts(trajectories, tokens)
    assert spec.applies(facts), spec.missing(facts)
    out = recompute(trajectories, tokens, name)
    assert out.height == trajectories.height
    assert out["trajectory_id"].to_list() == trajectories["trajectory_id"].to_list()
    assert set(out["estimator"]) == {name}
    assert all(math.isfinite(v) for v in out["advantage"].to_list()), out
    if spec.statistics is Statistics.MODEL_TOKENS:
        # the report can weigh these by model tokens: token arrays or per-trajectory counts
        assert "token_advantages" in out.columns or "model_tokens" in out.columns, name


def test_run_facts_reads_lazy_frames_and_names_the_trajectory_without_token_arrays():
    import polars as pl

    trajectories, tokens = full_frames()
    eager = run_facts(trajectories, tokens)
    assert run_facts(trajectories.lazy(), tokens.lazy()) == eager and eager.token_arrays and not eager.token_gap
    first = trajectories["trajectory_id"][0]
    emptied = tokens.with_columns(
        pl.when(pl.col("trajectory_id") == first).then(pl.col("response_mask").list.eval(pl.element() & False))
        .otherwise(pl.col("response_mask")).alias("response_mask"))
    facts = run_facts(trajectories, emptied)
    assert not facts.token_arrays and facts.token_gap == f"trajectory {first!r} has no model token"
    assert estimator_spec("gae").missing(facts) == [f"token arrays for every trajectory (trajectory {first!r} has no model token)"]
    dropped = run_facts(trajectories, tokens.filter(pl.col("trajectory_id") != first))
    assert dropped.token_gap == f"trajectory {first!r} has no row in tokens"


@pytest.mark.parametrize("name", NAMES)
def test_recompute_says_what_is_missing(name):
    spec = estimator_spec(name)
    trajectories, tokens = full_frames()
    if spec.inputs & Input.TOKEN_ARRAYS:
        with pytest.raises(EstimatorInputError, match="needs the tokens frame"):
            recompute(trajectories, None, name)
    if spec.kind.value == "channel":
        with pytest.raises(EstimatorInputError, match="reward_channels"):
            recompute(trajectories.drop("reward_channels"), tokens, name)


def _store(tmp_path, config: dict):
    import trajlens
    from tinyrun import tiny_run
    from trajlens.store.layout import RunDirWriter

    import dataclasses

    import pyarrow as pa

    run = tiny_run()
    runs = run.runs.set_column(run.runs.schema.get_field_index("config"), run.runs.schema.field("config"),
                               pa.array([json.dumps(config)], pa.string()))
    run = dataclasses.replace(run, runs=runs)
    directory = tmp_path / "run"
    with RunDirWriter(directory, run.runs) as writer:
        writer.write_run(run)
    trajlens.ingest([directory], tmp_path / "store")
    return trajlens.open(tmp_path / "store")


@pytest.fixture(scope="module")
def tiny_store(tmp_path_factory):
    return _store(tmp_path_factory.mktemp("registry"), {"algorithm": {"adv_estimator": "grpo", "norm_adv": "batch_std"}})


@pytest.mark.parametrize("name", NAMES)
def test_cli_runs_every_estimator_or_says_what_the_run_lacks(name, tiny_store, capsys):
    from trajlens.cli._app import main
    from trajlens.run.advantages import read_run

    frames = read_run(tiny_store, "tiny")
    facts = run_facts(frames.trajectories, frames.tokens)
    spec = estimator_spec(name)
    code = main(["advantages", str(tiny_store.path), "--run", "tiny", "--estimator", name])
    captured = capsys.readouterr()
    if spec.applies(facts):
        assert code == 0, captured.err
        assert "all-negative batches" in captured.out
        labels = tiny_store.sql("SELECT DISTINCT estimator FROM advantage_batches")["estimator"].to_list()
        # the run's own trainer (verl) computes sum_then_normalize otherwise than the report does
        assert (f"{name}@verl==0.9.1" if name == "sum_then_normalize" else name) in labels
    else:
        assert code == 1
        lines = captured.err.strip().splitlines()
        assert len(lines) == 1 and name in lines[0] and "needs" in lines[0], captured.err


def test_a_label_names_one_computation_however_its_settings_are_spelled():
    from trajlens.estimators.registry import label_mismatch

    for same in ({}, {"config": {}}, {"config": {"ema_alpha": 0.05}}, {"config": None}):
        assert label_mismatch("gdpo_dynamic", "gdpo_dynamic", same) is None, same
    assert label_mismatch("gdpo_dynamic", "gdpo_dynamic", {"config": {"ema_alpha": 0.5}}) is not None
    assert label_mismatch("gae_raw", "gae", {"whiten": False, "gamma": 1}) is None
    assert label_mismatch("gae_raw", "gae", {}) is not None
    assert label_mismatch("mine", "grpo", {"epsilon": 1000.0}) is None  # a label no surface reads


def test_report_choices_follow_the_registry(tiny_store):
    from trajlens.run.choices import ESTIMATOR_CHOICES, available_estimators

    reported = {c.estimator for c in ESTIMATOR_CHOICES}
    assert reported == {n for n, s in ESTIMATOR_REGISTRY.items() if s.report is not InReport.NEVER}
    chosen = {c.label for c in available_estimators(tiny_store, "tiny")}
    # the tiny run: groups of two, rewards, two channels, token arrays with values; config declares batch std
    assert {"gae_raw", "gae_whitened", "grpo", "dr_grpo", "rloo", "grpo_batch_std", "sum_then_normalize",
            "gdpo_verl", "gdpo_dynamic"} <= chosen
    assert "gdpo_trl" not in chosen  # reported only when the config declares normalize_then_sum


@pytest.mark.parametrize("name", [n for n, s in ESTIMATOR_REGISTRY.items() if s.report is not InReport.NEVER])
def test_report_includes_each_estimator_when_its_data_allows(name):
    from trajlens.run.choices import ESTIMATOR_CHOICES

    spec = estimator_spec(name)
    everything = RunFacts(trajectories=10, token_arrays=True, critic_values=True, token_counts=True, largest_group=4,
                          smallest_group=4, all_rewarded=True, channels=2, log_probs=True, sum_pi_squared=True,
                          baseline_rewards=True, declared=frozenset({name}))
    assert spec.in_report(everything)
    assert any(c.estimator == name for c in ESTIMATOR_CHOICES)
    nothing = RunFacts()
    assert not spec.in_report(nothing)


@pytest.mark.parametrize("name", [n for n, s in ESTIMATOR_REGISTRY.items() if Input.REWARDS in s.inputs
                                  and any(o.name == "convention" and "trl" in o.choices for o in s.options)])
def test_a_run_without_any_reward_has_nothing_to_estimate_even_where_one_may_be_unscorable(name):
    """Under TRL's conventions a trajectory without a reward is unscorable (advantage 0); a run
    with none at all is refused, not recomputed as all zeros."""
    spec = estimator_spec(name)
    groups = dict(trajectories=8, largest_group=4, smallest_group=4, token_counts=True, channels=2)
    assert "a reward for some trajectory (every one is unscorable: nothing to estimate)" in spec.missing(
        RunFacts(**groups), {**spec.defaults(), "convention": "trl"})
    assert not spec.missing(RunFacts(**groups, any_rewarded=True), {**spec.defaults(), "convention": "trl"})


def test_declared_estimators_read_the_config():
    # one answer: the estimator the run trained with (trained_with), not every entry a key mentions
    assert declared_estimators({"algorithm": {"adv_estimator": "grpo", "norm_adv": "batch_std"}}) == {"grpo_batch_std"}
    assert "grpo_batch_std" in declared_estimators('{"scale_rewards": "batch"}')
    assert declared_estimators("not json") == frozenset()
    sample = pl.read_parquet(REPO / "sample_data" / "multireward" / "runs" / "part-0.parquet")["config"][0]
    assert "grpo_batch_std" in declared_estimators(sample)
    assert declared_estimators(None) == declared_estimators({}) == declared_estimators("") == frozenset()


def test_channel_facts_of_trajectories_without_channels_and_with_some():
    from trajlens.estimators.registry import run_facts

    channel = pl.Struct({"name": pl.String, "value": pl.Float64})
    schema = {"step": pl.Int64, "group_id": pl.String, "trajectory_id": pl.String, "reward": pl.Float64,
              "reward_channels": pl.List(channel)}

    def facts(channels):
        frame = pl.DataFrame({"step": [1, 1], "group_id": ["g", "g"], "trajectory_id": ["a", "b"], "reward": [1.0, 0.0],
                              "reward_channels": channels}, schema=schema)
        found = run_facts(frame)
        return found.channels, found.channel_gap

    assert facts([[], None]) == facts([[], []]) == (0, "")
    assert facts([[{"name": "x", "value": 1.0}], []]) == (1, "")
    assert facts([[{"name": "x", "value": 1.0}, {"name": "y", "value": 0.5}], [{"name": "x", "value": 2.0}]]) \
        == (2, "trajectory 'b' lacks channel 'y'")


def test_docs_match_the_registry():
    doc = (REPO / "docs" / "estimators.md").read_text()
    assert render_markdown().strip() in doc, "regenerate with `python -m trajlens.estimators.registry docs/estimators.md`"
    readme = (REPO / "README.md").read_text()
    assert render_readme_table().strip() in readme, "paste `render_readme_table()` into the README"


def test_registry_reads_without_torch():
    import subprocess

    code = ("import sys; import trajlens.estimators.registry as r; r.render_markdown(); "
            "import trajlens.cli.advantages; print('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_token_rows_without_a_model_token_do_not_count_as_token_arrays():
    trajectories, tokens = full_frames()
    empty = tokens.with_columns(pl.col("response_mask").list.eval(pl.element() & pl.lit(False)).alias("response_mask"))
    facts = run_facts(trajectories, empty)
    assert not facts.token_arrays and not facts.critic_values
    assert facts.token_counts  # the model_tokens column still counts them
    assert not estimator_spec("gae").applies(facts) and estimator_spec("grpo").applies(facts)


def test_an_integer_too_large_for_int64_reaches_a_float_option_as_a_float(tiny):
    """`--option epsilon=100000000000000000000` is JSON's integer 1e20: torch took it as an int64 and raised."""
    from trajlens.estimators import recompute

    assert recompute(tiny.trajectories, None, "grpo", epsilon=10**20)["advantage"].abs().max() < 1e-15


@pytest.mark.parametrize(("position", "refused"), [(0, True), (1, False)])
def test_a_log_prob_missing_on_a_model_token_is_refused_not_read_as_certainty(position, refused):
    """prime-rl may log a null log-prob; read as 0 it would be probability 1. On a model token
    the optimal token baseline refuses it, naming the trajectory and token; on an observation
    token (position 1 of every response here) it is never read."""
    from trajlens.estimators import EstimatorInputError, recompute

    trajectories, tokens = full_frames()
    first = tokens["log_probs"][0].to_list()
    first[position] = None
    tokens = tokens.with_columns(pl.Series("log_probs", [first, *tokens["log_probs"].to_list()[1:]], dtype=pl.List(pl.Float32)))
    if refused:
        with pytest.raises(EstimatorInputError, match=r"behaviour log-probs \(tokens column log_probs\) of trajectory "
                                                      r"'1-a-0' has no value at token 0, a model token"):
            recompute(trajectories, tokens, "optimal_token_baseline")
    else:
        assert recompute(trajectories, tokens, "optimal_token_baseline")["advantage"].is_finite().all()


def test_the_estimators_no_store_can_feed_are_named_in_the_help_and_the_readme():
    from cli_run import run_cli

    outside = [name for name, spec in ESTIMATOR_REGISTRY.items() if not spec.from_store]
    assert outside == ["remax", "optimal_token_baseline", "tir_optimal_token_baseline"]
    shown = " ".join(run_cli("advantages", "--help", env={"COLUMNS": "200"}).stdout.split())
    assert f"{', '.join(outside)} read inputs no store holds" in shown
    readme = " ".join((Path(__file__).resolve().parents[2] / "README.md").read_text().split())
    assert "ReMax and the optimal token baselines read inputs that no log format carries into a store" in readme
