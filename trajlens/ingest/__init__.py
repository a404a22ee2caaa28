"""Getting trajectory logs into a store.

:func:`ingest` takes any mix of sources and writes each as a run into a store, all or
nothing. What a source holds is decided by the format registry
(:mod:`trajlens.ingest.formats`): one entry per format, each with one ``detect`` and one
``load``. A folder that mixes formats becomes one run per sub-folder (and per format of its
loose files).

========================  ==========================================================
``parquet``               a run directory in the canonical layout (a folder of them: each)
``trl``                   TRL ``GRPOTrainer`` completions, trainer state and TensorBoard runs
``verl``                  verl rollout dumps (``<step>.jsonl``)
``metrics``               training scalars exported as JSONL or CSV
``tensorboard``           TensorBoard event files (``events.out.tfevents.*``)
``atropos``               Atropos scored groups (JSONL)
``swe-agent-dataset``     rows of nebius/SWE-agent-trajectories
``inspect-ai``            inspect_ai ``.eval`` and ``.json`` logs
``verifiers``             verifiers 0.3 ``results.jsonl`` rollout rows
``verifiers-traces``      verifiers 0.4 ``traces.jsonl`` episodes (message graphs)
``skyrl``                 skyrl-train eval dumps and ``GeneratorOutput`` JSON
``prime-rl``              prime-rl training batches (``rollouts/step_<N>/rollouts.bin``)
``skyrl-agent``           SkyRL-Agent CodeAct trace files (``trace/<run>/step<N>/...``)
``harbor``                Harbor job and trial folders (ATIF ``trajectory.json``)
``terminal-bench``        Terminal-Bench ``tb run`` folders
``rllm``                  rLLM / DeepSWE episode logs
``art``                   OpenPipe ART trajectory groups (Parquet)
``openrlhf``              OpenRLHF's logged sample tables (wandb)
agent formats             mini-swe-agent v1/v2, SWE-agent, OpenHands V0/V1, OpenAI chat
========================  ==========================================================

How much of a file a loader reads is bounded by :class:`~trajlens.limits.Limits`
(nesting depth, field and record size, time for a log-supplied regex); see ``docs/limits.md``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from trajlens.errors import InputError, Problem, StoreError
from trajlens.limits import Limits

if TYPE_CHECKING:
    import pyarrow as pa

    from trajlens.ingest.formats import Source
    from trajlens.rows import RunData

# Heavy imports (pyarrow, duckdb) happen inside the functions: ``import trajlens`` binds
# :func:`ingest` eagerly, and must stay fast.

Progress = Callable[[str], None]


@dataclass
class IngestResult:
    """What an ingest wrote: run ids, the records it skipped (lenient mode) and the notes on
    records it kept but read otherwise."""

    store: Path
    run_ids: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    """Each record skipped (``kind`` ``skipped``) and each note on a record kept (``note``)."""
    notes: list[str] = field(default_factory=list)
    """Runs kept unchanged, and analyses dropped because their run changed."""
    unchanged: list[str] = field(default_factory=list)
    """The run ids of ``run_ids`` whose source had not changed: kept as they were."""

    @property
    def skipped(self) -> list[Problem]:
        """The problems that left a record out of its run."""
        return _skipped(self.problems)


def _skipped(problems: Sequence[Problem]) -> list[Problem]:
    """The problems of ``problems`` that left something out (not the notes on records kept)."""
    return [problem for problem in problems if problem.kind == "skipped"]


def detect_source(path: Path) -> str:
    """Name the format of the source at ``path`` (``mixed`` for a folder of several)."""
    from trajlens.ingest.formats import plan

    sources = plan(path)
    names = {source.format.name for source in sources}
    return names.pop() if len(names) == 1 else "mixed"


def load(path: Path | str, *, run_id: str | None = None, strict: bool = True,
         limits: Limits | None = None) -> "RunData":
    """Load a non-Parquet source into memory as one run."""
    from trajlens import limits as _limits
    from trajlens.ingest.formats import plan

    path = Path(path)
    with _limits.using(limits):
        return _loaded(path, plan(path), run_id, strict)


def _loaded(path: Path, planned: "list[Source]", run_id: str | None, strict: bool) -> "RunData":
    """The one run of the log sources ``planned`` for ``path`` (its metrics sources left aside)."""
    sources = [source for source in planned if source.format.kind != "metrics"]
    if len(sources) != 1 or sources[0].format.load is None:
        what = (f"logs of the {sources[0].format.name} format are" if len(sources) == 1
                else f"a folder of {len(sources)} runs is")
        raise InputError(str(path), f"{what} ingested into a store, not loaded",
                         expected="a log file or folder of one run")
    return _load_source(sources[0], run_id, strict)


def load_run(path: Path | str, *, run_id: str | None = None, strict: bool = True,
             planned: "list[Source] | None" = None) -> "RunData":
    """:func:`load`, with the training scalars of the metrics files beside the run's logs (verl's
    file logger in an experiment folder) joined to it as :func:`ingest` joins them: the run ingest
    would store, in memory. ``planned``: ``plan(path)``, when the caller has it already."""
    from trajlens.ingest.formats import plan

    path = Path(path)
    planned = plan(path) if planned is None else planned
    run = _loaded(path, planned, run_id, strict)
    metric_sources = [source for source in planned if source.format.kind == "metrics"]
    if metric_sources:
        import pyarrow as pa

        tables, problems = _load_metrics(metric_sources, run.run_id, strict, lambda _: None)
        _refuse_repeated_metrics(run.run_id, run.step_metrics.select(["step", "name"]), metric_sources, tables)
        run.step_metrics = pa.concat_tables([run.step_metrics, *tables])
        run.problems.extend(problems)
    return run


def _load_source(source: "Source", run_id: str | None, strict: bool) -> "RunData":
    """The run a source holds; the files planning left out of it (:attr:`Source.left_out`) stop
    a strict load with the first one's error, and are skipped problems of a lenient one."""
    assert source.format.load is not None  # only log sources are loaded
    if strict and source.left_out:
        raise source.left_out[0]
    paths: "Path | list[Path]" = source.paths if len(source.paths) > 1 else source.paths[0]
    run = source.format.load(paths, run_id=run_id or source.run_id, strict=strict)
    named = set(run.problems)  # its loader may have read such a file too, and skipped it with the same words
    run.problems.extend(problem for problem in map(InputError.as_problem, source.left_out) if problem not in named)
    return run


