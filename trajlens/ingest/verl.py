"""Loader of verl rollout dumps (``trainer.rollout_data_dir`` / ``validation_data_dir``).

verl's ``RayPPOTrainer._dump_generations`` writes one ``<step>.jsonl`` per training step; each
line is one rollout::

    {"input": <decoded prompt>, "output": <decoded response>, "gts": <ground truth>,
     "score": <float>, "step": <int>, <key>: <value>, ...}

``score`` is the sequence reward (``token_level_scores.sum(-1)``), and the extra keys are the
reward function's ``reward_extra_info`` lists, one value per rollout (``acc``, ``format``,
``pred``, ``request_id``; validation dumps add ``reward``). Prompt and response are decoded
with ``skip_special_tokens=True``; :mod:`trajlens.ingest._chat_template` reads the turns and
Hermes tool calls back out of the text.

Mapping to the trajectories table:

* ``step``: the record's ``step`` (the file name's step when the record has none); when the
  file is named ``<int>.jsonl`` the two must agree.
* ``task_id``: first 12 hex digits of the SHA-1 of ``input``, so the rollouts of one prompt share
  it; ``group_id`` is ``"{step}:{task_id}"`` (``"val:{step}:{task_id}"`` for validation).
* ``trajectory_id``: ``"{step}-{line}"`` with the 0-based line index in the file
  (``"val-{step}-{line}"`` for validation, which verl numbers with the same steps).
* ``split``: ``'val'`` for files in a ``val`` or ``validation`` directory, or for a record whose
  ``split`` key is ``val``, ``validation``, ``test`` or ``eval``; otherwise ``'train'``.
* ``reward``: ``score``. ``reward_channels``: every other numeric (or boolean, as 0/1) extra
  key, in record order; when there is none, the single channel ``score``, so a consumer of
  channels always finds the reward there. Non-numeric extras (``pred``, ``data_source``) and
  ``gts`` are not kept.
* ``resolved``: the ``acc`` key when it is a boolean or exactly 0/1, else null.
* ``num_turns`` and tool calls: parsed from ``output``. Shell tools
  (:data:`~trajlens.ingest.tools.SHELL_TOOLS`) get ``command`` from ``arguments["command"]`` or
  ``arguments["cmd"]``. Reasoning tokens and exit status are not in the dump and stay null;
  ``model_tokens`` counts the model tokens of the logged ``response_mask`` (below) where there
  is one, with or without advantages beside it; of logged ``advantages`` without a mask, every
  token; else it is null. Each mask item is a boolean or 0/1; any other value is an error.

Logged advantages. verl's own dump (``RayPPOTrainer._log_rollout_data`` and
``_dump_generations`` in volcengine/verl, read at v0.5-v0.6 and main of late 2025) writes no
advantage: only the keys above, the ``reward_extra_info`` lists and ``request_id``. Trainers
built on verl add them through ``reward_extra_info`` or a patched dump; trajlens keeps them
when present: ``advantage`` (a number) as ``logged_advantage``, and ``advantages`` (a list of
numbers, one per response token, with ``response_mask`` beside it when logged, else every
token counted as a model token) as the token row's ``logged_advantages``. Neither is a reward
channel. A ``response_mask`` logged without advantages sets ``model_tokens`` only: no token
row is written for it.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path
from typing import Any, NamedTuple, Sequence

from trajlens.errors import InputError
from trajlens.ingest._chat_template import ParsedToolCall, parse_response
from trajlens.ingest._fields import Fields, as_float, parse_json, read_lines
from trajlens.ingest._probe import Probe
from trajlens.limits import undecodable
from trajlens.ingest.tools import shell_command
from trajlens.rows import TOOL_CALL, TRAJECTORY, RunBuilder, RunData
from trajlens.store.writer import joined_source, slug

SOURCE_FORMAT = "verl"

VALIDATION_DIRS: frozenset[str] = frozenset({"val", "validation"})
"""Directory names (or words of them: ``val_generations``, ``validation-data``) whose dumps are
validation rollouts (``trainer.validation_data_dir``)."""

VALIDATION_SPLITS: frozenset[str] = frozenset({"val", "validation", "test", "eval"})
"""Values of a record's ``split`` key that mean validation."""

