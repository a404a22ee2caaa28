"""A run's configuration history: which configuration was in force from which step on.

``runs.config`` holds the configuration as it stands now. A run that was resumed with a changed
configuration had other values before; a check of a logged value against its configured one
(the resume trap: a restored LR scheduler overriding a changed LR) must compare each step with
the configuration of its own time. A run directory records that in ``config.json``::

    {"configured": {...}, "history": [{"from_step": 1, "config": {...}},
                                      {"from_step": 41, "config": {...}}]}

Ingesting the run copies the history into the stored run directory as
``config_history/part-0.parquet`` (columns :data:`COLUMNS`), read back by :func:`read_history`.
A run without ``config.json``, or one without ``history``, has no history; only its current
configuration is known.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from trajlens.errors import InputError
from trajlens.limits import parse_json

CONFIG_FILE = "config.json"
TABLE_DIR = "config_history"
COLUMNS = pa.schema([
    pa.field("from_step", pa.int64(), nullable=False),  # first step the configuration applied to
    pa.field("config", pa.string(), nullable=False),    # the configuration as a JSON object
])


def read_config_file(path: Path) -> list[tuple[int, dict]]:
    """(from_step, config) entries of a ``config.json``, in step order; [] without ``history``."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise InputError(str(path), "cannot read the config file", found=str(error)) from None
    # within ingest's limits: its size, nesting and integers' digits, each named where it fails
    document = parse_json(data, str(path))
    if not isinstance(document, dict):
        raise InputError(str(path), expected="a JSON object", found=type(document).__name__)
    history = document.get("history")
    if history is None:
        return []
    if not isinstance(history, list):
        raise InputError(str(path), field="history", expected="a list of {from_step, config}", found=repr(history))
    entries = []
    for index, entry in enumerate(history):
        step = entry.get("from_step") if isinstance(entry, dict) else None
        config = entry.get("config") if isinstance(entry, dict) else None
        if not isinstance(step, int) or isinstance(step, bool):
            raise InputError(str(path), record=f"history[{index}]", field="from_step", expected="a step number",
                             found=repr(step))
        if not isinstance(config, dict):
            raise InputError(str(path), record=f"history[{index}]", field="config", expected="a JSON object",
                             found=repr(config))
        entries.append((step, config))
    steps = [step for step, _ in entries]
    if steps != sorted(set(steps)):
        raise InputError(str(path), field="history", expected="entries in increasing from_step order",
                         found=str(steps))
    return entries


def copy_history(run_dir: Path, target: Path) -> bool:
    """Write ``run_dir``'s history (from ``config.json`` or an ingested table) under ``target``."""
    entries = read_history(run_dir)
    if not entries:
        return False
    table = pa.table({"from_step": [s for s, _ in entries], "config": [json.dumps(c, sort_keys=True) for _, c in entries]},
                     schema=COLUMNS)
    (target / TABLE_DIR).mkdir(parents=True, exist_ok=True)
    pq.write_table(table, target / TABLE_DIR / "part-0.parquet")
    return True


def read_history(run_dir: Path) -> list[tuple[int, dict]]:
    """A run directory's configuration history, from its table or its ``config.json``; [] if none."""
    run_dir = Path(run_dir)
    stored = run_dir / TABLE_DIR / "part-0.parquet"
    if stored.is_file():
        table = pq.read_table(stored)
        return [(row["from_step"], json.loads(row["config"])) for row in table.to_pylist()]
    config_file = run_dir / CONFIG_FILE
    return read_config_file(config_file) if config_file.is_file() else []


__all__ = ["CONFIG_FILE", "COLUMNS", "copy_history", "read_config_file", "read_history"]
