"""Hostile logs: every case ends in a correct load or a one-line error, never a traceback or a hang.

The corpus is generated at test time (:mod:`hostile`). Most cases go through the Python API;
a sample goes through the real ``trajlens ingest`` command in a subprocess.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from hostile import MINI_V2, Case, _set, corpus  # noqa: E402

from trajlens.errors import InputError  # noqa: E402
from trajlens import limits as limits_module  # noqa: E402
from trajlens.ingest import load  # noqa: E402
from trajlens.ingest.formats import plan  # noqa: E402

CASES = corpus()
CASE_SECONDS = 20.0


def test_the_corpus_is_large_enough():
    assert len(CASES) >= 300
    assert len({case.name for case in CASES}) == len(CASES)


def _ingest_in_memory(path: Path):
    """What ``trajlens ingest`` loads, without a store: each planned source, loaded."""
    loaded = []
    for source in plan(path):
        if source.format.kind == "metrics":
            loaded.append(source.format.load(source.paths, run_id="r"))
        else:
            loaded.append(load(source.paths[0]))
    return loaded


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_hostile_input_loads_or_fails_in_one_line(tmp_path, case: Case):
    path = case.write(tmp_path)
    started = time.monotonic()
    with limits_module.using(limits_module.Limits(**case.limits) if case.limits else None):
        try:
            loaded = _ingest_in_memory(path)
            error = None
        except InputError as caught:
            loaded, error = None, caught
    assert time.monotonic() - started < CASE_SECONDS
    if error is None:
        assert not case.must_fail, f"{case.name} loaded, but no correct load exists"
        assert loaded
        return
    message = str(error)
    assert "\n" not in message and "Traceback" not in message
    message.encode("utf-8")  # printable: no lone surrogates
    assert str(tmp_path) in message  # names the file
    if case.field:
        assert error.field is not None and case.field in error.field, message


def test_lenient_mode_skips_the_bad_record_and_keeps_the_rest(tmp_path):
    good = json.dumps({"messages": [{"role": "user", "content": "u"}], "task_id": "a"})
    bad = json.dumps({"messages": [{"role": ["user"], "content": "u"}], "task_id": "b"})
    path = tmp_path / "chat.jsonl"
    path.write_text(good + "\n" + bad + "\n" + good.replace('"a"', '"c"') + "\n")
    with pytest.raises(InputError, match="record message 0: field 'role'"):
        load(path)
    run = load(path, strict=False)
    assert run.trajectories.column("task_id").to_pylist() == ["a", "c"]
    assert len(run.problems) == 1 and run.problems[0].field == "role"


def test_a_task_id_that_is_a_path_never_reads_outside_the_log_folder(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "report.json").write_text(json.dumps({"resolved": True}))
    for task in (str(outside), "../../outside"):
        log = tmp_path / "run" / "logs" / "x" / "task-1.traj.json"
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(json.dumps(_set(MINI_V2, "instance_id", task)))
        run = load(log)
        assert run.trajectories.column("resolved").to_pylist() == [None]
        assert run.trajectories.column("task_id").to_pylist() == [task]


def test_a_safe_task_id_still_finds_its_verdict(tmp_path):
    log = tmp_path / "run" / "task-1" / "task-1.traj.json"
    log.parent.mkdir(parents=True)
    log.write_text(json.dumps(MINI_V2))
    report = tmp_path / "run" / "logs" / "task-1" / "report.json"
    report.parent.mkdir(parents=True)
    report.write_text(json.dumps({"task-1": {"resolved": True}}))
    assert load(log).trajectories.column("resolved").to_pylist() == [True]


def test_invalid_utf8_in_a_parquet_run_is_refused(tmp_path, tiny_run_dir):
    import pyarrow as pa
    import pyarrow.parquet as pq

    import trajlens
    from trajlens.store.layout import table_files

    for table, column in (("tool_calls", "command"), ("trajectories", "task_id"), ("tool_calls", "observation")):
        run_dir = tmp_path / f"run-{table}-{column}"
        import shutil

        shutil.copytree(tiny_run_dir, run_dir)
        file = table_files(run_dir, table)[0]
        data = pq.read_table(file)
        values = data.column(column).combine_chunks().cast(pa.binary()).to_pylist()
        values[1] = b"bad \xff\xfe"
        index = data.schema.get_field_index(column)
        data = data.set_column(index, data.schema.field(index), pa.array(values, pa.binary()).view(pa.string()))
        pq.write_table(data, file)
        with pytest.raises(InputError) as caught:
            trajlens.ingest([run_dir], tmp_path / f"store-{table}-{column}")
        assert (caught.value.file, caught.value.record, caught.value.field) == (str(file), 1, column)
        assert "UTF-8" in str(caught.value)
        assert not (tmp_path / f"store-{table}-{column}" / "runs").exists() or not any(
            (tmp_path / f"store-{table}-{column}" / "runs").iterdir())


CLI_SAMPLE = [case for case in CASES if case.name in {
    "openhands-v0:2.cause=object", "openai-chat:messages.3.return_code=int>64bit", "swe-agent:trajectory.0.action=surrogate",
    "deep arguments string", "metrics step as a string", "catastrophic action_regex", "openai-chat:reward=int>64bit",
    "instance_id absolute",
}]


@pytest.mark.slow
@pytest.mark.parametrize("case", CLI_SAMPLE, ids=[case.name for case in CLI_SAMPLE])
def test_hostile_input_through_the_cli(tmp_path, case: Case):
    path = case.write(tmp_path / "in")
    command = [sys.executable, "-m", "trajlens", "ingest", str(path), "--store", str(tmp_path / "store")]
    for name, value in case.limits.items():
        command += ["--limit", f"{name}={value}"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in done.stderr
    assert done.returncode in (0, 1), done.stderr
    if case.must_fail:
        assert done.returncode == 1
    if done.returncode == 1:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and str(path) in lines[0], done.stderr


STORE_SAMPLE = [case for case in CASES if case.must_fail][::5]


@pytest.mark.slow
def test_a_failed_ingest_leaves_the_store_as_it_was(tmp_path, tiny_run_dir):
    """Hostile inputs that must fail, ingested into a store that already holds a run."""
    import hashlib

    import trajlens

    store = tmp_path / "store"
    trajlens.ingest([tiny_run_dir], store)

    def snapshot() -> dict[str, str]:
        return {str(p.relative_to(store)): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted(store.rglob("*")) if p.is_file() and ".staging" not in p.parts}

    before = snapshot()
    assert len(STORE_SAMPLE) >= 10
    for index, case in enumerate(STORE_SAMPLE):
        path = case.write(tmp_path / f"case{index}")
        with limits_module.using(limits_module.Limits(**case.limits) if case.limits else None):
            with pytest.raises(InputError):
                trajlens.ingest([path], store)
        assert snapshot() == before, case.name


@pytest.mark.parametrize("item, message", [
    ("depth=inf", "--limit depth: expected a positive number up to 100,000, found 'inf'"),
    ("depth=0.5", "--limit depth: expected a whole number of levels, found '0.5'"),
    ("field_mb=1e400", "--limit field_mb: expected a positive number up to 1,048,576, found '1e400'"),
    ("record_mb=nan", "--limit record_mb: expected a positive number up to 1,048,576, found 'nan'"),
])
def test_a_limit_must_be_a_number_a_reader_can_hold(item, message):
    from trajlens.errors import ConfigError
    from trajlens.limits import Limits

    with pytest.raises(ConfigError) as caught:
        Limits.parse([item])
    assert str(caught.value) == message
    assert Limits.parse(["depth=1000", "field_mb=1024"]).field_bytes == 1 << 30


@pytest.mark.parametrize("fields, message", [
    ({"depth": "x"}, "Limits depth: expected a number, found 'x'"),
    ({"depth": 2.5}, "Limits depth: expected a whole number of levels, found 2.5"),
    ({"record_mb": -1}, "Limits record_mb: expected a positive number up to 1,048,576, found -1"),
    ({"field_mb": float("nan")}, "Limits field_mb: expected a positive number up to 1,048,576, found nan"),
    ({"regex_seconds": True}, "Limits regex_seconds: expected a number, found True"),
])
def test_limits_made_in_python_are_held_to_what_the_command_line_takes(fields, message):
    from trajlens.errors import ConfigError
    from trajlens.limits import Limits

    with pytest.raises(ConfigError) as caught:
        Limits(**fields)
    assert str(caught.value) == message


def test_limits_that_are_no_limits_are_refused_before_ingest_reads(tmp_path, tiny_run_dir):
    import trajlens
    from trajlens.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^limits: expected Limits\(\.\.\.\) \(from trajlens.limits\), got dict$"):
        trajlens.ingest([tiny_run_dir], tmp_path / "store", limits={"depth": 3})
    assert not (tmp_path / "store").exists()