def ingest(
    sources: Sequence[Path | str],
    store: Path | str,
    *,
    strict: bool = True,
    run_id: str | None = None,
    progress: Progress | None = None,
    limits: Limits | None = None,
    replace: bool = False,
) -> IngestResult:
    """Write every source into ``store`` as a run; on any error, the store is unchanged.

    Training-scalar files (JSONL/CSV, TensorBoard event files) join the run loaded from the other sources of the
    same call when there is exactly one; otherwise they form a run of their own. ``limits``
    bound what one log may make the loaders do (see :mod:`trajlens.limits`). A run id
    the store holds for a different source is refused unless ``replace`` (which also reads
    every source again, even one unchanged since it was ingested).
    """
    from trajlens import limits as _limits

    with _limits.using(limits):
        return _ingest(sources, store, strict=strict, run_id=run_id, progress=progress, replace=replace)


def _ingest(sources, store, *, strict, run_id, progress, replace) -> IngestResult:
    import pyarrow as pa

    from trajlens.ingest import parquet
    from trajlens.ingest.formats import plan
    from trajlens.store.handle import store_holding_problem
    from trajlens.store.writer import StoreWriter, joined_source, slug

    if isinstance(sources, (str, bytes, os.PathLike)):
        raise InputError("ingest", field="sources", expected="a list of paths", found=f"the path {str(sources)!r} "
                         f"(pass [{str(sources)!r}])")
    paths = [Path(source) for source in sources]
    if not paths:
        raise InputError("ingest", expected="at least one source", found="none")
    _refuse_overlap(paths)
    # a store among another's runs would read to that one as a damaged run (its hidden staging is
    # where `verify --repair` ingests a run again, so hidden folders are not refused)
    if (holding := store_holding_problem(Path(store), f"store {store}", hidden=False)) is not None:
        raise StoreError(holding)
    planned = [source for path in paths for source in plan(path)]
    result = IngestResult(store=Path(store))
    tick = progress or (lambda _: None)
    metric_sources = [source for source in planned if source.format.kind == "metrics"]
    metric_files = [path for source in metric_sources for path in source.paths]
    others = [source for source in planned if source.format.kind != "metrics"]
    if run_id is not None and len(others) > 1:
        raise InputError("ingest", field="run_id", expected="a single run source with --run",
                         found=f"{len(others)} runs")
    # Metrics files join the run of the call's only other source; otherwise they are a run.
    owner = others[0] if len(others) == 1 else None
    with StoreWriter(store, sources=paths, replace=replace) as writer:
        writer.call = ingest_call(paths, run_id=run_id, strict=strict)
        loaded: list["RunData"] = []
        for source in others:
            if source.format.kind == "log":
                loaded.append(_load_source(source, run_id, strict))
                tick(joined_source(source.paths))
        if metric_files:
            if owner is None:
                target = run_id or slug(metric_files[0].stem)
            elif owner.format.kind == "parquet":
                target = run_id or parquet.run_id_of(owner.paths[0])
            else:
                target = loaded[0].run_id
            tables, problems = _load_metrics(metric_sources, target, strict, tick)
            _refuse_repeated_metrics(target, _own_metrics(owner, loaded), metric_sources, tables)
            if owner is None:  # a run of metrics alone: its problems are its own (every record bad: none)
                loaded.append(_metrics_only_run(target, metric_sources, tables, problems))
                if others:
                    result.notes.append(f"{joined_source(metric_files)}: training scalars beside {len(others)} runs, "
                                        f"ingested as their own run {target} (they join a run only when the call "
                                        "has one)")
            else:
                result.problems.extend(problems)
                if owner.format.kind != "parquet":
                    loaded[0].step_metrics = pa.concat_tables([loaded[0].step_metrics, *tables])
        else:
            tables = []
        for source in others:
            if source.format.kind != "parquet":
                continue
            result.run_ids.append(parquet.copy_run(
                source.paths[0], writer, run_id=run_id, extra_metrics=tables if owner else (), strict=strict,
                problems=result.problems, on_file=lambda p: tick(str(p))))
        emptied: list["RunData"] = []
        for run in loaded:
            run.validate(run.runs.column("source")[0].as_py())
            result.problems.extend(run.problems)
            if _every_record_bad(run):
                emptied.append(run)
                result.notes.append(f"run {run.run_id}: every record was bad; not written")
                continue
            writer.add(run, run.runs.column("source")[0].as_py())
            result.run_ids.append(run.run_id)
        if emptied and not result.run_ids:
            run = emptied[0]
            bad = _skipped(run.problems)
            # the first one's whole reason (its file, record, field, any limit and how to raise
            # it), as ingest without --lenient would have stopped with it
            raise InputError(run.runs.column("source")[0].as_py(),
                             f"no record left to ingest: {len(bad)} skipped; the first: {bad[0].message}")
        writer.publish()
    result.notes.extend(writer.notes)
    result.unchanged.extend(writer.unchanged)
    return result


