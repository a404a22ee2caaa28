"""Following a run directory that a trainer is still writing: :class:`RunFollower` and :func:`watch`.

What is read, and when a step counts as complete (a step is never read before it is):

``Parquet step partitions`` (the canonical layout: ``trajectories/step=N/*.parquet`` and the
same under ``tool_calls/``, ``tokens/``, ``step_metrics/``)
    Step N is complete when a partition of a later step exists under ``trajectories/`` (the
    trainer has moved on), or when ``trajectories/step=N/`` holds a ``_SUCCESS`` marker, or
    (the last step a watch waits for, ``until_step``) when its files have kept their sizes for
    ``settle`` seconds; and then only once every file of the step has a valid Parquet footer. Files whose names start
    with ``.`` or ``_`` or end in ``.tmp`` (written, then renamed) are not read.
``verl dumps`` (``N.jsonl`` in the directory)
    Complete when a dump of a later step exists, or when it ends in a newline and has not
    changed for ``settle`` seconds.
``metrics JSONL`` (any other ``*.jsonl`` file, growing a record per line)
    Only newline-terminated lines are read, from where the last read stopped. A step's scalars
    are complete when a record of a later step arrives, or when the file ends in a newline and
    has not changed for ``settle`` seconds.

A step is released to the checks once it is complete in the trajectory source (Parquet or
verl; when the run has one) and the metrics file (when there is one) has reached it. Every
file is read once: :attr:`RunFollower.files_read` records each read.

Started on a run that is already far along, the watch catches up in batches of complete steps
(at most :data:`~trajlens.run.batches.BATCH_TOKENS` tokens and ``BATCH_STEPS`` steps, as
``trajlens check`` reads a run): a batch's measures are computed together, then each of its steps
is judged on the steps up to it, so every line is the one a watch that saw the steps arrive one
by one prints, and memory stays that of a batch. Batches whose tool calls are few are added
one after another before their steps are judged, until
:data:`~trajlens.checks.data.CLASSIFY_CALLS` calls have come (or ``until_step``): the calls are
classified together, at the classifier's rate on large batches.

A watched run is measured on its training trajectories (the splits to come are not known while
the trainer writes): a validation pass before the first training step (verl's ``val_before_train``)
does not decide what the checks measure. A run that never trains has no values to check.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import polars as pl
import pyarrow.parquet as pq

from trajlens.checks.data import (BATCH_TABLES, VERL_DUMP, Needs, RunInfo, RunState, NewSteps, empty_frame,
                                  metrics_jsonl_files, written_file)
from trajlens.checks.evaluate import RunChecks, evaluate_checks, measured_steps
from trajlens.checks.output import spans
from trajlens.checks.spec import Check
from trajlens.errors import InputError
from trajlens.run.batches import BATCH_STEPS, BATCH_TOKENS, token_sizes
from trajlens.run.splits import TRAIN_SPLIT

COMPLETE_MARKER = "_SUCCESS"
DAMAGE_WAIT = 60.0
"""Seconds a file of a step the writer has moved past (a later step exists) may stay without its
footer at the same size before it counts as damaged rather than written slowly."""
STEP_PARTITION = re.compile(r"^step=(\d+)$")


def _footer_valid(path: Path) -> bool:
    try:
        pq.read_metadata(path)
    except Exception:  # noqa: BLE001 - any failure means the file is not finished
        return False
    return True


@dataclass
class _MetricsFile:
    path: Path
    offset: int = 0
    size_seen: int = -1
    changed_at: float = field(default_factory=time.monotonic)
    line_no: int = 0
    pending: dict[int, list[tuple[str, float]]] = field(default_factory=dict)


def _dumps_in(folder: Path) -> dict[int, Path]:
    """The verl dumps ``N.jsonl`` directly in ``folder``, by step."""
    return {int(match.group(1)): path for path in folder.glob("*.jsonl") if (match := VERL_DUMP.match(path.name))}


class RunFollower:
    """Reads the complete steps of a growing run directory, each file once."""

    def __init__(self, directory: Path | str, run_id: str | None = None, settle: float = 5.0,
                 clock: Callable[[], float] = time.monotonic, last_step: int | None = None,
                 damage_wait: float = DAMAGE_WAIT) -> None:
        self.directory = Path(directory)
        self.damage_wait = max(damage_wait, settle)
        """Seconds a file of a complete-looking step may stay unfinished before it is refused."""
        self.last_step = last_step
        """The last step the watch waits for (``--until-step``): no later step will show it complete."""
        self._last_files: tuple[tuple[str, int], ...] | None = None
        self._last_since = 0.0
        if self.directory.is_file():
            raise InputError(str(self.directory), f"a file, not a run directory: watch the folder that holds it, "
                                                  f"{self.directory.parent}")
        if not self.directory.is_dir():
            raise InputError(str(self.directory), expected="a run directory to watch", found="no such directory")
        self.run_id = run_id
        self.settle = settle
        self.clock = clock
        self.files_read: list[Path] = []
        self.unfinished_seen = 0
        """How often a file of a complete-looking step was found still being written (and left)."""
        self.released: set[int] = set()
        self._metrics: dict[Path, _MetricsFile] = {}
        self._metric_rows: dict[int, list[tuple[str, float]]] = {}
        self._metric_seen: set[tuple[int, str]] = set()
        """The steps and metrics read from every metrics file: one value each, as ingest reads them."""
        self._metrics_frontier = -1
        self._verl_sizes: dict[Path, tuple[int, float]] = {}
        self._rollout_folders: list[Path] | None = None
        self._flat_metrics_read: set[Path] = set()
        self.info: RunInfo | None = None
        self._recorded_run_id: str | None = None
        """The run id the run directory's runs table records: every step file must hold it, as ingest requires."""
        self.behind = False
        """Whether the last poll left complete steps for the next one (its budget was spent)."""
        self.waiting_for_metrics: list[int] = []
        """Steps the last poll found complete in the trajectory source but not yet in the metrics
        file, which has not reached them (they are released once it does)."""
        self._listed: dict[str, dict[int, Path]] = {}
        """Each table's step partitions, as this poll listed them."""
        self._ready: set[int] = set()
        """Steps whose files were all found finished."""
        self._unfinished_sizes: dict[Path, tuple[int, float]] = {}
        """Each file of a complete-looking step found without its footer: its size, and since when."""

    # -- the run --------------------------------------------------------------------------
    def _load_info(self) -> None:
        from trajlens.checks.data import _history
        from trajlens.ingest.parquet import read_table_file
        from trajlens.store.writer import slug

        if self.info is not None:
            return
        runs = [p for p in sorted((self.directory / "runs").glob("*.parquet")) if written_file(p)] \
            if (self.directory / "runs").is_dir() else []
        if runs:
            if not _footer_valid(runs[0]):
                return
            table = read_table_file(runs[0], "runs")
            self.files_read.append(runs[0])
            run_id = table.column("run_id")[0].as_py()
            self._recorded_run_id = run_id
            self.info = RunInfo.of_runs(self.run_id or run_id, str(self.directory), table, self.directory)
        elif self._verl_dumps() or self._metrics_paths():
            self.info = RunInfo(self.run_id or slug(self.directory.resolve().name), str(self.directory),
                                _history(None, self.directory))

    # -- sources ---------------------------------------------------------------------------
    def _partitions(self, table: str) -> dict[int, Path]:
        """The table's step partitions, listed once per poll."""
        if table in self._listed:
            return self._listed[table]
        root = self.directory / table
        found = {}
        if root.is_dir():
            for child in root.iterdir():
                match = STEP_PARTITION.match(child.name)
                if match and child.is_dir():
                    found[int(match.group(1))] = child
        self._listed[table] = found
        return found

    def _verl_dumps(self) -> dict[int, Path]:
        """The training dumps ``N.jsonl``: in the folder, or in the rollout folder of an experiment
        folder (beside its validation folder), as ingest plans them."""
        dumps = _dumps_in(self.directory)
        if not dumps and not (self.directory / "trajectories").is_dir():
            for folder in self._dump_folders():
                dumps.update(_dumps_in(folder))
        return dumps

    def _dump_folders(self) -> list[Path]:
        """The sub-folders of training dumps ingest's plan finds (an experiment folder's rollout
        folder; never its validation folder), once it finds any; none until then."""
        if self._rollout_folders is None:
            from trajlens.ingest.formats import plan
            from trajlens.ingest.verl import is_validation_dir

            try:
                sources = plan(self.directory)
            except InputError:
                return []  # a folder in the middle of its first writes: planned again at the next poll
            folders = [path for source in sources if source.format.name == "verl" for path in source.paths
                       if path.is_dir() and path != self.directory and not is_validation_dir(path)]
            if folders:
                self._rollout_folders = folders
        return self._rollout_folders or []

    def _metrics_paths(self) -> list[Path]:
        return metrics_jsonl_files(self.directory)

    def _unchanged(self, path: Path, sizes: dict[Path, tuple[int, float]], seconds: float) -> bool:
        """True when the size of ``path`` has not changed for ``seconds`` (``sizes``: the size
        each path had, and since when); False for a file gone since it was listed (replaced)."""
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            sizes.pop(path, None)
            return False
        now = self.clock()
        seen = sizes.get(path)
        if seen is None or seen[0] != size:
            sizes[path] = (size, now)
            return False
        return now - seen[1] >= seconds

    def _settled(self, path: Path, sizes: dict[Path, tuple[int, float]]) -> bool:
        """True when ``path`` ends in a newline and its size has not changed for ``settle`` seconds."""
        if not self._unchanged(path, sizes, self.settle):
            return False
        size = sizes[path][0]  # the size it kept
        if size == 0:
            return False
        with path.open("rb") as handle:
            handle.seek(size - 1)
            return handle.read(1) == b"\n"

    def _complete_trajectory_steps(self) -> tuple[dict[int, str], bool]:
        """Complete, unreleased steps of the trajectory source ({step: kind}) and whether one exists."""
        partitions = self._partitions("trajectories")
        dumps = self._verl_dumps()
        complete: dict[int, str] = {}
        if partitions:
            latest = max(partitions)
            # In step order, up to the first step not complete yet: no step is checked before an
            # earlier one (a damaged file stops the watch at its step, with its line).
            for step in sorted(partitions):
                if step in self.released:
                    continue
                directory = partitions[step]
                done = step < latest or (directory / COMPLETE_MARKER).exists() or self._last_settled(step)
                if not (done and self._parquet_step_ready(step)):
                    break
                complete[step] = "parquet"
        if dumps:
            latest = max(dumps)
            for step, path in dumps.items():
                if step in self.released:
                    continue
                if step < latest or self._settled(path, self._verl_sizes):
                    complete[step] = "verl"
        return complete, bool(partitions or dumps)

    def _last_settled(self, step: int) -> bool:
        """Whether ``step``, the last the watch waits for, has kept the same files at the same sizes
        for ``settle`` seconds (no later step will come to show it complete)."""
        if step != self.last_step:
            return False
        files = tuple((str(p), p.stat().st_size) for paths in self._step_files(step).values() for p in paths)
        now = self.clock()
        if files != self._last_files:
            self._last_files, self._last_since = files, now
            return False
        return bool(files) and now - self._last_since >= self.settle

    def _step_files(self, step: int) -> dict[str, list[Path]]:
        files = {}
        for table in BATCH_TABLES:
            directory = self._partitions(table).get(step)
            files[table] = sorted(p for p in directory.glob("*.parquet") if written_file(p)) if directory else []
        return files

    def _parquet_step_ready(self, step: int) -> bool:
        """Whether every file of a complete-looking step has its footer (once so, always so).

        A file still without one after :attr:`damage_wait` seconds at the same size (the writer
        has gone on to a later step, or marked or settled this one) is no write in progress but
        a damaged file: it is read as ``trajlens check`` without ``--watch`` reads
        it (:func:`~trajlens.ingest.parquet.read_table_file`), which refuses it with the same
        line, rather than left unread while later steps are checked."""
        from trajlens.ingest.parquet import read_table_file

        if step in self._ready:
            return True
        unfinished = [(table, p) for table, paths in self._step_files(step).items() for p in paths if not _footer_valid(p)]
        if not unfinished:
            self._ready.add(step)
            return True
        self.unfinished_seen += 1
        for table, path in unfinished:
            if self._unchanged(path, self._unfinished_sizes, self.damage_wait):
                read_table_file(path, table)
        return False

    # -- metrics not partitioned by step ----------------------------------------------------------
    def _read_flat_metrics(self) -> bool:
        """``step_metrics/*.parquet`` files outside step partitions (the scalars of a finished or
        converted run, as ``trajlens check`` reads them): each read once, when its footer is valid.
        Such files are written whole, so once read they hold every scalar of the steps they
        cover and steps without scalars have none to come. False while one is still being
        written (no step is released before it is read)."""
        from trajlens.ingest.parquet import read_table_file

        root = self.directory / "step_metrics"
        if not root.is_dir():
            return True
        finished = True
        for path in sorted(p for p in root.glob("*.parquet") if written_file(p) and p not in self._flat_metrics_read):
            if not _footer_valid(path):
                finished = False
                continue
            frame = pl.from_arrow(read_table_file(path, "step_metrics")).drop_nulls("value")
            self._flat_metrics_read.add(path)
            self.files_read.append(path)
            for step, name, value in frame.select("step", "name", "value").iter_rows():
                if step not in self.released:
                    self._metric_rows.setdefault(step, []).append((name, float(value)))
        return finished

    # -- metrics JSONL ------------------------------------------------------------------------
    def _read_metrics(self) -> None:
        if self._flat_metrics_read:
            return  # a converted run: its step_metrics files are the scalars, as trajlens check reads them
        for path in self._metrics_paths():
            state = self._metrics.setdefault(path, _MetricsFile(path))
            size = path.stat().st_size
            if size > state.offset:
                with path.open("rb") as handle:
                    handle.seek(state.offset)
                    chunk = handle.read(size - state.offset)
                end = chunk.rfind(b"\n")
                if end >= 0:  # only whole lines; a partial last line waits for its newline
                    self.files_read.append(path)
                    for line in chunk[: end + 1].splitlines():
                        state.line_no += 1
                        self._metric_record(state, line)
                    state.offset += end + 1
            if size != state.size_seen:
                state.size_seen, state.changed_at = size, self.clock()
            # Steps below the file's latest are complete; the latest waits for a later step or for
            # the file to settle.
            latest = max(state.pending, default=None)
            settled = size == state.offset and self.clock() - state.changed_at >= self.settle
            for step in sorted(state.pending):
                if step < latest or settled:
                    self._metric_rows.setdefault(step, []).extend(state.pending.pop(step))
                    self._metrics_frontier = max(self._metrics_frontier, step)

    def metrics_wait(self) -> str | None:
        """What the last poll's complete steps wait for, when they wait for the metrics file: which
        steps, which file, and the last step its scalars are complete for; None otherwise."""
        if not self.waiting_for_metrics:
            return None
        files = ", ".join(str(path) for path in self._metrics)
        reached = (f"complete to step {self._metrics_frontier}" if self._metrics_frontier >= 0
                   else "complete for no step yet")
        several = len(self.waiting_for_metrics) > 1
        return (f"step{'s' if several else ''} {spans(self.waiting_for_metrics)} {'are' if several else 'is'} "
                f"complete in the trajectories but not in the metrics file {files}, which is {reached}")

    def _metric_record(self, state: _MetricsFile, line: bytes) -> None:
        """Hold the scalars of one line of a metrics log for their step, read as ``trajlens
        check`` and ingest read it (:func:`~trajlens.ingest.metrics.record_scalars`); a line they
        refuse stops the watch with the same error."""
        from trajlens.ingest.metrics import jsonl_record, record_scalars

        if not line.strip():
            return
        record = jsonl_record(state.path, state.line_no, line)
        if isinstance(record, InputError):
            raise record
        for value in record_scalars(state.path, state.line_no, record, self._metric_seen):
            if isinstance(value, InputError):
                raise value
            if value.step not in self.released:
                state.pending.setdefault(value.step, []).append((value.name, value.value))

    # -- one poll ---------------------------------------------------------------------------
    def poll(self, max_tokens: int | None = None, max_steps: int | None = None) -> NewSteps | None:
        """Read what became complete since the last poll, in step order, up to ``max_tokens``
        tokens and ``max_steps`` steps (one step at least, whatever its size; by default a batch's
        bounds, :data:`~trajlens.run.batches.BATCH_TOKENS` and ``BATCH_STEPS``); None when nothing
        did. :attr:`behind` tells whether complete steps were left for the next poll."""
        max_tokens = BATCH_TOKENS if max_tokens is None else max_tokens
        max_steps = BATCH_STEPS if max_steps is None else max_steps
        self.behind = False
        self._listed = {}
        self._load_info()
        if self.info is None:
            return None
        if not self._read_flat_metrics():
            return None
        self._read_metrics()
        complete, has_trajectories = self._complete_trajectory_steps()
        has_metrics = bool(self._metrics)  # a metrics JSONL still growing: a step waits for its scalars
        if has_trajectories:
            ready = sorted(s for s in complete if not has_metrics or s <= self._metrics_frontier)
            self.waiting_for_metrics = sorted(s for s in complete if has_metrics and s > self._metrics_frontier)
        else:
            ready = sorted(s for s in self._metric_rows if s not in self.released)
            partitions = self._partitions("step_metrics")
            latest = max(partitions, default=None)
            for s in sorted(partitions):  # in step order, up to the first not complete yet
                if s in self.released or s in ready:
                    continue
                if not (s < latest or (partitions[s] / COMPLETE_MARKER).exists()) or not self._parquet_step_ready(s):
                    break
                ready.append(s)
            ready.sort()
        if not ready:
            return None
        frames: dict[str, list[pl.DataFrame]] = {name: [] for name in BATCH_TABLES}
        tokens = 0
        for count, step in enumerate(ready):
            if count and (tokens >= max_tokens or count >= max_steps):
                self.behind = True
                break
            trajectories_before = len(frames["trajectories"])
            if complete.get(step) == "verl":
                self._read_verl(step, frames)
            else:
                self._read_parquet(step, frames)
            rows = self._metric_rows.pop(step, [])
            if rows:
                frames["step_metrics"].append(pl.DataFrame(
                    {"run_id": [self.info.run_id] * len(rows), "step": [step] * len(rows),
                     "name": [name for name, _ in rows], "value": [value for _, value in rows]},
                    schema=empty_frame("step_metrics").schema))
            self.released.add(step)
            tokens += sum(int(token_sizes(frame).sum()) for frame in frames["trajectories"][trajectories_before:])
        return NewSteps(*(pl.concat(parts, how="vertical_relaxed") if parts else empty_frame(name)
                           for name, parts in frames.items()))

    def _read_parquet(self, step: int, frames: dict[str, list[pl.DataFrame]]) -> None:
        from trajlens.ingest.parquet import read_table_file

        for table, paths in self._step_files(step).items():
            for path in paths:
                frames[table].append(pl.from_arrow(read_table_file(path, table, self._recorded_run_id)))
                self.files_read.append(path)

    def _read_verl(self, step: int, frames: dict[str, list[pl.DataFrame]]) -> None:
        from trajlens.ingest.verl import load_verl

        path = self._verl_dumps()[step]
        run = load_verl([path], run_id=self.info.run_id)
        self.files_read.append(path)
        for table in BATCH_TABLES:
            frames[table].append(pl.from_arrow(run.table(table)))


