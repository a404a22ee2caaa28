"""``trajlens report``: classify, report every stage, recompute advantages, plot, for every run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from trajlens.cli._app import app
from trajlens.cli._options import COUNT_MAX
from trajlens.cli._output import check_folder_output, entry_source_problems, folder_output
from trajlens.cli._progress import progress_bar
from trajlens.errors import ConfigError, TrajlensError


def parse_pair(text: str) -> tuple[str, str]:
    """``A,B``: two sides of a comparison."""
    a, sep, b = text.partition(",")
    if not sep or not a or not b or "," in b:
        raise ConfigError([f"--compare {text!r}: expected A,B such as sao-r6,sao-r7 or sao-r6:Q4,sao-r7:Q4"])
    return a.strip(), b.strip()


def check_sides(handle, pairs: list[tuple[str, str]]) -> None:
    """Resolve every ``--compare`` side before any work; one error lists every side that fails."""
    from trajlens.compare import parse_side

    problems = []
    for side in dict.fromkeys(side for pair in pairs for side in pair):
        try:
            parse_side(handle, side)
        except TrajlensError as error:
            for problem in error.problems if isinstance(error, ConfigError) else [str(error)]:
                problems.append(f"--compare {problem}" if problem.startswith("side ")
                                else f"--compare side {side!r}: {problem}")
    if problems:
        raise ConfigError(problems)


@app.command()
def report(
    store: Annotated[Path, typer.Argument(help="Store directory.")],
    output: Annotated[Path, typer.Option("--out", "-o", help="Directory for the reports and figures.")],
    run: Annotated[Optional[list[str]], typer.Option("--run", "-r", help="Run id (repeatable; default: every run).")] = None,
    n: Annotated[int, typer.Option("--n", min=1, max=COUNT_MAX, help="Trajectories drawn per stage.")] = 80,
    seed: Annotated[int, typer.Option("--seed", min=0, max=COUNT_MAX, help="Seed of the draw.")] = 0,
    compare: Annotated[Optional[list[str]], typer.Option("--compare", help="A,B: a comparison for index.html (repeatable); sides as in trajlens compare.")] = None,
    viewers: Annotated[int, typer.Option("--viewers", min=0, max=COUNT_MAX, help="Trajectory viewer pages per run.")] = 3,
    split: Annotated[Optional[str], typer.Option("--split", help="Trajectories of this split; a run without it is reported on the split it has, and when no run has it the command names their splits (default: train).")] = None,
    png: Annotated[bool, typer.Option("--png", help="Also write each figure as PNG, and show the PNGs in the Markdown (for a page that shows no SVG).")] = False,
    attribute: Annotated[bool, typer.Option("--attribute", help="Attribute every run first, as trajlens attribute does (its tables saved in the store), so each drift on the first screen says whether it is learning or an estimator artefact; about one more read of each run.")] = False,
) -> None:
    """Classify, report every stage (N=80), recompute advantages and plot, for every run of a store.

    A run `trajlens classify` has classified is reported on its saved classification.

    Prints the overview (per run: its kind, the checks that fire, its main finding) and writes
    OUT/index.html (one self-contained page: the overview, every run, comparisons, figures with hover
    values), OUT/README.md (findings per run), OUT/RUN/stage_report.md with SVG figures, and
    OUT/RUN/view/*.html (viewer pages of a few trajectories per run). They are written beside OUT
    first and moved into it at the end, so a report that fails leaves OUT as it was. Files an
    earlier report wrote into OUT that this one does not (a run left out, fewer viewer pages) are
    removed where unchanged since; other files in OUT are kept, and a report that would replace
    one of them (a stage_report.md of your own in a run's folder) fails, leaving OUT as it was.

    Example: trajlens report store --out out/report --compare sao-r6,sao-r7

    Example: trajlens report store --out out/report --attribute
    """
    import trajlens
    from trajlens.report import report_store
    from trajlens.report.build import foreign_files, report_front_files
    from trajlens.run.splits import reported_split

    pairs = [parse_pair(text) for text in compare or []]
    check_folder_output(output, store=store)
    if foreign := foreign_files(output):
        raise ConfigError([f"--out {output}: holds {' and '.join(foreign)}, which no trajlens report wrote; report "
                           "into a new or empty folder, or into one a report was written into"])
    handle = trajlens.open(store)
    runs = list(dict.fromkeys(run or handle.run_ids()))  # a run named twice is reported once
    handle.require_runs(runs)
    if problems := entry_source_problems(output, runs, store):  # each run's files go into OUT/<run id>/
        raise ConfigError(problems)
    split = reported_split(handle, runs, split)
    check_sides(handle, pairs)
    with folder_output(output, listed=True, unlisted_ours=report_front_files(output)) as partial, \
            progress_bar("reporting", total=len(runs)) as tick:
        written = report_store(handle, partial, n=n, seed=seed, run_ids=runs, comparisons=pairs,
                               viewers_per_run=viewers, progress=tick, split=split, png=png, attribute=attribute)
    from trajlens.report.overview import overview_text

    typer.echo(overview_text(written))
    typer.echo(f"\nwrote reports for {len(written)} run(s) under {output}; open {output / 'index.html'} "
               f"(findings per run: {output / 'README.md'})")
