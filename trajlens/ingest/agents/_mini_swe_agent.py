"""What mini-swe-agent v1 and v2 share: recognising the file, the folder layout, the verdicts.

Layout. ``mini-extra swebench`` writes ``<run>/<instance_id>/<instance_id>.traj.json``; the
folder above the task folders names the run (above ``trajs/`` in SWE-bench's experiment layout,
``<run>/trajs/<instance_id>/...`` beside ``<run>/logs/``). Trajectory ids are ``<run>/<instance_id>``, so
several runs of the same tasks loaded together stay apart while sharing a group per task.

Verdicts. The SWE-bench harness leaves its verdict in one of two places, searched in the
folders above the trajectory (up to three levels):

* ``logs/<instance_id>/report.json`` (also ``logs/run_evaluation/<run>/<model>/<instance_id>/
  report.json``), holding ``resolved`` either at the top or under the instance id;
* a run summary ``<model>.<run>.json`` with ``resolved_ids``; an id listed among
  ``unresolved_ids``, ``empty_patch_ids`` or ``error_ids`` counts as not resolved. A file of
  that name without ``resolved_ids``, or a name that holds no file (a dangling link, a
  folder), is not a summary.

``resolved`` is ``None`` when neither mentions the task; the reward is 1.0 or 0.0 when the
verdict is known and ``None`` otherwise.

Paths. The ``instance_id`` a log carries is data: it names the verdict files only when it is a
plain file name (no separators, no ``..``, no glob characters); otherwise no verdict is looked
up and the task keeps the id as text.

Folder of runs. When a directory holding several run folders is loaded and only some of them
have harness verdicts, the ones without are left out (and noted as problems): they are not
comparable rollouts of the scored task set. Name such a run folder directly to load it.
"""

from __future__ import annotations

import functools
import glob
import re
from pathlib import Path
from typing import Any

from trajlens.errors import InputError
from trajlens.ingest.agents._common import Fields, Probe, TokenTally, read_beside, read_json, strip_suffix, type_name

FILE_NAMES: tuple[str, ...] = ("*.traj.json",)
"""The names of a trajectory file of either version: one so named below a run that neither
detects (empty, another ``trajectory_format``) is read, and its error names the file."""

KNOWN_FORMATS: tuple[str, ...] = ("mini-swe-agent-1", "mini-swe-agent-1.1")
"""The ``trajectory_format`` values read: v1 and v2."""

FORMAT_RE = re.compile(r'"trajectory_format"\s*:\s*"(mini-swe-agent-[^"]*)"')

VERDICT_SEARCH_DEPTH = 3


# A task id usable as one file name: no separators, no parent reference, no glob characters.
_SAFE_NAME = re.compile(r"[A-Za-z0-9_.+@=,-]{1,200}")


def trajectory_format(probe: Probe) -> str | None:
    """The ``trajectory_format`` string of a mini-swe-agent file, read from its two ends."""
    if probe.suffix != ".json":
        return None
    match = FORMAT_RE.search(probe.tail) or FORMAT_RE.search(probe.head)
    return match.group(1) if match else None