@dataclass(frozen=True)
class WatchOptions:
    """How :func:`watch` runs."""

    poll: float = 1.0
    """Seconds between looks at the directory."""
    settle: float = 5.0
    """Seconds a last file must stay unchanged (and end in a newline) to count as complete."""
    fail_fast: bool = False
    """Stop with exit status 1 at the first error-level check that fires."""
    until_step: int | None = None
    """Stop once this step has been checked."""
    timeout: float | None = None
    """Stop after this many seconds (once the steps complete at the last look are checked)."""
    strict: bool = False
    """Warnings fail the run too."""
    damage_wait: float = DAMAGE_WAIT
    """Seconds a file of a step the writer moved past may stay unfinished before it is refused."""


@dataclass
class WatchResult:
    """How a watch ended."""

    exit_code: int
    reason: str
    run: RunChecks | None
    follower: RunFollower


def watch(directory: Path | str, checks: Sequence[Check], options: WatchOptions = WatchOptions(),
          run_id: str | None = None, echo: Callable[[str], None] = print) -> WatchResult:
    """Check each new complete step of a run directory as it appears (see the module docstring)."""
    follower = RunFollower(directory, run_id, options.settle, last_step=options.until_step,
                           damage_wait=options.damage_wait)
    needs = Needs.of(checks)
    state: RunState | None = None
    fired: set[str] = set()
    results = []
    checked, last = 0, None
    started = time.monotonic()
    reason = "timeout"
    while True:
        batch = follower.poll()
        counts: dict[int, tuple[int, int]] = {}
        while batch is not None:
            if state is None:
                state = RunState(follower.info, needs, split=TRAIN_SPLIT)
            # the batch's measures are computed together; each step is then judged on the steps
            # up to it, as if it had come alone
            state.add(batch)
            counts.update(_step_counts(batch))
            # catching up: the next complete steps are added before these are judged while their
            # calls wait to be classified together (trajlens.checks.data.CLASSIFY_CALLS), up to
            # the last step the watch waits for
            before_last = options.until_step is None or max(counts, default=-1) < options.until_step
            batch = follower.poll() if follower.behind and state.holds_calls and before_last else None
        for step in counts:
            if options.until_step is not None and step > options.until_step:
                # a step past the last one asked for is never judged, the first one read included
                if not checked:
                    reason = f"the run's first complete step, {step}, comes after step {options.until_step}"
                    echo(f"stopped: {reason}")
                    return WatchResult(0, reason, None, follower)
                return _end(None, f"passed step {options.until_step}", state, checked, last, results, follower, echo,
                            options.strict)
            results = evaluate_checks(checks, state, upto=step)
            checked, last = checked + 1, step
            echo(_step_line(step, counts[step], results))
            for result in results:
                if result.fired and result.name not in fired:
                    fired.add(result.name)
                    echo(f"  FIRED {result.name} ({result.check.severity}) at steps {spans(result.fired_steps)}: "
                         f"{result.evidence_text()}")
            if options.fail_fast and any(r.status == "fail" for r in results):
                return _end(1, f"an error-level check fired at step {step}", state, checked, last, results, follower, echo)
            if options.until_step is not None and step >= options.until_step:
                return _end(None, f"reached step {step}", state, checked, last, results, follower, echo, options.strict)
        if follower.behind:  # catching up: the steps already complete are read at once, timeout or not
            continue
        if options.timeout is not None and time.monotonic() - started >= options.timeout:
            if (waiting := follower.metrics_wait()) is not None:
                echo(f"waiting: {waiting}")
            break
        time.sleep(options.poll)
    return _end(None, reason, state, checked, last, results, follower, echo, options.strict)