REQUIRED_KEYS: tuple[str, ...] = ("input", "output", "score")
"""Keys every dumped rollout has."""

STANDARD_KEYS: frozenset[str] = frozenset({"input", "output", "gts", "score", "step", "split"})
"""Keys ``_dump_generations`` writes itself; every other key is a reward extra."""

ADVANTAGE_KEYS: frozenset[str] = frozenset({"advantage", "advantages", "response_mask"})
"""Keys holding what the trainer logged of its advantages (never reward channels)."""

TASK_ID_DIGITS = 12
"""Hex digits of the prompt's SHA-1 kept as ``task_id``."""


class _Rollout(NamedTuple):
    trajectory: dict[str, Any]
    tool_calls: list[dict[str, Any]]
    tokens: dict[str, Any] | None


def detect(target: Probe | Path | str) -> bool:
    """True when ``path`` is a verl dump file, or a directory holding ``<step>.jsonl`` dumps."""
    path = Probe.of(target).path
    if path.is_dir():
        # Dumps lie directly in the folder verl writes them to; a folder whose only dumps are in
        # a validation sub-folder is an experiment folder (rollouts and validation side by side).
        for file in sorted(path.glob("*.jsonl"), key=_file_order):  # files not named <step>.jsonl first
            if _looks_like_dump(file):
                return True
            if file.stat().st_size and _file_step(file) is None:
                return False  # records of another kind: not a dump folder
            # an empty <step>.jsonl (a step cut short), or one whose first record is no dump's, is
            # a step gone bad: the loader's to name, so the folder is still read whole
        return False
    return path.is_file() and path.suffix.lower() == ".jsonl" and _looks_like_dump(path)


def load_verl(paths: Sequence[Path | str] | Path | str, *, run_id: str | None = None, strict: bool = True) -> RunData:
    """Load verl rollout dumps into a :class:`RunData`.

    ``paths`` are dump directories (their ``*.jsonl`` files and those of ``val``/``validation``
    sub-directories) or dump files. ``run_id`` defaults to the dump directory's
    name. In strict mode the first bad record raises :class:`InputError` naming file, line,
    field, what was expected and what was found; otherwise bad records are skipped and listed
    in ``RunData.problems``.
    """
    roots = [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]
    if not roots:
        raise InputError("verl dump", "no paths given", expected="a dump directory or <step>.jsonl files")
    files: list[Path] = []
    for root in roots:
        if root.is_dir():
            found = _dump_files(root)
            if not found:
                raise InputError(str(root), "no dump files", expected="<step>.jsonl files", found="none")
            files.extend(found)
        elif root.is_file():
            files.append(root)
        else:
            raise InputError(str(root), "cannot read", expected="a dump directory or file", found="no such path")
    builder = RunBuilder(
        run_id or _default_run_id(roots[0]),
        source_format=SOURCE_FORMAT,
        source=joined_source(roots),
    )
    loaded: dict[str, Path] = {}
    for file in files:
        _load_file(file, builder, loaded, strict=strict)
    return builder.build()


def _load_file(file: Path, builder: RunBuilder, loaded: dict[str, Path], *, strict: bool) -> None:
    """Add the rollouts of one dump file; ``loaded`` maps trajectory ids to their file."""
    file_step = _file_step(file)
    in_validation_dir = is_validation_dir(file.parent)
    records = 0
    for line_no, line in read_lines(file):
        line_index = line_no - 1
        records += 1
        where = f"{file}:{line_no}"
        try:
            if isinstance(line, InputError):
                raise line
            record = _read_record(file, line_index, line)
            rollout = _rollout(record, file, line_index, file_step, in_validation_dir)
            trajectory_id = rollout.trajectory["trajectory_id"]
            if trajectory_id in loaded:
                raise InputError(
                    str(file), f"step {rollout.trajectory['step']} was already loaded from {loaded[trajectory_id]}",
                    record=line_index + 1, field="step", expected="each step in one file",
                    found=f"a second {trajectory_id!r}",
                )
            builder.add_trajectory(rollout.trajectory, rollout.tool_calls, rollout.tokens, where=where)
            loaded[trajectory_id] = file
        except InputError as error:
            if strict:
                raise
            builder.skip(error)
    if records == 0:
        error = InputError(str(file), "no records", expected="one JSON object per line", found="an empty file")
        if strict:
            raise error
        builder.skip(error)


