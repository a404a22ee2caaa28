"""identify_advantages: fixtures whose logged advantages were made under each convention.

The logged advantages are written by the loops transcribed from verl and TRL
(trajlens.estimators.reference), one training step at a time, in float32 as trainers log them; the
verdict must name the convention that made them.
"""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest
import torch
from trajlens.estimators.reference.trl import (
    gdpo_trl_loop_v16,
    rloo_trl_loop_v16,
    trl_sum_then_normalize,
    trl_sum_then_normalize_v16,
)
from trajlens.estimators.reference.verl import gae_loop, gdpo_verl_loop, grpo_loop, masked_whiten, rloo_loop

from trajlens.estimators import EstimatorInputError, identify_advantages

CHANNEL = pl.Struct({"name": pl.String, "value": pl.Float64})
STEPS, GROUPS, MEMBERS, LENGTH = 3, 4, 4, 8


def frames(seed: int = 0, channels: bool = False) -> tuple[pl.DataFrame, pl.DataFrame]:
    rng = np.random.default_rng(seed)
    rows, token_rows = [], []
    for step in range(1, STEPS + 1):
        for group in range(GROUPS):
            for member in range(MEMBERS):
                correct = float(rng.integers(0, 3)) / 2
                style = float(rng.integers(0, 2))
                mask = [True] * LENGTH
                mask[2] = mask[3] = False  # an observation span
                mask = mask[: int(rng.integers(5, LENGTH + 1))]
                row = {
                    "run_id": "r", "step": step, "trajectory_id": f"{step}-{group}-{member}",
                    "group_id": f"{step}:{group}", "split": "train", "reward": correct + style if channels else correct,
                    "reward_channels": [{"name": "correct", "value": correct}, {"name": "style", "value": style}]
                    if channels else [],
                    "model_tokens": sum(mask),
                }
                rows.append(row)
                token_rows.append({"run_id": "r", "step": step, "trajectory_id": row["trajectory_id"],
                                   "response_mask": mask, "values": rng.normal(size=len(mask)).tolist(),
                                   "token_rewards": None})
    trajectories = pl.DataFrame(rows, schema_overrides={"reward_channels": pl.List(CHANNEL)})
    tokens = pl.DataFrame(token_rows, schema_overrides={"values": pl.List(pl.Float32), "token_rewards": pl.List(pl.Float32)})
    return trajectories, tokens


def _per_step(trajectories: pl.DataFrame, make) -> list[float]:
    """Logged advantages, one per trajectory, made step by step by ``make(step_frame) -> (B,) tensor``."""
    out = []
    for part in trajectories.partition_by("step", maintain_order=True):
        out += make(part).double().tolist()
    return out


def _scores(part: pl.DataFrame) -> torch.Tensor:
    return torch.tensor(part["reward"].to_numpy(), dtype=torch.float32)[:, None]


def _channels(part: pl.DataFrame) -> torch.Tensor:
    values = part["reward_channels"].to_list()
    return torch.tensor([[c["value"] for c in row] for row in values], dtype=torch.float32)


def _ids(part: pl.DataFrame) -> list[str]:
    return part["group_id"].to_list()


def _with_logged(trajectories: pl.DataFrame, values: list[float]) -> pl.DataFrame:
    return trajectories.with_columns(pl.Series("logged_advantage", values, dtype=pl.Float64))


# verl allows groups of any size (one included); TRL needs num_generations per group
VERL = {"verl_grpo", "verl_grpo_eps_1e-4", "verl_rloo"}
CONVENTIONS = {
    "verl_grpo": lambda p: grpo_loop(_scores(p), torch.ones(len(p), 1), _ids(p))[:, 0],
    "verl_grpo_eps_1e-4": lambda p: grpo_loop(_scores(p), torch.ones(len(p), 1), _ids(p), epsilon=1e-4)[:, 0],
    "trl_grpo_group": lambda p: trl_sum_then_normalize_v16(_scores(p), MEMBERS, torch.ones(1)),
    "trl_grpo_group_1.5": lambda p: trl_sum_then_normalize(_scores(p), MEMBERS, torch.ones(1)),
    "trl_grpo_batch": lambda p: trl_sum_then_normalize_v16(_scores(p), MEMBERS, torch.ones(1), "batch"),
    "trl_grpo_batch_1.5": lambda p: trl_sum_then_normalize(_scores(p), MEMBERS, torch.ones(1), "batch"),
    "verl_rloo": lambda p: rloo_loop(_scores(p), torch.ones(len(p), 1), _ids(p))[:, 0],
    "trl_rloo_normalized": lambda p: rloo_trl_loop_v16(_scores(p)[:, 0], MEMBERS, True),
}


