"""A format is recognised from its records, whatever holds them; a file of no known format is
one line naming the formats it came closest to."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from swe_agent_dataset_fixture import ROWS, write_jsonl  # noqa: E402

from trajlens.errors import InputError  # noqa: E402
from trajlens.ingest import formats, load  # noqa: E402
from trajlens.ingest._probe import Probe, first_record_keys  # noqa: E402


@pytest.mark.parametrize("text, keys", [
    ('[{"a": {"x": 1}, "b": [1, {"y": 2}], "c": "s:\\"q"}, {"z": 1}]', ["a", "b", "c"]),
    ('{"a": 1, "b": {"c": 2}, "d"', ["a", "b"]),  # cut short: the keys before the cut
    ('\ufeff {"k": []}\n{"other": 1}', ["k"]),
    ("[[1, 2]]", []),
    ('"text"', []),
    ("", []),
])
def test_first_record_keys(text, keys):
    assert first_record_keys(text) == keys


def _calls(run):
    return [(c["turn"], c["tool_name"], c["command"], c["observation"]) for c in run.tool_calls.to_pylist()]


def test_nebius_rows_load_alike_from_a_json_array_and_jsonl(tmp_path):
    array = tmp_path / "rows.json"
    array.write_text(json.dumps(ROWS))
    assert [s.format.name for s in formats.plan(array)] == ["swe-agent-dataset"]
    from_array, from_lines = load(array), load(write_jsonl(tmp_path / "rows.jsonl"))
    assert from_array.trajectories.column("trajectory_id").to_pylist() == [
        "astropy__astropy-12907/swe-agent-llama-70b/0", "astropy__astropy-12907/swe-agent-llama-8b/1"]
    assert from_array.trajectories.drop(["source"]).equals(from_lines.trajectories.drop(["source"]))
    assert _calls(from_array) == _calls(from_lines) and len(_calls(from_array)) == 6


def test_a_folder_of_json_arrays_is_one_run_of_the_dataset(tmp_path):
    for name in ("a", "b"):
        (tmp_path / "rows" / name).mkdir(parents=True)
        (tmp_path / "rows" / name / "part.json").write_text(json.dumps(ROWS))
    assert [s.format.name for s in formats.plan(tmp_path / "rows")] == ["swe-agent-dataset"]


def test_a_near_miss_names_the_closest_format_and_what_it_lacks(tmp_path):
    path = tmp_path / "near.json"
    path.write_text(json.dumps([{"instance_id": "a", "model_name": "m", "steps": []}]))
    with pytest.raises(InputError) as caught:
        formats.plan(path)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: no known format; closest: swe-agent-dataset (")
    assert "lacks target, trajectory" in message and "found records with keys instance_id, model_name, steps" in message
    assert [c.format.name for c in formats.closest(Probe(path))] == ["swe-agent-dataset", "harbor"]  # shares "steps"


def test_a_near_miss_with_every_key_of_a_format_says_its_values_are_not_that_formats(tmp_path):
    path = tmp_path / "near.jsonl"
    path.write_text(json.dumps({"messages": "not a list"}) + "\n")
    with pytest.raises(InputError) as caught:
        formats.plan(path)
    message = str(caught.value)
    assert "closest: openai-chat (conversations: messages of role, content, tool_calls; has all its keys, but their " \
           "values are not this format's)" in message
    assert "lacks )" not in message and "lacks ;" not in message


def test_a_file_near_no_format_lists_every_format_and_its_keys(tmp_path):
    path = tmp_path / "other.json"
    path.write_text(json.dumps([{"foo": 1}]))
    with pytest.raises(InputError, match=r"expected a log of a known format \(parquet, .*found a file of no known format \(records with keys foo\)$"):
        formats.plan(path)


PRIME_HOSTED_PAGE = Path(__file__).resolve().parents[1] / "data" / "prime_hosted" / "rollouts_step_10.json"


@pytest.mark.parametrize("container", ["array", "jsonl", "page"])
def test_prime_hosted_samples_are_not_taken_for_verifiers_rows_in_any_container(tmp_path, container):
    samples = json.loads(PRIME_HOSTED_PAGE.read_text())["samples"]
    path = tmp_path / ("samples.jsonl" if container == "jsonl" else "samples.json")
    if container == "jsonl":
        path.write_text("".join(json.dumps(s) + "\n" for s in samples))
    else:
        path.write_text(json.dumps(samples if container == "array" else {"run_id": "r", "samples": samples, "total": 8,
                                                                         "page": 1, "limit": 100, "total_pages": 1}))
    assert [s.format.name for s in formats.plan(path)] == ["prime-hosted"]
    # the same rows without a step and an advantage are verifiers' RolloutOutput rows
    rows = [{k: v for k, v in s.items() if k not in ("step", "advantage")} for s in samples]
    path.write_text(json.dumps(rows))
    assert [s.format.name for s in formats.plan(path)] == ["verifiers"]


def test_a_sample_without_its_problem_id_names_prime_hosted_as_closest(tmp_path):
    path = tmp_path / "near.json"
    path.write_text(json.dumps([{"step": 3, "completion": [], "reward": 1.0, "advantage": 0.5, "task": "t"}]))
    with pytest.raises(InputError) as caught:
        formats.plan(path)
    assert "no known format; closest: prime-hosted (" in str(caught.value)
    assert "problem_id or example_id" in str(caught.value) and "lacks example_id, problem_id)" in str(caught.value)


@pytest.mark.parametrize("name, first, second", [
    ("metrics.jsonl", {"_step": 1, "actor/lr": 0.1, "note/x": "y" * 2000}, {"_step": 2, "actor/lr": 0.2}),
    ("chat.jsonl", {"messages": [{"role": "user", "content": "y" * 2000}, {"role": "assistant", "content": "a"}]},
     {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "b"}]}),
])
def test_a_first_line_past_the_record_limit_is_detected_and_refused_by_its_loader(tmp_path, name, first, second):
    """Detection reads the first line's shape whatever its size: the loader names the limit, and
    --lenient skips that line and ingests the rest."""
    from cli_run import run_cli

    log = tmp_path / name
    log.write_text(json.dumps(first) + "\n" + json.dumps(second) + "\n")
    limit = ("--limit", "record_mb=0.001")
    strict = run_cli("ingest", log, "--store", tmp_path / "strict", *limit)
    assert strict.returncode == 1 and "record line 1: expected a line of at most 1,048 bytes" in strict.stderr
    lenient = run_cli("ingest", log, "--store", tmp_path / "lenient", *limit, "--lenient")
    assert lenient.returncode == 0 and lenient.stdout.strip().endswith("skipped 1 (each named above)"), lenient.stderr
