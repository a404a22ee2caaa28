"""SkyRL: evaluation dumps written by skyrl-train's own dump function, and a generator output."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from cli_run import run_cli  # noqa: E402
from end_to_end import through_every_surface  # noqa: E402

from trajlens.errors import InputError  # noqa: E402
from trajlens.ingest import formats, load  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data" / "skyrl"
EXPORT, GENERATOR = DATA / "export", DATA / "generator_output.json"


def test_eval_dumps_are_validation_rollouts_at_their_step_grouped_by_prompt():
    assert [s.format.name for s in formats.plan(EXPORT)] == ["skyrl"]
    run = load(EXPORT)
    rows = [(r["trajectory_id"], r["step"], r["split"], r["reward"], r["exit_status"], r["response_text"])
            for r in run.trajectories.to_pylist()]
    assert rows == [
        ("global_step_2_evals/gsm8k/1", 2, "val", 1.0, "stop", "42 </s>"),
        ("global_step_2_evals/gsm8k/2", 2, "val", 0.0, "stop", "48 </s>"),
        ("global_step_2_evals/primes_easy/1", 2, "val", 1.0, "stop", "7 </s>"),
        ("global_step_2_evals/primes_easy/2", 2, "val", 0.0, "length", "9 </s>"),
    ]
    groups = run.trajectories.column("group_id").to_pylist()
    assert groups[0] == groups[1] != groups[2] == groups[3]
    assert groups[0].startswith("gsm8k/") and groups[2].startswith("primes/easy/")
    assert run.tool_calls.num_rows == 0


def test_an_eval_row_s_id_is_the_same_loaded_alone_or_with_its_folder(tmp_path):
    export = tmp_path / "export"
    shutil.copytree(EXPORT, export)
    dump = next(export.rglob("primes_easy.jsonl"))
    alone = load(dump).trajectories.column("trajectory_id").to_pylist()
    assert alone == ["global_step_2_evals/primes_easy/1", "global_step_2_evals/primes_easy/2"]
    assert set(alone) <= set(load(export).trajectories.column("trajectory_id").to_pylist())


@pytest.mark.parametrize("text, found", [
    ("", "no records, expected evaluation rows or a generator output, found an empty file"),
    ('{"foo": 1}\n', "record 1: field 'input_prompt': expected a string, found no such key"),
], ids=["empty", "other-records"])
def test_a_data_source_s_eval_rows_gone_bad_are_named_not_left_out(tmp_path, text, found):
    """Every .jsonl in a global_step_<N>_evals folder but the aggregated metrics is a data source's rows."""
    export = tmp_path / "export"
    shutil.copytree(EXPORT, export)
    dump = next(export.rglob("gsm8k.jsonl"))
    dump.write_text(text)
    done = run_cli("ingest", export, "--store", tmp_path / "store")
    assert done.returncode == 1 and not (tmp_path / "store").exists()
    assert done.stderr == f"error: {dump}: {found}\n"
    lenient = run_cli("ingest", export, "--store", tmp_path / "store", "--lenient")
    assert lenient.returncode == 0 and lenient.stderr == f"skipped: {dump}: {found}\n"
    run = load(export, strict=False)
    assert run.trajectories.column("trajectory_id").to_pylist() == [
        "global_step_2_evals/primes_easy/1", "global_step_2_evals/primes_easy/2"]


@pytest.mark.parametrize("change, found", [(lambda row: row.update(score=None), "null"),
                                           (lambda row: row.pop("score"), "no such key")])
def test_an_eval_row_without_its_score_is_named(tmp_path, change, found):
    export = tmp_path / "export"
    shutil.copytree(EXPORT, export)
    dump = next(export.rglob("gsm8k.jsonl"))
    rows = [json.loads(line) for line in dump.read_text().splitlines()]
    change(rows[1])
    dump.write_text("".join(json.dumps(row) + "\n" for row in rows))
    with pytest.raises(InputError, match=f"record 2: field 'score': expected a finite number, found {found}$") as caught:
        load(export)
    assert str(caught.value).startswith(f"{dump}: record 2: ")


def test_a_generator_output_gives_token_arrays_grouped_by_instance():
    run = load(GENERATOR)
    rows = [(r["trajectory_id"], r["group_id"], r["reward"], r["model_tokens"]) for r in run.trajectories.to_pylist()]
    assert rows == [("q1_0", "q1", 1.0, 2), ("q1_1", "q1", 0.0, 2)]
    tokens = {t["trajectory_id"]: t for t in run.tokens.to_pylist()}
    assert tokens["q1_0"]["response_mask"] == [True, True, False]
    assert tokens["q1_0"]["token_rewards"] == [0.0, 1.0, 0.0]
    assert tokens["q1_1"]["log_probs"] == pytest.approx([-1.5, -0.2, 0.0])


@pytest.mark.parametrize("change, field", [
    (lambda o: o["loss_masks"].pop(), "loss_masks"),
    (lambda o: o["loss_masks"][0].__setitem__(0, 2), "loss_masks[0][0]"),
    (lambda o: o["loss_masks"][1].__setitem__(2, "no"), "loss_masks[1][2]"),
    (lambda o: o["trajectory_ids"].__setitem__(1, "q1_1"), "trajectory_ids"),
    (lambda o: o["rewards"][0].__setitem__(0, "high"), "rewards"),
])
def test_a_bad_generator_output_is_named(tmp_path, change, field):
    output = json.loads(GENERATOR.read_text())
    change(output)
    path = tmp_path / "out.json"
    path.write_text(json.dumps(output))
    with pytest.raises(InputError) as caught:
        load(path)
    assert caught.value.field == field


def test_skyrl_dumps_ingest_classify_report_and_check(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(EXPORT, run / "export")
    shutil.copy(GENERATOR, run)
    store, _ = through_every_surface(run, tmp_path, nothing_to_check=True)  # no tool calls, no scalars
    counts = store.sql("SELECT split, count(*) AS n FROM trajectories GROUP BY split ORDER BY split")
    assert counts.rows() == [("train", 2), ("val", 4)]