@pytest.mark.parametrize("convention", list(CONVENTIONS))
def test_names_the_outcome_convention_that_made_the_log(convention):
    trajectories, _ = frames()
    if convention in VERL:  # group 1:0 of one member tells verl's rules from TRL's
        trajectories = trajectories.filter(~pl.col("trajectory_id").is_in(["1-0-1", "1-0-2", "1-0-3"]))
    logged = _with_logged(trajectories, _per_step(trajectories, CONVENTIONS[convention]))
    found = identify_advantages(logged)
    assert found.matched, found.verdict
    assert found.best.candidate.label == convention, [(f.candidate.label, f.max_abs_diff) for f in found.candidates[:4]]
    assert found.best.max_abs_diff < 1e-6 and found.best.n == trajectories.height
    assert found.verdict.startswith(found.best.candidate.doc + ": max |diff|")
    assert f"over {trajectories.height} trajectories" in found.verdict
    if convention == "trl_grpo_group":  # with no NaN and no group of one, TRL 1.5 and verl with eps 1e-4 give the same
        assert [f.candidate.label for f in found.equivalent] == ["trl_grpo_group_1.5", "verl_grpo_eps_1e-4"]
        assert "indistinguishable here from: TRL <= 1.5 GRPO, scale_rewards=group, eps 1e-4; verl GRPO with epsilon 1e-4" in found.verdict


def test_names_gdpo_both_ways():
    trajectories, tokens = frames(1, channels=True)
    # TRL v1.6 with an unscorable completion (every channel None -> NaN)
    unscorable = trajectories["trajectory_id"] == "2-1-3"
    trajectories = trajectories.with_columns(
        pl.when(unscorable).then(pl.lit([{"name": "correct", "value": None}, {"name": "style", "value": None}],
                                        dtype=pl.List(CHANNEL))).otherwise(pl.col("reward_channels")).alias("reward_channels"))

    def trl(part):
        channels = torch.tensor([[float("nan") if c["value"] is None else c["value"] for c in row]
                                 for row in part["reward_channels"].to_list()], dtype=torch.float32)
        return gdpo_trl_loop_v16(channels, MEMBERS, torch.ones(2))

    found = identify_advantages(_with_logged(trajectories, _per_step(trajectories, trl)))
    assert found.best.candidate.label == "trl_gdpo" and found.matched, found.verdict

    plain, tokens = frames(2, channels=True)

    def verl(part):
        counts = torch.tensor(part["model_tokens"].to_numpy())
        mask = torch.arange(int(counts.max()))[None, :] < counts[:, None]
        advantages = gdpo_verl_loop(_channels(part), mask, _ids(part), torch.ones(2))
        return advantages[:, 0]

    found = identify_advantages(_with_logged(plain, _per_step(plain, verl)), tokens)
    assert found.best.candidate.label == "verl_gdpo" and found.matched, found.verdict


@pytest.mark.parametrize("whiten", [True, False])
def test_token_level_logs_name_gae_with_or_without_whitening(whiten):
    trajectories, tokens = frames(3)
    logged = []
    for part in tokens.partition_by("step", maintain_order=True):
        width = max(len(m) for m in part["response_mask"].to_list())
        mask = torch.zeros(len(part), width, dtype=torch.bool)
        values = torch.zeros(len(part), width)
        rewards = torch.zeros(len(part), width)
        reward_of = dict(zip(trajectories["trajectory_id"], trajectories["reward"]))
        for i, (m, v, tid) in enumerate(zip(part["response_mask"], part["values"], part["trajectory_id"])):
            mask[i, : len(m)] = torch.tensor(m.to_list())
            values[i, : len(v)] = torch.tensor(v.to_list())
            last = max(j for j, flag in enumerate(m.to_list()) if flag)
            rewards[i, last] = reward_of[tid]
        advantages, _ = gae_loop(rewards, values, mask, 1.0, 1.0)
        if whiten:
            advantages = masked_whiten(advantages, mask)
        logged += [advantages[i, : len(m)].tolist() for i, m in enumerate(part["response_mask"].to_list())]
    tokens = tokens.with_columns(pl.Series("logged_advantages", logged, dtype=pl.List(pl.Float32)))
    found = identify_advantages(trajectories, tokens)
    assert found.unit == "model tokens"
    assert found.best.candidate.label == ("gae_whitened" if whiten else "gae_raw"), found.verdict
    assert found.matched


