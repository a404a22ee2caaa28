"""Terminal-Bench ``tb run`` output folders.

Read as terminal-bench 0.2.18 writes them. The harness (``terminal_bench/harness/harness.py``)
writes one folder per trial, ``<run>/<task_id>/<trial_name>/``
(``terminal_bench/handlers/trial_handler.py`` ``TrialPaths``), holding ``results.json`` (a
``TrialResults``, ``terminal_bench/harness/models.py``, written with ``model_dump_json``:
``trial_name``, ``task_id``, ``instruction``, ``is_resolved``, ``failure_mode``,
``parser_results`` (test name -> ``passed``/``failed``), ``total_input_tokens``,
``total_output_tokens``) and ``commands.txt``: every ``send_keys`` to the trial's tmux
sessions, one ``repr(keys)`` per line (``terminal_bench/terminal/tmux_session.py``
``send_keys``), keys a string or a list of strings and tmux key names (``Enter``, ``C-c``).
The run folder also holds ``results.json`` (the ``BenchmarkResults`` aggregate) and
``run_metadata.json``, which are not read: the trials' own results are the source. A
``results.json`` in a folder named as the harness names trials is that trial's whatever it
holds: one that is empty or no ``TrialResults`` is an error naming it, never left out.

Mapping: a trial is a trajectory named by its ``trial_name``; ``task_id`` and ``group_id``
are its ``task_id``; ``resolved`` is ``is_resolved`` and ``reward`` 1.0 or 0.0 from it; the
share of parsed tests that passed is the reward channel ``tests_passed`` (tests differ from
task to task, so they are not channels of their own); ``exit_status`` is
the ``failure_mode``; ``model_tokens`` is ``total_output_tokens``. Each line of
``commands.txt`` is a ``tmux_send_keys`` call, its keys as arguments and as command (``Enter``
and ``C-m`` as newlines, the final one dropped); the harness's own test run, the last
``['bash ', '/tests/run-tests.sh', 'Enter']`` it sends (``harness.py`` ``_run_tests``), is not
a call of the agent and is left out. The lines are read as Python literals
(``ast.literal_eval``: strings and lists only, never code). The log keeps no terminal output
per command, so calls have no observation.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any, Sequence

from trajlens.errors import InputError
from trajlens.ingest._fields import INT64, Fields, dumps, read_json_file, type_name
from trajlens.ingest._probe import Probe, files_of, run_name
from trajlens.rows import TOOL_CALL, TRAJECTORY, RunBuilder, RunData

FORMAT = "terminal-bench"
KEYS: frozenset[str] = frozenset({"trial_name", "task_id", "instruction", "is_resolved"})
"""Keys of a trial's ``results.json`` (``TrialResults``)."""
COMMANDS = "commands.txt"
RESULTS = "results.json"
TOOL = "tmux_send_keys"
NEWLINE_KEYS: frozenset[str] = frozenset({"Enter", "C-m", "KPEnter"})
_CONTROL_KEY = re.compile(r"^[CM]-\S$")
"""A tmux control or meta key (``C-c``, ``C-d``, ``M-x``): typed, but not text."""
_TRIAL_NAME = r"\.\d+-of-\d+\..+"
"""A trial folder's name after its task id (``harness.py`` ``_get_trial_name``: attempt, attempts, run id)."""
TEST_RUN_SCRIPT = "run-tests.sh"
TEST_STATUS: dict[str, float] = {"passed": 1.0, "failed": 0.0}


def detect(target: Probe | Path | str) -> bool:
    """A trial folder (holding a trial's ``results.json``, taken whole: its agent's logs, such
    as Terminus' ``episode-<n>/debug.json``, are not logs of another format) or the file."""
    probe = Probe.of(target)
    if probe.is_dir:
        return is_trial_results(Probe(probe.path / RESULTS))
    return is_trial_results(probe)


