"""The format registry: one detection contract, and a folder of mixed formats in one call."""

from __future__ import annotations

import importlib
import os
import shutil
import sys
from pathlib import Path

import pytest
from cli_run import run_cli

import trajlens
from trajlens.errors import InputError
from trajlens.ingest import formats, load
from trajlens.ingest._probe import Probe
from trajlens.ingest.agents import load_mini_swe_agent_v1, load_openhands_v0, load_swe_agent

REPO = Path(__file__).resolve().parents[2]
REAL = next((p / "shared" / "fixtures" / "real" for p in REPO.parents if (p / "shared" / "fixtures" / "real").is_dir()),
            REPO.parent / "shared" / "fixtures" / "real")
DATA = REPO / "tests" / "data"
GEMINI = REAL / "mini-swe-agent-gemini3pro" / "swebench_results" / "20251118_gemini-3-pro-74pct"
DEMOS = REAL / "SWE-agent" / "trajectories" / "demonstrations"
OPENHANDS = REAL / "OpenHands" / "tests" / "runtime" / "trajs"

needs_real = pytest.mark.skipif(not REAL.is_dir(), reason="real fixture logs not present")


def test_every_format_has_one_detect_and_a_unique_name():
    names = [fmt.name for fmt in formats.registry()]
    assert len(names) == len(set(names))
    assert names[-1] == "openai-chat"  # the catch-all of chat logs is tried last
    for fmt in formats.registry():
        assert fmt.detect(Probe(DATA / "labelled_commands.jsonl")) is False or fmt.name == "openai-chat"


def test_a_probe_reads_each_file_once(tmp_path, monkeypatch):
    path = tmp_path / "a.json"
    path.write_text('[{"role": "user", "content": "hi"}]')
    opened = []
    real_open = open

    def counting_open(file, *args, **kwargs):
        opened.append(str(file))
        return real_open(file, *args, **kwargs)

    probe_module = importlib.import_module("trajlens.ingest._probe")
    monkeypatch.setattr(probe_module, "open", counting_open, raising=False)
    probe = Probe(path)
    found = [fmt.name for fmt in formats.registry() if not fmt.folder and fmt.name != "metrics" and fmt.detect(probe)]
    assert found == ["openai-chat"]
    assert opened.count(str(path)) == 1


def _mixed_folder(root: Path) -> Path:
    mixed = root / "mixed"
    shutil.copytree(GEMINI, mixed / "mini")
    (mixed / "swe").mkdir(parents=True)
    demos = sorted(DEMOS.glob("*.traj"))[:2]
    for demo in demos:
        shutil.copy(demo, mixed / "swe" / demo.name)
    shutil.copytree(OPENHANDS, mixed / "openhands")
    shutil.copy(DATA / "openai_chat" / "conversation.json", mixed / "chat.json")
    shutil.copy(demos[0], mixed / "loose.traj")
    (mixed / "notes.md").write_text("not a log")
    return mixed


@needs_real
def test_a_folder_of_mixed_formats_ingests_each_subfolder_by_its_own_format(tmp_path):
    mixed = _mixed_folder(tmp_path)
    planned = {(source.format.name, source.run_id) for source in formats.plan(mixed)}
    assert planned == {("mini-swe-agent-v1", None), ("swe-agent", None), ("openhands-v0", None),
                       ("openai-chat", "mixed-openai-chat"), ("swe-agent", "mixed-swe-agent")}

    result = trajlens.ingest([mixed], tmp_path / "store")
    assert sorted(result.run_ids) == ["mini", "mixed-openai-chat", "mixed-swe-agent", "openhands", "swe"]
    store = trajlens.open(tmp_path / "store")
    formats_by_run = dict(store.sql("SELECT run_id, source_format FROM runs").iter_rows())
    assert formats_by_run == {"mini": "mini-swe-agent-v1", "swe": "swe-agent", "openhands": "openhands-v0",
                              "mixed-openai-chat": "openai-chat", "mixed-swe-agent": "swe-agent"}
    # Each run holds exactly what its folder loads on its own.
    counts = dict(store.sql("SELECT run_id, count(*) FROM tool_calls GROUP BY 1").iter_rows())
    assert counts["mini"] == load_mini_swe_agent_v1(mixed / "mini").tool_calls.num_rows
    assert counts["swe"] == load_swe_agent(mixed / "swe").tool_calls.num_rows
    assert counts["openhands"] == load_openhands_v0(mixed / "openhands").tool_calls.num_rows
    assert counts["mixed-swe-agent"] == load_swe_agent(mixed / "loose.traj").tool_calls.num_rows


@needs_real
@pytest.mark.slow
def test_the_cli_ingests_a_mixed_folder_in_one_call(tmp_path):
    mixed = _mixed_folder(tmp_path)
    done = run_cli("ingest", mixed, "--store", tmp_path / "s")
    assert done.returncode == 0, done.stderr
    assert "ingested 5 run(s)" in done.stdout