def test_says_where_the_closest_departs_when_none_matches():
    trajectories, _ = frames(4)
    values = _per_step(trajectories, CONVENTIONS["verl_grpo"])
    tampered = [v + 0.5 if tid.startswith("2-3-") else v for v, tid in zip(values, trajectories["trajectory_id"])]
    found = identify_advantages(_with_logged(trajectories, tampered))
    assert not found.matched
    assert found.best.candidate.label == "verl_grpo"
    top = found.departures.row(0, named=True)
    assert (top["step"], top["group_id"]) == (2, "2:3") and found.departures.height == 1
    assert "no candidate matches" in found.verdict and "step 2 group 2:3" in found.verdict
    payload = json.loads(json.dumps(found.to_dict()))
    assert payload["best"]["estimator"] == "grpo" and payload["best"]["options"] == {}
    assert payload["best"]["n"] == STEPS * GROUPS * MEMBERS and payload["best"]["max_abs_diff"] == pytest.approx(0.5)
    assert {c["label"] for c in payload["candidates"]} >= {"verl_grpo", "trl_grpo_batch", "verl_rloo"}
    assert payload["departures"][0]["group_id"] == "2:3"


def test_without_logged_advantages_it_says_so():
    trajectories, tokens = frames()
    with pytest.raises(EstimatorInputError, match="no logged advantages"):
        identify_advantages(trajectories, tokens)
    short = tokens.with_columns(pl.lit([0.5], dtype=pl.List(pl.Float32)).alias("logged_advantages"))
    with pytest.raises(EstimatorInputError, match="logged_advantages has 1 entries but response_mask has"):
        identify_advantages(trajectories, short)


def _tiny_store(tmp_path, logged: bool):
    import trajlens
    from tinyrun import tiny_run
    from trajlens.store.layout import RunDirWriter

    run = tiny_run()
    if logged:
        import dataclasses

        import pyarrow as pa

        table = pl.from_arrow(run.trajectories)
        values = _per_step(table, CONVENTIONS["verl_grpo"])
        column = pa.array(values, pa.float64())
        index = run.trajectories.schema.get_field_index("logged_advantage")
        run = dataclasses.replace(run, trajectories=run.trajectories.set_column(
            index, run.trajectories.schema.field(index), column))
    directory = tmp_path / "run"
    with RunDirWriter(directory, run.runs) as writer:
        writer.write_run(run)
    trajlens.ingest([directory], tmp_path / "store")
    return tmp_path / "store"


