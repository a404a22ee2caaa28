"""Prime Intellect hosted-training samples: a page as ``prime train rollouts`` prints it (the older
samples) and a Parquet sample file of the current writer, built by ``make_fixture.py`` beside them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1]))

from _tolerance import assert_close_ulp  # noqa: E402
from cli_run import run_cli  # noqa: E402
from end_to_end import through_every_surface  # noqa: E402

from trajlens.errors import InputError  # noqa: E402
from trajlens.ingest import formats, load  # noqa: E402
from trajlens.ingest._probe import Probe  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data" / "prime_hosted"
PAGE = DATA / "rollouts_step_10.json"
PARQUET = DATA / "step_20.parquet"
RUN_ID = "cmhx4k2pq0007ra01swefix9"


def _page() -> dict:
    return json.loads(PAGE.read_text())


def _rows(run, *keys):
    return [tuple(r[k] for k in keys) for r in run.trajectories.to_pylist()]


def test_a_page_of_samples_is_grouped_by_step_and_example_with_its_logged_advantages():
    assert "total_pages" not in Probe(PAGE).record_keys  # the page is longer than the head: its tail says so
    assert [s.format.name for s in formats.plan(PAGE)] == ["prime-hosted"]
    run = load(PAGE)
    assert run.runs.column("name").to_pylist() == [RUN_ID] and run.runs.column("run_id").to_pylist() == [RUN_ID]
    assert _rows(run, "trajectory_id", "step", "task_id", "group_id", "reward", "model_tokens")[:3] == [
        ("10/17/0", 10, "17", "10:17", 1.0, 248), ("10/17/1", 10, "17", "10:17", 0.1, 235),
        ("10/17/2", 10, "17", "10:17", 0.0, 73)]
    samples = _page()["samples"]
    assert [r["logged_advantage"] for r in run.trajectories.to_pylist()] == [s["advantage"] for s in samples]
    assert run.trajectories.column("reward_channels")[1].as_py() == [
        {"name": "tests_passed", "value": 0.0}, {"name": "format_ok", "value": 1.0}]
    first = [(c["turn"], c["tool_name"], c["command"], c["return_code"], c["assistant_text"])
             for c in run.tool_calls.to_pylist() if c["trajectory_id"] == "10/17/0"]
    assert first == [(0, "bash", "pytest -q tests/test_pages.py", 1, "Let me reproduce the failure first."),
                     (1, "str_replace_editor", None, None, None),
                     (2, "str_replace_editor", None, None, "The slice is wrong; fix it."),
                     (3, "bash", "pytest -q tests/test_pages.py", 0, None)]
    edit = run.tool_calls.to_pylist()[2]
    assert json.loads(edit["arguments"]) == {"command": "str_replace", "path": "/repo/utils/pages.py",
                                             "old_str": "items[start:end - 1]", "new_str": "items[start:end]"}
    assert edit["observation"] == "The file /repo/utils/pages.py has been edited."
    assert _rows(run, "num_turns", "response_text")[0] == (5, "DONE: fixed and the tests pass.")


def test_the_parquet_samples_of_the_current_writer():
    table = pq.read_table(PARQUET)
    assert table.schema.field("completion").type == pa.string() and table.schema.field("created_at").type == pa.timestamp("us", tz="UTC")
    assert [s.format.name for s in formats.plan(PARQUET)] == ["prime-hosted"]
    run = load(PARQUET)
    assert json.loads(run.runs.column("config")[0].as_py()) == {"env_names": ["swe-repair"]}
    rows = _rows(run, "trajectory_id", "step", "task_id", "group_id", "model_tokens", "logged_advantage")
    assert [r[:4] for r in rows[3:5]] == [("20/3", 20, "17", "20:17"), ("20/4", 20, "42", "20:42")]
    assert [r[4] for r in rows] == table.column("num_output_tokens").to_pylist()
    assert [r[5] for r in rows] == table.column("advantage").to_pylist()
    # the advantages are the rewards less their group's mean: each group's sum is zero
    for group in ("20:17", "20:42"):
        advantages = [r["logged_advantage"] for r in run.trajectories.to_pylist() if r["group_id"] == group]
        rewards = [r["reward"] for r in run.trajectories.to_pylist() if r["group_id"] == group]
        assert_close_ulp(advantages, [r - sum(rewards) / 4 for r in rewards])
    think = [(c["tool_name"], json.loads(c["arguments"])) for c in run.tool_calls.to_pylist() if c["trajectory_id"] == "20/5"]
    assert think[:2] == [("think", {"thought": "Maybe the tests are wrong."}), ("think", {"thought": "Or the issue is elsewhere."})]


def test_a_folder_of_pages_and_parquet_files_is_one_run():
    assert [(s.format.name, s.paths) for s in formats.plan(DATA)] == [("prime-hosted", [DATA])]
    run = load(DATA)
    assert run.runs.column("name").to_pylist() == [RUN_ID]
    assert run.trajectories.num_rows == 16 and set(run.trajectories.column("step").to_pylist()) == {10, 20}


def test_the_samples_load_alike_from_jsonl_a_json_array_and_pages_split_in_two(tmp_path):
    samples = _page()["samples"]
    lines, array = tmp_path / "samples.jsonl", tmp_path / "samples.json"
    lines.write_text("".join(json.dumps(s) + "\n" for s in samples))
    array.write_text(json.dumps(samples))
    pages = tmp_path / "pages"
    pages.mkdir()
    for number, part in ((1, samples[:5]), (2, samples[5:])):
        page = {"run_id": RUN_ID, "samples": part, "total": 8, "page": number, "limit": 5, "total_pages": 2}
        (pages / f"page_{number}.json").write_text(json.dumps(page, indent=2))
    expected = load(PAGE).trajectories.drop(["source", "run_id"])
    for path in (lines, array, pages):
        assert [s.format.name for s in formats.plan(path)] == ["prime-hosted"], path  # not verifiers' rows
        assert load(path).trajectories.drop(["source", "run_id"]).equals(expected), path
    assert load(pages).runs.column("name").to_pylist() == [RUN_ID]
    assert load(lines).runs.column("name").to_pylist() == ["samples"]  # the older samples name no run


@pytest.mark.parametrize("change, field", [
    (lambda s: s.__setitem__("reward", "high"), "reward"),
    (lambda s: s.__setitem__("step", -1), "step"),
    (lambda s: s.pop("example_id"), "problem_id"),
    (lambda s: s["metrics"].__setitem__("tests_passed", float("inf")), "metrics.tests_passed"),
    (lambda s: s.__setitem__("trajectory", [{"num_output_tokens": "many"}]), "trajectory[0].num_output_tokens"),
])
def test_a_bad_sample_is_one_line_naming_file_record_and_field(tmp_path, change, field):
    page = _page()
    change(page["samples"][3])
    path = tmp_path / "page.json"
    path.write_text(json.dumps(page))
    with pytest.raises(InputError) as caught:
        load(path)
    assert caught.value.field == field and caught.value.record == "0, sample 3"
    assert load(path, strict=False).trajectories.num_rows == 7
    done = run_cli("ingest", path, "--store", tmp_path / "store")
    assert done.returncode != 0 and not done.stdout.strip()
    (line,) = done.stderr.strip().splitlines()
    assert str(path) in line and "record 0, sample 3" in line and f"field '{field}'" in line


def test_a_parquet_row_whose_json_column_is_not_json_names_the_column(tmp_path):
    table = pq.read_table(PARQUET)
    metrics = table.column("metrics").to_pylist()
    metrics[2] = "{not json"
    path = tmp_path / "step_20.parquet"
    pq.write_table(table.set_column(table.schema.get_field_index("metrics"), "metrics", pa.array(metrics)), path)
    with pytest.raises(InputError) as caught:
        load(path)
    assert (caught.value.record, caught.value.field) == ("2", "metrics") and "\n" not in str(caught.value)


def test_prime_hosted_samples_ingest_classify_report_and_check(tmp_path):
    store, classes = through_every_surface(DATA, tmp_path)
    assert classes.rows()[:5] == [("bash", "test_targeted"), ("str_replace_editor", "view"),
                                  ("str_replace_editor", "edit"), ("bash", "test_targeted"), ("think", "think")]
    counts = dict(store.sql("SELECT k.primary_class, count(*) AS n FROM call_classes k GROUP BY 1").rows())
    assert counts == {"test_targeted": 21, "view": 11, "edit": 11, "think": 7, "quick_check": 3}
    done = run_cli("advantages", tmp_path / "store", "--run", RUN_ID, "--identify", "--json", tmp_path / "id.json")
    assert done.returncode == 0, done.stderr
    best = json.loads((tmp_path / "id.json").read_text())["best"]
    # the orchestrator's advantage is the reward less its group's mean, with no scaling
    assert (best["estimator"], best["n"]) == ("dr_grpo", 16) and best["max_abs_diff"] < 1e-6


def test_a_damaged_parquet_page_is_one_line_and_lenient_skips_the_rest_of_the_file(tmp_path):
    data = bytearray(PARQUET.read_bytes())
    data[:5] = bytes(5)  # the first column chunk's page header
    path = tmp_path / "step_20.parquet"
    path.write_bytes(bytes(data))
    with pytest.raises(InputError) as caught:
        load(path)
    assert str(caught.value).startswith(f"{path}: record 0: a damaged Parquet page") and "\n" not in str(caught.value)
    assert load(path, strict=False).trajectories.num_rows == 0