def is_trial_results(probe: Probe) -> bool:
    """Whether a file is a trial's ``results.json``: by its keys, or by where the harness writes
    it (``<task_id>/<task_id>.<n>-of-<N>.<run_id>/results.json``), so one that is empty or no
    ``TrialResults`` is read, and named, as its trial's rather than left out of the run."""
    if KEYS <= probe.record_keys:
        return True
    path = probe.path
    return (path.name == RESULTS and probe.is_file
            and re.fullmatch(re.escape(path.parent.parent.name) + _TRIAL_NAME, path.parent.name) is not None)


def load_terminal_bench(paths: Sequence[Path | str] | Path | str, *, run_id: str | None = None,
                        strict: bool = True) -> RunData:
    """Load Terminal-Bench trials (a ``tb run`` folder, trial folders or their results) as one run."""
    from trajlens.store.writer import joined_source, slug

    files = files_of(paths, detect, strict=strict)
    name = run_name(paths, files)
    builder = RunBuilder(run_id or slug(name), source_format=FORMAT, source=joined_source(files))
    for file in files:
        try:
            row, calls = trial(file)
            builder.add_trajectory(row, calls, where=str(file))
        except InputError as error:
            if strict:
                raise
            builder.skip(error)
    return builder.build()


def trial(file: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One trial's ``results.json`` and the ``commands.txt`` beside it."""
    result = read_json_file(file)
    read = Fields(file)
    if not isinstance(result, dict):
        raise read.error(None, "a trial's results (an object)", type_name(result))
    resolved = read.boolean(result, "is_resolved")
    task = read.text(result, "task_id", required=True)
    tests = read.mapping(result, "parser_results") or {}
    for test, status in tests.items():
        if status not in TEST_STATUS:
            raise read.error(f"parser_results.{test}", "passed or failed", repr(status))
    channels = [] if not tests else [
        {"name": "tests_passed", "value": sum(TEST_STATUS[status] for status in tests.values()) / len(tests)}]
    calls = _calls(file.parent / COMMANDS)
    row = TRAJECTORY(
        trajectory_id=read.text(result, "trial_name", required=True), task_id=task, group_id=task,
        reward=None if resolved is None else float(resolved), reward_channels=channels, resolved=resolved,
        exit_status=read.text(result, "failure_mode"),
        model_tokens=read.integer(result, "total_output_tokens", bounds=(0, INT64[1])),
        num_turns=len(calls), source=str(file),
    )
    return row, calls


def _calls(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    from trajlens.ingest.agents._common import read_text

    sent: list[list[str]] = []
    for number, line in enumerate(read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            keys = ast.literal_eval(line)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            raise InputError(str(path), record=f"line {number}", expected="repr() of the keys sent (a string or "
                             "a list of strings)", found=line[:60]) from None
        if isinstance(keys, str):
            keys = [keys]
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
            raise InputError(str(path), record=f"line {number}", expected="a string or a list of strings",
                             found=type_name(keys))
        sent.append(keys)
    test_runs = [i for i, keys in enumerate(sent) if _is_test_run(keys)]
    if test_runs:
        del sent[test_runs[-1]]
    return [TOOL_CALL(turn=turn, tool_name=TOOL, arguments=dumps({"keys": keys}), command=_command(keys))
            for turn, keys in enumerate(sent)]


def _is_test_run(keys: list[str]) -> bool:
    return len(keys) == 3 and keys[0] == "bash " and keys[1].endswith("/" + TEST_RUN_SCRIPT) and keys[2] == "Enter"


def _command(keys: list[str]) -> str | None:
    """The text the keys type: newline keys as newlines, control keys (``C-c``) left out."""
    text = "".join("\n" if key in NEWLINE_KEYS else "" if _CONTROL_KEY.match(key) else key for key in keys)
    return text.rstrip("\n") or None


__all__ = ["FORMAT", "KEYS", "detect", "is_trial_results", "load_terminal_bench", "trial"]