def load_document(path: Path, expected_format: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The parsed file and its ``messages``, checked to be a non-empty list of role-tagged dicts;
    its ``trajectory_format`` must be ``expected_format`` (the error names the one found and
    the ones known: a file read for its name alone may hold another, or none)."""
    file = str(path)
    read = Fields(file)
    data = read_json(path)
    if not isinstance(data, dict):
        raise InputError(file, expected="a JSON object with 'messages'", found=type_name(data))
    found_format = read.text(data, "trajectory_format")
    if found_format != expected_format:  # a file named like a trajectory, with no version or another
        known = " or ".join(map(repr, KNOWN_FORMATS))
        raise InputError(file, field="trajectory_format", expected=f"{expected_format!r} (the formats known: {known})",
                         found="no such key" if found_format is None else repr(found_format))
    messages = read.items(data, "messages", required=True)
    if not messages:
        raise InputError(file, field="messages", expected="at least the system and task messages", found="an empty list")
    for index, message in enumerate(messages):
        read.at(f"message {index}").text(message, "role", required=True)
    read.mapping(data, "info")
    read.text(data, "instance_id")
    return data, messages


def instance_id(data: dict[str, Any], path: Path) -> str:
    value = data.get("instance_id")
    return value if isinstance(value, str) and value else strip_suffix(path.name)


def is_safe_name(task: str) -> bool:
    """Whether ``task`` can name a file or folder without leaving the folder it is joined to."""
    return bool(_SAFE_NAME.fullmatch(task)) and task not in (".", "..")


TRAJECTORY_FOLDER = "trajs"
"""The folder SWE-bench's experiment layout keeps trajectories in, beside ``logs/``:
``<run>/trajs/<instance_id>/<instance_id>.traj.json``; the folder above it names the run."""


def run_folder(path: Path) -> Path:
    """The folder naming the run: above the task folder when the file sits in one, and above a
    :data:`TRAJECTORY_FOLDER` holding the tasks."""
    task = strip_suffix(path.name)
    folder = path.parent.parent if path.parent.name == task else path.parent
    return folder.parent if folder.name == TRAJECTORY_FOLDER and folder.parent != folder else folder


def trajectory_row(data: dict[str, Any], path: Path, messages: list[dict[str, Any]], num_turns: int,
                   unread: list[InputError]) -> dict[str, Any]:
    """Trajectory columns both versions fill the same way; a verdict file that cannot be read
    goes to ``unread`` (:attr:`~trajlens.ingest.agents._common.Record.unread`), its verdict unknown."""
    task = instance_id(data, path)
    read = Fields(str(path))
    info = data.get("info") or {}
    tally = TokenTally()
    for index, message in enumerate(messages):
        if message.get("role") == "assistant":
            at = read.at(f"message {index}")
            extra = at.mapping(message, "extra")
            response = None if extra is None else at.mapping(extra, "response", name="extra.response")
            tally.add(None if response is None else response.get("usage"), at)
    resolved = read_beside(lambda: verdict(path, task), None, unread)
    return {
        "task_id": task,
        "group_id": task,
        "reward": None if resolved is None else float(resolved),
        "resolved": resolved,
        "exit_status": read.text(info, "exit_status", name="info.exit_status"),
        "num_turns": num_turns,
        **tally.columns(),
    }


def model_name(data: dict[str, Any]) -> str | None:
    config = (data.get("info") or {}).get("config")
    model = config.get("model") if isinstance(config, dict) else None
    name = model.get("model_name") if isinstance(model, dict) else None
    return name if isinstance(name, str) else None


# -- verdicts ------------------------------------------------------------------------------


def verdict(path: Path, task: str) -> bool | None:
    """Whether the SWE-bench harness resolved ``task``, from files near ``path``; None if unknown."""
    if not is_safe_name(task):
        return None  # a task id from the log never becomes a path outside the log's folders
    run = run_folder(path).name
    folders = [path.parent, *path.parent.parents][: VERDICT_SEARCH_DEPTH + 1]
    for folder in folders:
        for report in (folder / "logs" / task / "report.json",
                       *sorted((folder / "logs" / "run_evaluation" / run).glob(f"*/{glob.escape(task)}/report.json"))):
            if report.is_file():
                return _report_verdict(report, task)
    for folder in folders:
        for summary in sorted(folder.glob(f"*.{glob.escape(run)}.json")):
            found = _summary_verdicts(summary).get(task)
            if found is not None:
                return found
    return None


def has_summary(run: Path) -> bool:
    folders = [run, *run.parents][: VERDICT_SEARCH_DEPTH]
    return any(_is_summary(s) for folder in folders for s in folder.glob(f"*.{glob.escape(run.name)}.json"))


def _is_summary(summary: Path) -> bool:
    """Whether a file named like a run's summary gives verdicts; one that cannot be read (cut
    short, empty) is the run's summary still, and each trajectory it would have scored says so."""
    try:
        return bool(_summary_verdicts(summary))
    except InputError:
        return True


def _report_verdict(report: Path, task: str) -> bool:
    data = read_json(report)
    entry = data.get(task, data) if isinstance(data, dict) else None
    if not isinstance(entry, dict) or not isinstance(entry.get("resolved"), bool):
        raise InputError(str(report), field="resolved", expected="a SWE-bench report with a boolean 'resolved'",
                         found="no such key" if isinstance(entry, dict) else type_name(entry))
    return entry["resolved"]


# Small and bounded: consecutive trajectories of one run read the same summary.
@functools.lru_cache(maxsize=8)
def _summary_verdicts_cached(summary: str, mtime_ns: int) -> dict[str, bool]:
    data = read_json(Path(summary))
    if not isinstance(data, dict) or not isinstance(data.get("resolved_ids"), list):
        return {}
    verdicts: dict[str, bool] = {}
    for key in ("unresolved_ids", "empty_patch_ids", "error_ids", "resolved_ids"):
        tasks = data.get(key)
        for task in tasks if isinstance(tasks, list) else []:
            if isinstance(task, (str, int)) and not isinstance(task, bool):
                verdicts[str(task)] = key == "resolved_ids"
    return verdicts


def _summary_verdicts(summary: Path) -> dict[str, bool]:
    """Verdicts of a file named like a run's summary; a name that holds no file (a dangling link,
    a folder) is not a summary, and gives none."""
    try:
        if not summary.is_file():
            return {}
        mtime_ns = summary.stat().st_mtime_ns
    except OSError:
        return {}
    return _summary_verdicts_cached(str(summary), mtime_ns)


# -- folders of runs -----------------------------------------------------------------------


def select_scored_runs(directory: Path, files: list[Path]) -> tuple[list[Path], list[InputError]]:
    """Drop run folders without verdicts when others under ``directory`` have them."""
    by_run: dict[Path, list[Path]] = {}
    for file in files:
        by_run.setdefault(run_folder(file), []).append(file)
    if len(by_run) < 2:
        return files, []
    scored = {run for run in by_run if has_summary(run)}
    if not scored or scored == set(by_run):
        return files, []
    notes = [
        InputError(str(run), "run folder left out: it has no harness summary while the other runs here do; "
                   "load it on its own", expected=f"a summary '*.{run.name}.json'", found="none")
        for run in by_run if run not in scored
    ]
    return [f for f in files if run_folder(f) in scored], notes


def run_task_ids(files: list[Path], root: Path) -> dict[Path, str]:
    """``<run folder>/<task>`` for each file."""
    return {f: f"{run_folder(f).name}/{strip_suffix(f.name)}" for f in files}