def _step_counts(batch: NewSteps) -> dict[int, tuple[int, int]]:
    """Trajectories and scalars of each step of ``batch``."""
    counted = [dict(getattr(batch, name).group_by("step").len().iter_rows())
               for name in ("trajectories", "step_metrics")]
    return {step: (counted[0].get(step, 0), counted[1].get(step, 0)) for step in batch.steps}


def _step_line(step: int, counts: tuple[int, int], results) -> str:
    trajectories, scalars = counts
    failing = [r.name for r in results if r.status == "fail"]
    warning = [r.name for r in results if r.status == "warn"]
    return (f"step {step}: {trajectories} trajectories, {scalars} scalars; "
            f"{len(failing)} failing{' (' + ', '.join(failing) + ')' if failing else ''}, "
            f"{len(warning)} warning{' (' + ', '.join(warning) + ')' if warning else ''}")


def _end(code: int | None, reason: str, state: RunState | None, checked: int, last: int | None, results,
         follower: RunFollower, echo: Callable[[str], None], strict: bool = False) -> WatchResult:
    """``checked``: how many steps were judged, ``last`` the last of them (a batch's measures may
    reach beyond it); the run's checks count its measured steps up to it, as ``trajlens check`` does."""
    if state is None:
        echo(f"stopped ({reason}): no complete step seen")
        return WatchResult(0 if code is None else code, reason, None, follower)
    run = RunChecks(state.info.run_id, state.info.source, list(results), measured_steps(state, last))
    if code is None:
        code = 1 if run.failed(strict) else 0
    echo(f"stopped ({reason}) after {checked} step{'' if checked == 1 else 's'}")
    return WatchResult(code, reason, run, follower)


__all__ = ["COMPLETE_MARKER", "RunFollower", "WatchOptions", "WatchResult", "watch"]