def _rollout(
    record: dict[str, Any], file: Path, line_index: int, file_step: int | None, in_validation_dir: bool
) -> _Rollout:
    line_no = line_index + 1

    def bad(field: str, expected: str, found: object, message: str | None = None) -> InputError:
        return InputError(str(file), message, record=line_no, field=field, expected=expected, found=found)

    for key in REQUIRED_KEYS:
        if key not in record:
            raise bad(key, "a value", "no such key", "missing key")
    read = Fields(file, line_no)
    for key in ("input", "output"):
        if not isinstance(record[key], str):
            raise bad(key, "a string", _json(record[key]))
        read.text(record, key)
    score = record["score"]
    if not _is_number(score):
        raise bad("score", "a number", _json(score))
    if not math.isfinite(as_float(score)):
        raise bad("score", "a finite number", _json(score))

    if "step" in record:
        step = record["step"]
        if not isinstance(step, int) or isinstance(step, bool):
            raise bad("step", "an integer", _json(step))
        if not 0 <= step < 2**63:
            raise bad("step", "an integer from 0 to 2**63-1", _json(step))
    elif file_step is not None:
        step = file_step
    else:
        raise bad("step", "an integer step (or a file named <step>.jsonl)", "no such key", "missing key")
    if file_step is not None and step != file_step:
        raise bad("step", f"{file_step} (the step in the file name)", str(step))

    split = "val" if in_validation_dir else "train"
    if "split" in record:
        value = record["split"]
        if not isinstance(value, str) or value.lower() not in VALIDATION_SPLITS | {"train"}:
            raise bad("split", "'train' or one of " + ", ".join(sorted(VALIDATION_SPLITS)), _json(value))
        split = "train" if value.lower() == "train" else "val"

    channels = []
    for key, value in record.items():
        if key in STANDARD_KEYS or key in ADVANTAGE_KEYS or not _is_number(value, allow_bool=True):
            continue
        if not isinstance(value, bool) and not math.isfinite(as_float(value)):
            raise bad(key, "a finite number", _json(value))
        channels.append({"name": key, "value": as_float(value)})
    if not channels:
        channels = [{"name": "score", "value": float(score)}]

    task_id = hashlib.sha1(record["input"].encode("utf-8")).hexdigest()[:TASK_ID_DIGITS]
    prefix = "val-" if split == "val" else ""
    parsed = parse_response(record["output"])
    mask = read.mask(record, "response_mask")
    tokens = _advantages(record, mask, read)
    if tokens is not None:
        mask = tokens["response_mask"]
    trajectory = TRAJECTORY(
        step=step,
        trajectory_id=f"{prefix}{step}-{line_index}",
        group_id=f"{'val:' if split == 'val' else ''}{step}:{task_id}",
        task_id=task_id,
        split=split,
        reward=as_float(score),
        reward_channels=channels,
        resolved=_resolved(record.get("acc")),
        num_turns=parsed.num_turns,
        source=f"{file}:{line_no}",
        logged_advantage=read.number(record, "advantage"),
        model_tokens=None if mask is None else sum(mask),
    )
    return _Rollout(trajectory, [_call_row(call) for call in parsed.tool_calls], tokens)