def test_cli_identify_without_logged_advantages_is_one_line(tmp_path, capsys):
    from trajlens.cli._app import main

    store = _tiny_store(tmp_path, logged=False)
    assert main(["advantages", str(store), "--run", "tiny", "--identify"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no logged advantages" in err[0]


def test_cli_identify_writes_the_verdict_as_json(tmp_path, capsys):
    from trajlens.cli._app import main

    store = _tiny_store(tmp_path, logged=True)
    out = tmp_path / "verdict.json"
    assert main(["advantages", str(store), "--run", "tiny", "--identify", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "match: verl GRPO (group std, eps 1e-6)" in printed
    # distances spanning orders of magnitude are told apart (9.9e-05 and 0.159), never all "0.00"
    rows = {line.split()[0]: line.split()[1] for line in printed.splitlines()[2:] if line.startswith(("verl_", "trl_"))}
    assert rows["verl_grpo"] == "0" and rows["trl_grpo_group"] == "9.9e-05" and rows["trl_grpo_batch"] == "0.159"
    payload = json.loads(out.read_text())
    assert payload["best"]["estimator"] == "grpo" and payload["best"]["n"] == 8
    assert payload["best"]["max_abs_diff"] < 1e-6 and payload["matched"] is True


def test_every_candidate_is_a_valid_registry_call():
    from trajlens.estimators.identify import CANDIDATES
    from trajlens.estimators.registry import estimator_spec

    labels = [c.label for c in CANDIDATES]
    assert len(labels) == len(set(labels))
    for candidate in CANDIDATES:
        assert not estimator_spec(candidate.estimator).option_problems(candidate.options), candidate.label
        assert candidate.doc


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shifted", [False, True], ids=["plain", "whitened"])
def test_the_compiled_pairing_gives_numpy_s_differences(dtype, shifted):
    from trajlens.estimators import _compiled
    from trajlens.estimators.identify import _Logged

    rng = np.random.default_rng(7)
    base = rng.normal(size=5_000).astype(dtype)
    base[[3, 40]] = [np.nan, np.inf]
    index = np.sort(rng.choice(base.size, 2_000, replace=False))
    index[:2] = [3, 40]
    logged = rng.normal(size=index.size)
    logged[5] = np.nan
    shift, scale = (0.123456789, 1.987654321) if shifted else (0.0, 1.0)
    expected_values = (base[index] - shift) * scale if shifted else base[index]
    expected = np.abs(np.subtract(logged, expected_values, dtype=np.float64))
    expected[np.isnan(expected)] = np.inf
    finite = np.isfinite(expected)
    # the kernel (compiled where numba is installed, else the same loop in Python): the same IEEE
    # operations in the same order, the recomputed value rounded to the base's dtype
    kernel = _compiled.abs_diff_at or _compiled._abs_diff_at
    kind = np.result_type(base, shift, scale).type
    out = np.empty(index.size)
    kernel(logged, base, index, np.array([kind(shift)]), np.array([kind(scale)]), out)
    keys = pl.DataFrame({"run_id": ["r"], "step": [1], "trajectory_id": ["t"], "group_id": ["g"]})
    found = _Logged(keys, "model tokens", logged, np.array([index.size]))
    paired = found.paired_flat((base, shift, scale) if shifted else base, index).diff  # the path identify takes
    for diff in (out, paired):
        assert np.isinf(diff[:2]).all() and np.isinf(diff[5])
        assert np.array_equal(np.isfinite(diff), finite)
        np.testing.assert_array_max_ulp(diff[finite], expected[finite], maxulp=2)


def test_a_trajectory_s_advantage_is_paired_with_each_of_its_logged_tokens(monkeypatch):
    from trajlens.estimators import _compiled
    from trajlens.estimators.identify import _Logged

    rng = np.random.default_rng(11)
    counts = np.array([3, 0, 5, 2])
    logged = rng.normal(size=int(counts.sum()))
    logged[4] = np.nan
    keys = pl.DataFrame({"run_id": ["r"] * 4, "step": [1] * 4, "trajectory_id": list("abcd"), "group_id": ["g"] * 4})
    found = _Logged(keys, "model tokens", logged, counts)
    per_row = np.array([0.5, 9.0, np.inf, -1.25])  # an infinite recomputation (none) matches nothing
    expected = np.abs(logged - np.repeat(per_row, counts))
    expected[np.isnan(expected)] = np.inf
    compiled = found.paired_values(per_row).diff  # compiled where numba is installed
    monkeypatch.setattr(_compiled, "abs_diff_rows", None)
    assert np.array_equal(compiled, expected) and np.array_equal(found.paired_values(per_row).diff, expected)
    assert np.isinf(compiled[3:8]).all()


def test_the_compiled_histogram_counts_what_numpy_counts(monkeypatch):
    from trajlens.estimators import _compiled
    from trajlens.estimators.identify import _HISTOGRAM_SHIFT, _Accumulated, _Paired, _Rows

    rng = np.random.default_rng(3)
    diffs = [np.abs(rng.normal(scale=10.0 ** -batch, size=1_000)) for batch in range(3)]
    diffs[2][[0, 17]] = [0.0, np.inf]
    # the kernel (compiled where numba is installed, else the same loop in Python) against NumPy
    kernel = _compiled.largest_and_histogram or _compiled._largest_and_histogram
    counted = np.zeros(1 << (64 - _HISTOGRAM_SHIFT), dtype=np.int64)
    assert kernel(diffs[2], diffs[2].view(np.int64), _HISTOGRAM_SHIFT, counted) == 17
    assert np.array_equal(counted, np.bincount(diffs[2].view(np.int64) >> _HISTOGRAM_SHIFT, minlength=counted.size))

    keys = pl.DataFrame({"run_id": ["r"] * 4, "step": [1, 1, 2, 2], "trajectory_id": list("abcd"),
                         "group_id": ["g"] * 4})
    rows = _Rows.of(np.full(4, 250))

    def accumulated() -> _Accumulated:
        found = _Accumulated()
        for diff in diffs:
            found.add(_Paired(keys, diff, rows))
        return found

    either = accumulated()  # compiled where numba is installed
    monkeypatch.setattr(_compiled, "largest_and_histogram", None)
    numpy = accumulated()
    assert np.array_equal(either.histogram, numpy.histogram) and either.histogram.sum() == 3_000
    assert either.max == numpy.max == np.inf and either.worst == numpy.worst
    assert either.median() == numpy.median()
