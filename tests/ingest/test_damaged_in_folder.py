"""A damaged file in a folder of logs stops ingest with a one-line error naming it: detection
leaves a file out only when it reads as something else, never because it cannot be read."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cli_run import run_cli, run_cli_subprocess

DATA = Path(__file__).resolve().parents[1] / "data"
REAL = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "real"  # as tests/conftest.py names it


def _cut(path: Path, size: int) -> None:
    path.write_bytes(path.read_bytes()[:size])


@pytest.mark.parametrize("damaged, size, reason", [
    ("step_20.parquet", 500, "not a readable Parquet file"),
    ("rollouts_step_10.json", 100, "JSON cut short"),
])
def test_a_cut_file_among_surveyed_logs_is_an_error(tmp_path, damaged, size, reason):
    folder = tmp_path / "hosted"
    shutil.copytree(DATA / "prime_hosted", folder, ignore=shutil.ignore_patterns("*.py"))
    _cut(folder / damaged, size)
    done = run_cli("ingest", folder, "--store", tmp_path / "store")
    assert done.returncode == 1
    assert done.stderr.startswith(f"error: {folder / damaged}: {reason}") and done.stderr.count("\n") == 1
    assert not (tmp_path / "store").exists()


@pytest.mark.parametrize("log", ["prime_hosted/rollouts_step_10.json", "a mini-swe-agent trajectory"])
def test_a_single_log_cut_short_is_said_to_be_not_of_no_known_format(tmp_path, log):
    """Its keys before the cut came close to a format's, and the error named that format's missing keys."""
    path = tmp_path / "log.traj.json"
    if log.endswith(".json"):
        path.write_bytes((DATA / log).read_bytes()[:1500])
    else:  # cut inside its info, before its messages and trajectory_format
        path.write_text('{"info": {"exit_status": "Submitted", "submission": "diff --git a/x.py')
    done = run_cli("ingest", path, "--store", tmp_path / "store")
    assert done.returncode == 1
    assert done.stderr.startswith(f"error: {path}: JSON cut short, expected JSON that closes its last record")
    assert done.stderr.count("\n") == 1 and not (tmp_path / "store").exists()


def _name_not_utf8(path: Path) -> None:
    """Overwrite the first byte of a column's name in the footer's schema with 0x80: the file
    still opens as Parquet, and decoding its column paths raises UnicodeDecodeError."""
    import pyarrow.parquet as pq

    name = pq.read_schema(path).names[-1].encode()
    data = bytearray(path.read_bytes())
    footer = len(data) - 8 - int.from_bytes(data[-8:-4], "little")  # the schema comes first in it
    data[data.index(name, footer)] = 0x80
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("source, damaged, reason", [
    ("prime_hosted", "step_20.parquet", "not a readable Parquet file"),
    ("swe_agent_dataset", "train-00000-of-00001.parquet", "not a readable Parquet file"),
    # the TRL loader reads the table without the column paths: the names are checked with its text
    ("trl/grpo-run", "completions/completions_00001.parquet", "a column name that is not UTF-8"),
])
def test_a_column_name_that_is_not_utf8_is_an_error(tmp_path, source, damaged, reason):
    folder = tmp_path / "logs"
    shutil.copytree(DATA / source, folder, ignore=shutil.ignore_patterns("*.py"))
    _name_not_utf8(folder / damaged)
    done = run_cli("ingest", folder, "--store", tmp_path / "store")
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith(f"error: {folder / damaged}: {reason}") and done.stderr.count("\n") == 1
    assert "utf-8" in done.stderr and not (tmp_path / "store").exists()


def test_a_cut_shard_in_a_folder_a_loader_reads_is_an_error(tmp_path):
    folder = tmp_path / "dataset"
    folder.mkdir()
    shard = DATA / "swe_agent_dataset" / "train-00000-of-00001.parquet"
    shutil.copy(shard, folder / "train-00000-of-00002.parquet")
    shutil.copy(shard, folder / "train-00001-of-00002.parquet")
    _cut(folder / "train-00001-of-00002.parquet", 700)
    done = run_cli("ingest", folder, "--store", tmp_path / "store")
    assert done.returncode == 1
    assert done.stderr.startswith(f"error: {folder / 'train-00001-of-00002.parquet'}: not a readable Parquet file")


@pytest.mark.parametrize("text", ['{"note": "not a log"}', '{"a": 1}\n{"a": 2}\n', "", "plain text"])
def test_a_json_file_of_another_shape_is_still_left_out(tmp_path, text):
    """JSON, JSON Lines named .json, an empty file, text: none is a log, none is cut short."""
    folder = tmp_path / "hosted"
    shutil.copytree(DATA / "prime_hosted", folder, ignore=shutil.ignore_patterns("*.py"))
    (folder / "notes.json").write_text(text)
    done = run_cli("ingest", folder, "--store", tmp_path / "store")
    assert done.returncode == 0, done.stderr


def _first_record(path: Path, change) -> None:
    import json

    lines = path.read_text().splitlines()
    lines[0] = change(lines[0], json)
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("change, message", [
    (lambda line, json: "{" + line, "record 1: not JSON"),
    (lambda line, json: json.dumps({**json.loads(line), "output": ["a"]}), "record 1: field 'output': expected a string"),
], ids=["garbled", "mistyped"])
def test_a_log_whose_first_record_is_bad_is_read_and_named_not_dropped(tmp_path, change, message):
    """Detection reads a file's first record: one that is garbled, or has the keys of the logs
    beside it with a value of the wrong type, is still read as one of them, so its loader names it."""
    folder = tmp_path / "dumps"
    shutil.copytree(DATA / "verl" / "grpo-sandbox", folder)
    _first_record(folder / "1.jsonl", change)
    done = run_cli("ingest", folder, "--store", tmp_path / "store")
    assert done.returncode == 1
    assert done.stderr.startswith(f"error: {folder / '1.jsonl'}: {message}") and done.stderr.count("\n") == 1
    assert not (tmp_path / "store").exists()
    lenient = run_cli("ingest", folder, "--store", tmp_path / "store", "--lenient")
    assert lenient.returncode == 0 and "; skipped 1 (each named above)" in lenient.stdout


def test_records_of_another_shape_beside_logs_are_still_left_out(tmp_path):
    folder = tmp_path / "dumps"
    shutil.copytree(DATA / "verl" / "grpo-sandbox", folder)
    (folder / "summary.jsonl").write_text('{"accuracy": 0.5, "n": 4}\n')
    (folder / "empty.jsonl").write_text("")
    done = run_cli("ingest", folder, "--store", tmp_path / "store")
    assert done.returncode == 0, done.stderr


def test_lenient_leaves_out_a_cut_step_file_with_the_calls_and_tokens_of_its_trajectories(tmp_path):
    import trajlens

    run = tmp_path / "r6"
    shutil.copytree(Path(__file__).resolve().parents[2] / "sample_data" / "sao-r6", run)
    cut = run / "trajectories" / "step=000001" / "part-0.parquet"
    _cut(cut, 100)
    done = run_cli("ingest", run, "--store", tmp_path / "store", "--lenient")
    assert done.returncode == 0, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[0].startswith(f"skipped: {cut}: not a readable Parquet file")
    assert lines[1].startswith(f"skipped: {run / 'tool_calls' / 'step=000001' / 'part-0.parquet'}: ")
    assert lines[1].endswith("rows left out: their trajectories were in a file that was skipped")
    store = trajlens.open(tmp_path / "store")
    counts = store.sql("SELECT (SELECT min(step) FROM trajectories) AS first, "
                       "(SELECT count(*) FROM tool_calls WHERE step = 1) AS calls, "
                       "(SELECT count(*) FROM tokens WHERE step = 1) AS tokens, "
                       "(SELECT count(*) FROM tool_calls WHERE step = 2) AS later")
    assert counts.row(0)[:3] == (2, 0, 0) and counts["later"][0] > 0


@pytest.mark.skipif(not REAL.is_dir(), reason="real fixture logs not present")
@pytest.mark.parametrize("size", [3000, 20000, "after a brace"])
def test_a_cut_trajectory_in_a_folder_of_runs_leaves_the_run_whole(tmp_path, size):
    """A mini-swe-agent trajectory cut short reads as no log (3,000 bytes) or as a chat log (its
    head has messages, its tail no longer says mini-swe-agent; cut just after a closing brace,
    it even closes): either way it is one of the logs beside it, named as they are, so the folder
    stays one run; lenient leaves that file out and names it."""
    import trajlens

    folder = tmp_path / "ds"
    shutil.copytree(REAL / "mini-swe-agent-deepseek-pr816", folder)
    cut = folder / "output" / "deepseek_chat_dev" / "pvlib__pvlib-python-1154" / "pvlib__pvlib-python-1154.traj.json"
    if size == "after a brace":
        size = cut.read_bytes().rindex(b"}", 0, 20000) + 1
    _cut(cut, size)
    done = run_cli("ingest", folder, "--store", tmp_path / "store")
    assert done.returncode == 1 and done.stderr.startswith(f"error: {cut}: ") and done.stderr.count("\n") == 1
    assert not (tmp_path / "store").exists()
    lenient = run_cli("ingest", folder, "--store", tmp_path / "store", "--lenient")
    assert lenient.returncode == 0, lenient.stderr
    assert lenient.stderr.count(f"skipped: {cut}: ") == 1
    assert "ingested 1 run(s)" in lenient.stdout
    assert run_cli("ingest", REAL / "mini-swe-agent-deepseek-pr816", "--store", tmp_path / "whole").returncode == 0
    count = "SELECT run_id, count(*) AS n FROM trajectories GROUP BY run_id"
    runs, whole = (trajlens.open(tmp_path / name).sql(count) for name in ("store", "whole"))
    assert runs["run_id"].to_list() == ["ds"] and runs["n"][0] == whole["n"][0] - 1


def test_a_cut_trl_table_says_why_it_cannot_be_read(tmp_path):
    """Arrow's message quotes the file's path before its cause; the line names the file once, so
    the cause is not pushed out of it."""
    folder = tmp_path / "a-long-folder-name-for-a-training-run" / "grpo-run"
    shutil.copytree(DATA / "trl" / "grpo-run", folder)
    table = folder / "completions" / "completions_00002.parquet"
    _cut(table, table.stat().st_size - 100)
    done = run_cli("ingest", folder, "--store", tmp_path / "store")
    assert done.returncode == 1 and done.stderr.count("\n") == 1
    assert done.stderr.startswith(f"error: {table}: not a readable Parquet table")
    assert "magic bytes not found" in done.stderr and done.stderr.count(str(table)) == 1


def test_a_cut_log_of_a_format_without_file_names_is_named_once(tmp_path):
    """Chat logs have no names of their own: the cut one is a stray beside the others, which their
    loader reads and names; lenient skips it once, not once for planning and once for loading."""
    folder = tmp_path / "chats"
    folder.mkdir()
    for index in (1, 2, 3):
        shutil.copy(DATA / "openai_chat" / "messages.json", folder / f"t{index}.json")
    _cut(folder / "t2.json", 300)
    done = run_cli("ingest", folder, "--store", tmp_path / "store")
    assert done.returncode == 1 and done.stderr.startswith(f"error: {folder / 't2.json'}: ")
    lenient = run_cli("ingest", folder, "--store", tmp_path / "store", "--lenient")
    assert lenient.returncode == 0 and lenient.stderr.count("skipped: ") == 1
    assert "ingested 1 run(s)" in lenient.stdout and "; skipped 1 (each named above)" in lenient.stdout


def test_the_reason_of_an_unreadable_file_leaves_out_the_path_it_quotes():
    from trajlens.ingest._unreadable import reason

    error = OSError("Could not open Parquet input source '/home/o'brien/runs/x.parquet': Parquet magic bytes not found")
    assert reason(error) == "Could not open Parquet input source: Parquet magic bytes not found"
    assert reason(OSError("no path 'here': at all")) == "no path 'here': at all"


CUT_BESIDE_OTHERS = [
    # (folder of logs, the file to cut, a file to copy to it first, so that the loader reads two alike)
    ("prime_hosted", "rollouts_step_10.json", None),
    ("prime_hosted", "step_20.parquet", None),
    ("openrlhf/wandb-run", "generated_samples_1.table.json", None),
    ("rllm/logs", "deepswe/run1/episodes/train_step_3_epoch_0/episode_hashe956f804_idastropy__astropy-12907_1.json",
     None),
    ("skyrl_agent/trace", "demo-run/step10/astropy__astropy-12907/0/trace_20260101_000000_000002.json", None),
    ("art/email-agent", "models/agent-001/trajectories/train/0002.parquet",
     "models/agent-001/trajectories/train/0001.parquet"),
    ("swe_agent_dataset", "train-00001-of-00002.parquet", "train-00000-of-00001.parquet"),
    ("inspect_ai", "copy.json", "tiny.json"),
]
CUMULATIVE = {"openrlhf/wandb-run"}
"""OpenRLHF's wandb tables hold every row logged before them: the last one read holds the cut one's."""


@pytest.mark.parametrize("source, damaged, copied", CUT_BESIDE_OTHERS,
                         ids=[f"{source.split('/')[0]}-{Path(damaged).suffix[1:]}" for source, damaged, _ in CUT_BESIDE_OTHERS])
def test_lenient_skips_a_cut_log_once_and_loads_the_others(tmp_path, source, damaged, copied):
    """Each loader that reads a folder of files: strict stops at a file cut in half, saying so;
    lenient skips that file, naming it once with the same words, and keeps every trajectory of
    the others."""
    from trajlens.errors import InputError
    from trajlens.ingest import load

    folder = tmp_path / "logs"
    ignored = ("*.py", "zstd", "*.eval") if source == "inspect_ai" else ("*.py",)
    shutil.copytree(DATA / source, folder, ignore=shutil.ignore_patterns(*ignored))
    if copied is not None:
        shutil.copy(folder / copied, folder / damaged)
    cut = folder / damaged
    whole = load(folder).trajectories.num_rows
    expected = whole if source in CUMULATIVE else whole - load(cut).trajectories.num_rows
    _cut(cut, cut.stat().st_size // 2)
    reason = "not a readable Parquet file" if cut.suffix == ".parquet" else "JSON cut short"
    with pytest.raises(InputError) as stopped:
        load(folder)
    assert str(stopped.value).startswith(f"{cut}: {reason}")
    run = load(folder, strict=False)
    assert [problem.message for problem in run.problems] == [str(stopped.value)]
    assert run.trajectories.num_rows == expected > 0


@pytest.mark.skipif(not REAL.is_dir(), reason="real fixture logs not present")
@pytest.mark.parametrize("size", [5000, "inside a character"])
def test_a_swe_agent_traj_cut_short_is_said_to_be(tmp_path, size):
    """A ``.traj`` is one JSON document, as a ``.json`` is: cut anywhere, even inside a character
    of several bytes, it is said to be cut short, not badly encoded or badly delimited."""
    folder = tmp_path / "trajectories"
    shutil.copytree(REAL / "SWE-agent" / "tests" / "test_data" / "trajectories", folder)
    cut = next(folder.rglob("*.traj"))
    if size == "inside a character":  # the log's text is ASCII: give it an "é" of two bytes, and cut between them
        data = cut.read_bytes()
        middle = data.index(b"e", len(data) // 2)
        cut.write_bytes(data[:middle] + "\u00e9".encode() + data[middle + 1:])
        size = middle + 1
    _cut(cut, size)
    done = run_cli("ingest", cut, "--store", tmp_path / "store")
    assert done.returncode == 1 and done.stderr.count("\n") == 1
    assert done.stderr.startswith(f"error: {cut}: JSON cut short, expected JSON that closes its last record")


@pytest.mark.skipif(not REAL.is_dir(), reason="real fixture logs not present")
def test_a_fifo_named_as_a_log_is_refused_not_waited_on(tmp_path):
    """A FIFO is read only when a writer comes: one named as a log below a run is an error naming
    it (lenient: skipped), where reading it would wait forever."""
    import os

    folder = tmp_path / "gemini"
    shutil.copytree(REAL / "mini-swe-agent-gemini3pro", folder)
    fifo = next(folder.rglob("*.traj.json")).parent / "extra.traj.json"
    os.mkfifo(fifo)
    done = run_cli_subprocess("ingest", folder, "--store", tmp_path / "store", timeout=60)
    assert done.returncode == 1 and done.stderr == f"error: {fifo}: expected a regular file, found a FIFO\n"
    lenient = run_cli_subprocess("ingest", folder, "--store", tmp_path / "store", "--lenient", timeout=60)
    assert lenient.returncode == 0 and lenient.stderr == f"skipped: {fifo}: expected a regular file, found a FIFO\n"


@pytest.mark.skipif(not REAL.is_dir(), reason="real fixture logs not present")
@pytest.mark.parametrize("fixture, side, size, unscored", [
    ("mini-swe-agent-deepseek-pr816", "deepseek__deepseek-chat.deepseek_chat_dev_rerun.json", 100, 8),
    ("mini-swe-agent-deepseek-pr816", "deepseek__deepseek-chat.deepseek_chat_dev_rerun.json", 0, 8),
    ("mini-swe-agent-gemini3pro", "swebench_results/20251118_gemini-3-pro-74pct/logs/django__django-12155/report.json",
     30, 1),
    ("openhands-benchmarks-openagentsafety", "benchmarks/openagentsafety/outputs/mgulavani__openagentsafety_full_updated-"
     "train/litellm_proxy/neulab/gpt-4o-2024-08-06_maxiter_100_N_initial/eval_safety-metrics.json", 60, 0),
], ids=["summary-cut", "summary-empty", "report-cut", "grade-cut"])
def test_a_verdict_file_that_cannot_be_read_leaves_its_trajectories_in_the_run(tmp_path, fixture, side, size, unscored):
    """A harness summary, a SWE-bench report or a grader's score beside the logs, cut short or
    empty: strict stops naming it; lenient names it once and keeps every trajectory, those it
    scored without a verdict, as they load without it (it dropped them, or stopped the load)."""
    from trajlens.errors import InputError
    from trajlens.ingest import load

    folder = tmp_path / "logs"
    shutil.copytree(REAL / fixture, folder)
    whole = load(folder, strict=False).trajectories
    _cut(folder / side, size)
    with pytest.raises(InputError) as stopped:
        load(folder)
    assert str(stopped.value).startswith(f"{folder / side}: ")
    run = load(folder, strict=False)
    assert [problem.message for problem in run.problems if problem.file == str(folder / side)] == [str(stopped.value)]
    assert run.trajectories.num_rows == whole.num_rows
    verdicts = [table.column("resolved").null_count for table in (whole, run.trajectories)]
    assert verdicts[1] - verdicts[0] == unscored


MINI_SWE_AGENT = {"trajectory_format": "mini-swe-agent-1", "info": {"exit_status": "Submitted", "submission": ""},
                  "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "fix"},
                               {"role": "assistant", "content": "THOUGHT\n```bash\nls\n```"},
                               {"role": "user", "content": "<returncode>0</returncode><output>a</output>"}]}


@pytest.mark.parametrize("name, content, said", [
    ("t.traj", b"", "t.traj: expected JSON, found an empty file"),
    ("t.traj.json", json.dumps({**MINI_SWE_AGENT, "trajectory_format": "mini-swe-agent-9"}).encode(),
     "t.traj.json: field 'trajectory_format': expected 'mini-swe-agent-1' (the formats known: 'mini-swe-agent-1' or "
     "'mini-swe-agent-1.1'), found 'mini-swe-agent-9'"),
    ("t.traj.json", json.dumps(MINI_SWE_AGENT).encode("utf-16"), None),
])
def test_a_folder_whose_one_log_no_detection_reads_is_read_as_the_log_alone_would_be(tmp_path, name, content, said):
    """A log named as a format's (``*.traj.json``) that no detection reads, alone in its folder:
    its loader reads it (UTF-16) or names it in its line (empty, another trajectory_format), as
    when the file is given alone; not 'no logs in this directory'."""
    log = tmp_path / "run" / "task" / name
    log.parent.mkdir(parents=True)
    log.write_bytes(content)
    done = run_cli("ingest", tmp_path / "run", "--store", tmp_path / "store")
    if said is None:
        assert (done.returncode, done.stderr) == (0, "")
        assert done.stdout.startswith(f"ingested 1 run(s) into {tmp_path / 'store'}: run")
    else:
        assert (done.returncode, done.stderr) == (1, f"error: {log.parent}/{said}\n")
        assert not (tmp_path / "store").exists()


@pytest.mark.parametrize("source, keep, said", [
    ("atropos/groups.jsonl", -300, "record 1: JSON cut short, expected JSON that closes the record, found a record "
     "ending in 'ull, \"overrides\": nu'"),
    ("openai_chat/messages.jsonl", -50, "record line 5: JSON cut short, expected JSON that closes the record, found a "
     "record ending in '{\"'"),
])
def test_a_jsonl_log_whose_last_line_is_cut_is_said_to_be_cut_short(tmp_path, source, keep, said):
    """A trainer killed mid-write leaves a last line that stops inside a value (``nu`` of ``null``):
    the record is named as cut short, as a JSON file cut short is, not as text that is no JSON."""
    log = tmp_path / Path(source).name
    log.write_bytes((DATA / source).read_bytes()[:keep])
    done = run_cli("ingest", log, "--store", tmp_path / "store")
    assert (done.returncode, done.stderr) == (1, f"error: {log}: {said}\n")
