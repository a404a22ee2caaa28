"""Fuzzing every log format: real fixtures, mutated, load or fail in one line naming the file.

Each target takes a real log (``tests/data``, or the smallest valid document of a format
without a shipped fixture), changes one of its files (:mod:`_mutations`) and ingests it into
a new store. The outcome must be a store that verifies, or a :class:`TrajlensError` of one
line, after which no store exists and the input is as it was. ``HYPOTHESIS_PROFILE=long``
runs far more examples (see :mod:`_profile`).
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "ingest"))

from _mutations import column_mutation, mutations  # noqa: E402
from _profile import FUZZ  # noqa: E402
from hostile import MINI_V1, MINI_V2, OPENHANDS_V0, OPENHANDS_V1, SWE_AGENT  # noqa: E402

import trajlens  # noqa: E402
from trajlens.errors import InputError, TrajlensError  # noqa: E402
from trajlens.store.verify import verify_store  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data"


@dataclass(frozen=True)
class Seed:
    """A real log: ``source`` is copied (a file or a folder) and ``target`` inside it is mutated."""

    name: str
    source: Path | dict[str, bytes]
    target: str
    json_like: bool = True

    def write(self, folder: Path) -> tuple[Path, Path]:
        """Copy the log under ``folder``; return (what to ingest, the file to mutate)."""
        if isinstance(self.source, dict):
            root = folder / self.name
            for name, data in self.source.items():
                (root / name).parent.mkdir(parents=True, exist_ok=True)
                (root / name).write_bytes(data)
            return root / self.target if len(self.source) == 1 else root, root / self.target
        copy = folder / self.source.name
        if self.source.is_dir():
            shutil.copytree(self.source, copy)
            return copy, copy / self.target
        shutil.copyfile(self.source, copy)
        return copy, copy


def _document(name: str, document) -> dict[str, bytes]:
    return {name: json.dumps(document, indent=1).encode()}


SEEDS = [
    Seed("openai-chat", DATA / "openai_chat" / "conversation.json", ""),
    Seed("openai-chat-jsonl", DATA / "openai_chat" / "messages.jsonl", ""),
    Seed("openai-rollouts", DATA / "openai_chat" / "rollouts.jsonl", ""),
    Seed("verl", DATA / "verl" / "grpo-sandbox", "1.jsonl"),
    Seed("verl-file-logger", DATA / "verl" / "file_logger.jsonl", ""),
    Seed("atropos", DATA / "atropos" / "groups.jsonl", ""),
    Seed("metrics-jsonl", DATA / "metrics" / "wandb_history.jsonl", ""),
    Seed("metrics-csv", DATA / "metrics" / "trainer_metrics.csv", "", json_like=False),
    Seed("trl-state", DATA / "trl" / "grpo-run", "trainer_state.json"),
    Seed("mini-swe-agent-v1", _document("task-1.traj.json", MINI_V1), "task-1.traj.json"),
    Seed("mini-swe-agent-v2", _document("task-1.traj.json", MINI_V2), "task-1.traj.json"),
    Seed("swe-agent", _document("task.traj", SWE_AGENT), "task.traj"),
    Seed("openhands-v0", _document("events.json", OPENHANDS_V0), "events.json"),
    Seed("openhands-v1", _document("state_x.json", OPENHANDS_V1), "state_x.json"),
    Seed("prime-hosted", DATA / "prime_hosted" / "rollouts_step_10.json", ""),
    Seed("tensorboard", DATA / "tensorboard" / "runs", "Nov30_12-00-00_host/events.out.tfevents.1796079263.vm.27018.0",
         json_like=False),
]
PARQUET_SEEDS = [
    Seed("trl-completions", DATA / "trl" / "grpo-run", "completions/completions_00001.parquet", json_like=False),
    Seed("swe-agent-dataset", DATA / "swe_agent_dataset", "train-00000-of-00001.parquet", json_like=False),
    Seed("prime-hosted-parquet", DATA / "prime_hosted", "step_20.parquet", json_like=False),
]


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def ingest_loads_or_fails_in_one_line(folder: Path, source: Path) -> None:
    """The property every target checks, on a log already written under ``folder``."""
    store = folder / "store"
    before = _snapshot(folder)
    try:
        trajlens.ingest([source], store)
    except TrajlensError as error:
        message = str(error)
        assert message.strip() and "\n" not in message, message
        message.encode("utf-8")  # printable: no lone surrogates
        if isinstance(error, InputError):
            assert str(folder) in message, message  # names the file
        assert not store.exists(), "a failed ingest left a store behind"
    else:
        verification = verify_store(store)
        assert verification.ok, [f.line(store) for f in verification.findings]
        shutil.rmtree(store)
    assert _snapshot(folder) == before, "the input was modified"


@pytest.mark.parametrize("seed", SEEDS, ids=[seed.name for seed in SEEDS])
def test_a_mutated_log_loads_or_fails_in_one_line(seed: Seed):
    @FUZZ
    @given(mutation=mutations(seed.json_like))
    def target(mutation):
        with tempfile.TemporaryDirectory(prefix="trajlens-fuzz-") as scratch:
            folder = Path(scratch)
            source, file = seed.write(folder)
            file.write_bytes(mutation.apply(file.read_bytes()))
            ingest_loads_or_fails_in_one_line(folder, source)

    target()


@pytest.mark.parametrize("seed", PARQUET_SEEDS, ids=[seed.name for seed in PARQUET_SEEDS])
def test_a_mutated_parquet_log_loads_or_fails_in_one_line(seed: Seed):
    @FUZZ
    @given(change=st.one_of(mutations(False).map(lambda m: ("bytes", m)), column_mutation().map(lambda c: ("columns", c))))
    def target(change):
        kind, mutation = change
        with tempfile.TemporaryDirectory(prefix="trajlens-fuzz-") as scratch:
            folder = Path(scratch)
            source, file = seed.write(folder)
            if kind == "bytes":
                file.write_bytes(mutation.apply(file.read_bytes()))
            else:
                pq.write_table(mutation(pq.read_table(file)), file)
            ingest_loads_or_fails_in_one_line(folder, source)

    target()


def test_the_seeds_load_unchanged(tmp_path):
    for seed in SEEDS + PARQUET_SEEDS:
        folder = tmp_path / seed.name
        folder.mkdir()
        source, _ = seed.write(folder)
        trajlens.ingest([source], folder / "store")