def _refuse_overlap(paths: list[Path]) -> None:
    """An InputError for a source given twice, or inside another source of the call: its logs
    would be read twice, as two runs of the same trajectories."""
    resolved = [path.resolve() for path in paths]
    for index, (path, inner) in enumerate(zip(paths, resolved)):
        for outer_path, outer in zip(paths[:index], resolved[:index]):
            if inner == outer:
                how = "the same path as"
            elif outer in inner.parents:
                how = "a path inside"
            elif inner in outer.parents:
                how = "a folder holding"
            else:
                continue
            raise InputError(str(path), expected="sources that do not overlap (each log read once)",
                             found=f"{how} the source {str(outer_path)!r}")


def _every_record_bad(run: "RunData") -> bool:
    """Whether a run loaded leniently kept nothing: its records were all skipped as bad."""
    return bool(_skipped(run.problems)) and run.trajectories.num_rows == 0 and run.step_metrics.num_rows == 0


def ingest_call(paths: "list[Path]", *, run_id: str | None, strict: bool) -> dict:
    """The arguments of an ingest, as recorded with each run it writes (``ingest.json``):
    what ``trajlens verify --repair`` calls :func:`ingest` with to write the run again. With
    the version of trajlens that wrote the run: another version reads an unchanged source again
    (:meth:`~trajlens.store.writer.StoreWriter.keep_unchanged`)."""
    import dataclasses

    from trajlens import __version__
    from trajlens import limits as _limits

    return {"sources": [str(path.resolve()) for path in paths], "run_id": run_id, "strict": strict,
            "limits": dataclasses.asdict(_limits.current()), "trajlens": __version__}


