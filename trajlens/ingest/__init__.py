"""Getting trajectory logs into a store.

:func:`ingest` takes any mix of sources and writes each as a run into a store, all or
nothing. What a source is gets decided by :func:`detect_source`:

========================  ==========================================================
``parquet``               a run directory in the canonical layout
``runs``                  a directory holding several run directories (``sample_data/``)
``verl``                  verl rollout dumps (``<step>.jsonl``)
``metrics``               training scalars exported as JSONL or CSV
agent formats             mini-swe-agent v1/v2, SWE-agent, OpenHands V0/V1, OpenAI chat
========================  ==========================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from trajlens.errors import InputError, Problem

if TYPE_CHECKING:
    from trajlens.model import RunData

# Heavy imports (pyarrow, duckdb) happen inside the functions: ``import trajlens`` binds
# :func:`ingest` eagerly, and must stay fast.

Progress = Callable[[str], None]


@dataclass
class IngestResult:
    """What an ingest wrote: run ids, and (lenient mode) the records it skipped."""

    store: Path
    run_ids: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """Runs kept unchanged, and analyses dropped because their run changed."""


def detect_source(path: Path) -> str:
    """Name the kind of source at ``path`` (see the module docstring)."""
    from trajlens.store.layout import is_run_dir

    if not path.exists():
        raise InputError(str(path), "no such file or directory")
    if is_run_dir(path):
        return "parquet"
    if path.is_dir() and any(is_run_dir(child) for child in path.iterdir()):
        return "runs"
    from trajlens.ingest import metrics, verl

    if verl.detect(path):
        return "verl"
    if path.is_file() and metrics.detect(path):
        return "metrics"
    return "agent"


def load(path: Path | str, *, run_id: str | None = None, strict: bool = True) -> "RunData":
    """Load a non-Parquet source into memory as one run."""
    from trajlens.ingest import agents, verl

    path = Path(path)
    kind = detect_source(path)
    if kind == "verl":
        return verl.load_verl([path], run_id=run_id, strict=strict)
    if kind == "agent":
        return agents.load_agent_logs([path], run_id=run_id, strict=strict)
    raise InputError(str(path), f"a {kind} source is ingested into a store, not loaded", expected="a log file or folder")


def ingest(
    sources: Sequence[Path | str],
    store: Path | str,
    *,
    strict: bool = True,
    run_id: str | None = None,
    progress: Progress | None = None,
    replace: bool = False,
) -> IngestResult:
    """Write every source into ``store`` as a run; on any error, the store is unchanged.

    Training-scalar files (JSONL/CSV) join the run loaded from the other sources of the
    same call when there is exactly one; otherwise they form a run of their own. A run id the
    store holds for a different source is refused unless ``replace``.
    """
    import pyarrow as pa

    from trajlens.ingest import parquet
    from trajlens.store.layout import is_run_dir
    from trajlens.store.writer import StoreWriter, slug

    paths = [Path(source) for source in sources]
    if not paths:
        raise InputError("ingest", expected="at least one source", found="none")
    kinds = [(path, detect_source(path)) for path in paths]
    result = IngestResult(store=Path(store))
    tick = progress or (lambda _: None)
    metric_files = [path for path, kind in kinds if kind == "metrics"]
    others = [(path, kind) for path, kind in kinds if kind != "metrics"]
    if run_id is not None and (len(others) > 1 or any(kind == "runs" for _, kind in others)):
        raise InputError("ingest", field="run_id", expected="a single run source with --run",
                         found=f"{len(others)} sources")
    # Metrics files join the run of the call's only other source; otherwise they are a run.
    owner = others[0] if len(others) == 1 and others[0][1] != "runs" else None
    with StoreWriter(store, sources=paths, replace=replace) as writer:
        loaded: list["RunData"] = []
        for path, kind in others:
            if kind == "verl" or kind == "agent":
                loaded.append(load(path, run_id=run_id, strict=strict))
                tick(str(path))
        if metric_files:
            if owner is None:
                target = run_id or slug(metric_files[0].stem)
            elif owner[1] == "parquet":
                target = run_id or parquet.run_id_of(owner[0])
            else:
                target = loaded[0].run_id
            tables = _load_metrics(metric_files, target, strict, result, tick)
            if owner is None:
                loaded.append(_metrics_only_run(target, metric_files, tables))
            elif owner[1] != "parquet":
                loaded[0].step_metrics = pa.concat_tables([loaded[0].step_metrics, *tables])
        else:
            tables = []
        for path, kind in others:
            children = [path] if kind == "parquet" else sorted(p for p in path.iterdir() if is_run_dir(p)) \
                if kind == "runs" else []
            for child in children:
                result.run_ids.append(parquet.copy_run(
                    child, writer, run_id=run_id, extra_metrics=tables if owner else (), strict=strict,
                    problems=result.problems, on_file=lambda p: tick(str(p))))
        for run in loaded:
            run.validate(run.runs.column("source")[0].as_py())
            writer.add(run, run.runs.column("source")[0].as_py())
            result.run_ids.append(run.run_id)
            result.problems.extend(run.problems)
        writer.publish()
    result.notes.extend(writer.notes)
    return result


def _load_metrics(files: list[Path], run_id: str, strict: bool, result: IngestResult, tick: Progress):
    from trajlens.ingest import metrics

    tables = []
    for path in files:
        loaded = metrics.load_metrics(path, run_id=run_id, strict=strict)
        tables.append(loaded.table)
        result.problems.extend(loaded.problems)
        tick(str(path))
    return tables


def _metrics_only_run(run_id: str, files: list[Path], tables) -> "RunData":
    import pyarrow as pa

    from trajlens.model import RunBuilder

    builder = RunBuilder(run_id, source_format="metrics", source=", ".join(str(f) for f in files))
    run = builder.build()
    run.step_metrics = pa.concat_tables(tables)
    return run


__all__ = ["IngestResult", "detect_source", "ingest", "load"]
