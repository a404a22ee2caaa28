"""A damaged file in a folder of logs stops ingest with a one-line error naming it: detection
leaves a file out only when it reads as something else, never because it cannot be read."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cli_run import run_cli

DATA = Path(__file__).resolve().parents[1] / "data"


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