def _load_metrics(sources: "list[Source]", run_id: str, strict: bool,
                  tick: Progress) -> "tuple[list[pa.Table], list[Problem]]":
    """Each metrics source's table, and the records skipped (lenient mode)."""
    from trajlens.store.writer import joined_source

    tables, problems = [], []
    for source in sources:
        assert source.format.load is not None  # every metrics format has a loader
        loaded = source.format.load(source.paths, run_id=run_id, strict=strict)
        tables.append(loaded.table)
        problems.extend(loaded.problems)
        tick(joined_source(source.paths))
    return tables, problems


def _own_metrics(owner: "Source | None", loaded: "list[RunData]") -> "pa.Table | None":
    """The step metrics the run the metrics files join logs itself (step and name), if any."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from trajlens.store.layout import table_files

    if owner is None:
        return None
    if owner.format.kind != "parquet":
        return loaded[0].step_metrics.select(["step", "name"])
    files = table_files(owner.paths[0], "step_metrics")
    return pa.concat_tables([pq.read_table(f, columns=["step", "name"]) for f in files]) if files else None


def _refuse_repeated_metrics(run_id: str, own: "pa.Table | None", sources: "list[Source]", tables: list) -> None:
    """A metrics file may not give a metric at a step where the run (or an earlier metrics file)
    already gives it: the error names that file, the step and the metric."""
    import polars as pl

    from trajlens.store.writer import joined_source

    held = pl.from_arrow(own.select(["step", "name"])) if own is not None else None
    for source, table in zip(sources, tables):
        given = pl.from_arrow(table.select(["step", "name"]))
        if held is not None:
            repeated = given.join(held, on=["step", "name"], how="semi")
            if repeated.height:
                step, name = repeated.row(0)
                raise InputError(joined_source(source.paths), record=f"step {step}", field=name,
                                 expected=f"a metric the run {run_id} does not already log at that step",
                                 found="one its own logs or an earlier metrics file give")
        held = given if held is None else pl.concat([held, given], how="vertical_relaxed")


def _metrics_only_run(run_id: str, sources: "list[Source]", tables, problems: "list[Problem]") -> "RunData":
    """A run of training scalars alone, named for the loader that read them (``tensorboard``,
    ``metrics`` for JSONL or CSV, ``metrics`` when both did)."""
    import pyarrow as pa

    from trajlens.rows import RunBuilder
    from trajlens.store.writer import joined_source

    formats = {source.format.name for source in sources}
    builder = RunBuilder(run_id, source_format=formats.pop() if len(formats) == 1 else "metrics",
                         source=joined_source([path for source in sources for path in source.paths]))
    builder.problems.extend(problems)
    run = builder.build()
    run.step_metrics = pa.concat_tables(tables)
    return run


__all__ = ["IngestResult", "Limits", "detect_source", "ingest", "load", "load_run"]
