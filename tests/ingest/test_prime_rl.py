"""prime-rl training batches, encoded as prime-rl's filesystem transport encodes them."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from end_to_end import through_every_surface  # noqa: E402

from trajlens.errors import InputError  # noqa: E402
from trajlens.ingest import formats, load  # noqa: E402

pytest.importorskip("msgpack")

DATA = Path(__file__).resolve().parents[1] / "data" / "prime_rl" / "outputs"
RUN = DATA / "run-1"


def test_examples_grouped_by_prompt_with_their_logged_advantages():
    assert [s.format.name for s in formats.plan(DATA)] == ["prime-rl"]
    run = load(RUN)
    assert run.runs.column("name").to_pylist() == ["run-1"]
    rows = [(r["trajectory_id"], r["step"], r["group_id"], r["task_id"], r["model_tokens"], r["logged_advantage"])
            for r in run.trajectories.to_pylist()]
    assert rows[:4] == [("0/0", 0, "0:p0", "p0", 2, 0.5), ("0/1", 0, "0:p0", "p0", 1, -0.5),
                        ("0/2", 0, "0:p1", "p1", 3, 0.0), ("0/3", 0, "0:p1", "p1", 1, 0.0)]
    assert rows[7] == ("1/3", 1, "1:p1", "p1", 1, None)
    tokens = run.tokens.to_pylist()
    # prompt [1, 2, 3] untrained, completion [10, 11, 12] with its last token masked
    assert tokens[0]["response_mask"] == [False, False, False, True, True, False]
    assert tokens[0]["logged_advantages"] == [0.0, 0.0, 0.0, 0.5, 0.5, 0.0]
    assert tokens[0]["log_probs"] == [0.0, 0.0, 0.0, -0.5, -0.5, -0.5]
    assert tokens[7]["logged_advantages"] is None


def test_one_batch_file_loads_alone():
    run = load(RUN / "rollouts" / "step_1" / "rollouts.bin")
    assert run.trajectories.column("step").to_pylist() == [1, 1, 1, 1]


@pytest.mark.parametrize("data, message", [
    (b"\xc1", "not a msgpack training batch, expected msgpack, found a byte that begins no msgpack value"),
    (b"\x91" * 100_000, "found arrays or maps nested deeper than the decoder allows"),
    (b"\x92\x01", "found Unpack failed: incomplete input"),
    (b"\x93\x91\x93\x90\x90\x90\x01\x02", "example 0"),  # an example of three fields
    (b"\x91\x01", "a TrainingBatch"),
])
def test_a_broken_batch_is_named(tmp_path, data, message):
    shutil.copytree(RUN, tmp_path / "run")
    (tmp_path / "run" / "rollouts" / "step_1" / "rollouts.bin").write_bytes(data)
    with pytest.raises(InputError) as caught:
        load(tmp_path / "run")
    assert "step_1" in str(caught.value) and message in str(caught.value)
    assert load(tmp_path / "run", strict=False).trajectories.num_rows == 4


def with_step_1(tmp_path, examples):
    """A copy of the run whose step 1 batch holds ``examples`` (prime-rl's array form)."""
    import msgpack

    shutil.copytree(RUN, tmp_path / "run")
    batch = msgpack.packb([examples, 1.0])
    (tmp_path / "run" / "rollouts" / "step_1" / "rollouts.bin").write_bytes(batch)
    return tmp_path / "run"


@pytest.mark.parametrize("mask, found", [([1, 5], "found 5"), ([True, "no"], "found 'no'")])
def test_a_completion_mask_entry_that_is_no_flag_is_named(tmp_path, mask, found):
    run = with_step_1(tmp_path, [[[1, 2], [1, 1], [10, 11], mask, [-0.5, -0.5], 1.0]])
    with pytest.raises(InputError) as caught:
        load(run)
    message = str(caught.value)
    assert "step_1" in message and "record example 0: field 'completion_mask[1]'" in message
    assert f"expected true, false, 0 or 1, {found}" in message and "\n" not in message


def test_a_null_completion_logprob_stays_null(tmp_path):
    run = with_step_1(tmp_path, [[[1, 2], [1, 1], [10, 11], [True, 1], [None, -0.5], 1.0]])
    tokens = [t for t in load(run).tokens.to_pylist() if t["trajectory_id"] == "1/0"]
    assert tokens[0]["response_mask"] == [False, False, True, True]
    assert tokens[0]["log_probs"] == [0.0, 0.0, None, -0.5]


def test_prime_rl_batches_ingest_report_and_check(tmp_path):
    # its batches log advantages but no reward: no estimator has anything to recompute them from
    store, _ = through_every_surface(DATA, tmp_path, nothing_to_check=True)
    logged = store.sql("SELECT count(*) AS n FROM tokens WHERE logged_advantages IS NOT NULL")["n"][0]
    assert logged == 7