def _advantages(record: dict[str, Any], mask: list[bool] | None, read: Fields) -> dict[str, Any] | None:
    """The token row of a record that logged per-token advantages (with its ``response_mask``,
    read already, or every token a model token when none was logged), else None."""
    advantages = read.items(record, "advantages")
    if advantages is None:
        return None
    if mask is None:
        mask = [True] * len(advantages)
    elif len(mask) != len(advantages):
        raise read.error("response_mask", f"{len(advantages)} values (one per advantage)", f"{len(mask)}")
    return {"response_mask": mask, "logged_advantages": advantages}


def _call_row(call: ParsedToolCall) -> dict[str, Any]:
    return TOOL_CALL(
        turn=call.turn,
        tool_name=call.tool_name,
        arguments=call.arguments,
        command=shell_command(call.tool_name, call.arguments_object),
        observation=call.observation,
        format_error=call.format_error,
    )



def _resolved(acc: object) -> bool | None:
    if isinstance(acc, bool):
        return acc
    if _is_number(acc) and acc in (0, 1):
        return bool(acc)
    return None


def _is_number(value: object, *, allow_bool: bool = False) -> bool:
    if isinstance(value, bool):
        return allow_bool
    return isinstance(value, (int, float))


def _json(value: object) -> str:
    if isinstance(value, float):
        return str(value)  # nan, inf: what Python's json reads NaN and Infinity as
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**40:
        return f"an integer of {len(str(abs(value)))} digits"
    text = json.dumps(value)
    return text if len(text) <= 200 else text[:200] + "..."


def _read_record(file: Path, line_index: int, line: bytes) -> dict[str, Any]:
    try:
        line.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(str(file), record=line_index + 1, expected="UTF-8 text", found=undecodable(error)) from None
    record = parse_json(line, str(file), record=line_index + 1)
    if not isinstance(record, dict):
        raise InputError(str(file), record=line_index + 1, expected="a JSON object", found=type(record).__name__)
    return record


def _dump_files(directory: Path) -> list[Path]:
    files = list(directory.glob("*.jsonl"))
    for child in directory.iterdir():
        if child.is_dir() and is_validation_dir(child):
            files.extend(child.glob("*.jsonl"))
    return sorted(files, key=_file_order)


def _file_order(file: Path) -> tuple[bool, int, str, str]:
    step = _file_step(file)
    return (is_validation_dir(file.parent), -1 if step is None else step, file.name, str(file))


def is_validation_dir(directory: Path) -> bool:
    """Whether a dump folder holds validation rollouts, from its name."""
    return any(word in VALIDATION_DIRS for word in re.split(r"[^a-z0-9]+", directory.name.lower()))


def _file_step(file: Path) -> int | None:
    return int(file.stem) if re.fullmatch(r"[0-9]+", file.stem) else None


def _looks_like_dump(file: Path) -> bool:
    head = Probe(file).first_line()
    if not head.lstrip().startswith("{") or '"input"' not in head and '"output"' not in head:
        return False
    try:
        first = next(iter(read_lines(file)), None)
        line = None if first is None or isinstance(first[1], InputError) else first[1]
        # a byte that is not UTF-8 is the loader's error to name (record and offset), not a
        # reason to take the file for something else: detection reads the record's shape alone
        record = parse_json(line.decode("utf-8", "replace"), str(file), sniff=True) if line is not None else None
    except InputError:
        return False
    return isinstance(record, dict) and all(key in record for key in REQUIRED_KEYS) and isinstance(record["output"], str)


DUMP_FOLDER_WORDS: frozenset[str] = frozenset({"data", "dump", "dumps", "generations", "rollouts", "outputs"})
"""Words that, with the validation words, make up a generic dump folder name (``val``,
``validation_data``, ``val_generations``): such a folder is named after the run above it."""


def _default_run_id(root: Path) -> str:
    directory = root if root.is_dir() else root.parent
    directory = directory.resolve()
    words = set(re.split(r"[^a-z0-9]+", directory.name.lower())) - {""}
    if is_validation_dir(directory) and words <= VALIDATION_DIRS | DUMP_FOLDER_WORDS:
        directory = directory.parent  # a generic folder of the run's validation dumps
    return slug(directory.name)