def test_a_folder_with_no_logs_says_so(tmp_path):
    (tmp_path / "README.md").write_text("nothing here")
    with pytest.raises(InputError, match="no logs in this directory"):
        formats.plan(tmp_path)


def test_a_file_of_no_known_format_says_so(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{"hello": 1}')
    with pytest.raises(InputError, match="a file of no known format"):
        formats.plan(path)


def test_a_verl_experiment_folder_is_one_run_with_validation_and_metrics(tmp_path, monkeypatch):
    sys.path.insert(0, str(Path(__file__).parent))
    from verl_file_logger import FileLogger

    dump = DATA / "verl" / "grpo-sandbox"
    experiment = tmp_path / "exp"
    shutil.copytree(dump, experiment / "rollout_data", ignore=shutil.ignore_patterns("val"))
    shutil.copytree(dump / "val", experiment / "val_generations")
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(experiment / "metrics.jsonl"))  # verl's file backend
    logger = FileLogger("proj", "exp")
    for step in (1, 2):
        logger.log({"critic/vf_explained_var": 0.5, "actor/lr": 1e-6}, step)
    logger.finish()
    planned = [(s.format.name, len(s.paths), s.run_id) for s in formats.plan(experiment)]
    assert planned == [("verl", 2, "exp"), ("metrics", 1, None)]
    result = trajlens.ingest([experiment], tmp_path / "store")
    assert result.run_ids == ["exp"]
    store = trajlens.open(tmp_path / "store")
    splits = dict(store.sql("SELECT split, count(*) FROM trajectories GROUP BY 1").iter_rows())
    alone = load(dump)  # the dump with its val/ folder, as verl writes it
    expected = dict(zip(*[alone.trajectories.group_by("split").aggregate([([], "count_all")]).column(c).to_pylist()
                          for c in ("split", "count_all")]))
    assert splits == expected and set(splits) == {"train", "val"}
    assert store.sql("SELECT count(*) FROM step_metrics").item() == 4


@pytest.mark.skipif(not hasattr(os, "mkfifo") or not Path("/dev/null").exists(), reason="no FIFOs or /dev/null here")
def test_a_source_that_is_neither_file_nor_folder_is_named_for_what_it_is(tmp_path):
    """Refused before it is read: reading a FIFO would wait for a writer forever."""
    fifo = tmp_path / "x.jsonl"
    os.mkfifo(fifo)
    for path, kind in ((fifo, "a FIFO"), (Path("/dev/null"), "a character device")):
        with pytest.raises(InputError) as caught:
            trajlens.ingest([path], tmp_path / "store")
        assert str(caught.value) == f"{path}: expected a regular file or a directory, found {kind}"


@pytest.mark.parametrize("given, found", [
    (["sao-r6", "sao-r6"], "the same path as the source '{root}/sao-r6'"),
    (["", "sao-r6"], "a path inside the source '{root}'"),
    (["sao-r6", ""], "a folder holding the source '{root}/sao-r6'"),
], ids=["twice", "inside", "holding"])
def test_sources_that_overlap_are_refused_before_anything_is_read(tmp_path, given, found):
    """A folder and a folder inside it would be read twice, as two runs of the same logs (agent
    logs, whose run ids come from the folders, are not refused for their ids)."""
    root = Path(__file__).resolve().parents[2] / "sample_data"
    sources = [str(root / name) for name in given]
    done = run_cli("ingest", *sources, "--store", tmp_path / "store")
    assert done.returncode == 1 and not (tmp_path / "store").exists()
    assert done.stderr == (f"error: {sources[1]}: expected sources that do not overlap (each log read once), "
                           f"found {found.format(root=root)}\n")


@pytest.mark.parametrize("source, name", [
    ("atropos/groups.jsonl", "G.JSONL"),
    ("openai_chat/messages.jsonl", "M.Jsonl"),
    ("swe_agent_dataset/train-00000-of-00001.parquet", "T.PARQUET"),
])
def test_an_extension_in_upper_case_is_read_as_in_lower_case(tmp_path, source, name):
    """``G.JSONL`` (a tool on Windows, a renamed export) is the log ``g.jsonl`` is, alone or in a folder."""
    import trajlens

    data = Path(__file__).resolve().parents[1] / "data" / source
    (tmp_path / "lower").mkdir()
    (tmp_path / "upper").mkdir()
    shutil.copy(data, tmp_path / "lower" / name.lower())
    shutil.copy(data, tmp_path / "upper" / name)
    counts = {}
    for case in ("lower", "upper"):
        for given in (tmp_path / case, tmp_path / case / (name if case == "upper" else name.lower())):
            store = tmp_path / f"store-{case}-{given.name}"
            trajlens.ingest([given], store)
            counts[case, given.is_dir()] = trajlens.open(store).sql(
                "SELECT (SELECT source_format FROM runs) AS format, count(*) AS n FROM trajectories").row(0)
    assert counts["upper", True] == counts["upper", False] == counts["lower", False] == counts["lower", True]
    assert counts["upper", True][1] > 0
