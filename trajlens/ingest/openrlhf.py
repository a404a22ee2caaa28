"""OpenRLHF's logged rollout samples: the ``train/generated_samples`` table.

OpenRLHF 0.11.2 saves no rollout to disk. Each training step it decodes the first sample of
the batch with its reward (``openrlhf/trainer/ppo_trainer.py``, ``sample0``: the whole
sequence, prompt and response, ``skip_special_tokens=True``) and logs it: to Weights & Biases
as the table ``train/generated_samples`` with columns ``global_step``, ``text``, ``reward``,
re-logged whole with each new row (``openrlhf/utils/logging_utils.py`` ``WandbLogger.log_train``),
and to TensorBoard as text. The wandb run keeps each logged table as
``media/table/train/generated_samples_<step>_<hash>.table.json``: ``{"columns": [...],
"data": [[step, text, reward], ...]}``.

Mapping: a row is a trajectory ``step<global_step>`` at that step, its own task and group (one
sample per step), ``reward`` as logged, ``response_text`` the decoded text. Tables logged at
several steps repeat earlier rows: a row is read once, from the last table holding it. Two
rows of one step that differ in text or reward (two runs' tables mixed, or a damaged one) are
the standard error naming the file, the row and the step (under lenient loading, the step is
left out with that problem). The text keeps no tool-call structure, so there are no calls.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Sequence

from trajlens.errors import InputError
from trajlens.ingest._fields import INT64, Fields, read_json_file, type_name
from trajlens.ingest._probe import Probe, files_of, run_name
from trajlens.rows import TRAJECTORY, RunBuilder, RunData

FORMAT = "openrlhf"
COLUMNS: list[str] = ["global_step", "text", "reward"]
"""The columns of ``WandbLogger.samples_table``."""
KEYS: frozenset[str] = frozenset({"columns", "data"})
_COLUMNS_JSON = re.compile(r'"columns"\s*:\s*\[\s*"global_step"\s*,\s*"text"\s*,\s*"reward"\s*\]')


def detect(target: Probe | Path | str) -> bool:
    """A wandb table file with OpenRLHF's sample columns."""
    probe = Probe.of(target)
    return KEYS <= probe.record_keys and bool(_COLUMNS_JSON.search(probe.head))


def load_openrlhf(paths: Sequence[Path | str] | Path | str, *, run_id: str | None = None,
                  strict: bool = True) -> RunData:
    """Load OpenRLHF ``generated_samples`` tables (files, or a wandb run folder) as one run."""
    from trajlens.store.writer import joined_source, slug

    files = files_of(paths, detect, strict=strict)
    name = run_name(paths, files)
    builder = RunBuilder(run_id or slug(Path(name).stem), source_format=FORMAT, source=joined_source(files))
    rows: dict[int, tuple[dict[str, Any], str, str]] = {}
    conflicts: dict[int, InputError] = {}
    for file in files:
        try:
            for step, record, row in table_rows(file):
                held = rows.get(step)
                if held is not None and _sample(held[0]) != _sample(row):
                    first = held[2] if held[1] == str(file) else f"{Path(held[1]).name} {held[2]}"
                    error = InputError(str(file), record=record, field="global_step",
                                       expected="one sample per step (a table logged again repeats its rows unchanged)",
                                       found=f"step {step} unlike its sample at {first}")
                    if strict:
                        raise error
                    conflicts.setdefault(step, error)
                rows[step] = (row, str(file), record)
        except InputError as error:
            if strict:
                raise
            builder.skip(error)
    for step, error in conflicts.items():  # which of the samples is the step's cannot be told
        del rows[step]
        builder.skip(error)
    for step in sorted(rows):
        row, where, _ = rows[step]
        builder.add_trajectory(row, where=where)
    return builder.build()


def _sample(row: dict[str, Any]) -> tuple[Any, ...]:
    """What a logged sample says (not where it was read)."""
    return row["reward"], row["response_text"]


def table_rows(file: Path):
    """``(global_step, record, trajectory row)`` for each row of one table file; ``record``
    names the row as errors do (``row 3``)."""
    table = read_json_file(file)
    read = Fields(file)
    if not isinstance(table, dict):
        raise read.error(None, "a wandb table (an object)", type_name(table))
    columns = read.items(table, "columns", required=True)
    if columns != COLUMNS:
        raise read.error("columns", json.dumps(COLUMNS), json.dumps(columns)[:60])
    for index, values in enumerate(read.items(table, "data", required=True) or []):
        at = read.at(f"row {index}")
        if not isinstance(values, list) or len(values) != len(COLUMNS):
            raise at.error("data", f"a row of {len(COLUMNS)} values", type_name(values))
        row = dict(zip(COLUMNS, values))
        step = at.integer(row, "global_step", required=True, bounds=(0, INT64[1]))
        assert step is not None  # required
        yield step, f"row {index}", TRAJECTORY(trajectory_id=f"step{step}", step=step, task_id=f"step{step}",
                               reward=at.reward(row, "reward"), response_text=at.text(row, "text"), num_turns=1,
                               source=f"{file}:row {index}")


__all__ = ["COLUMNS", "FORMAT", "detect", "load_openrlhf", "table_rows"]
