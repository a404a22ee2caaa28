"""``trajlens attribute``: which estimator rewarded the behaviour that grew."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from trajlens.cli._app import app
from trajlens.cli._options import COUNT_MAX, EngineOption, RayAddressOption, utf8_argument
from trajlens.cli._output import OUTPUT_FORMATS, distinct_outputs, output_problems, write_text_atomically, write_output
from trajlens.cli._progress import progress_bar
from trajlens.errors import ConfigError
from trajlens.estimators.spec import AGGREGATION_MODES


def _split_options(pairs: list[str], labels: list[str]) -> dict[str, dict]:
    """``--option`` values: ``LABEL.NAME=VALUE``, or ``NAME=VALUE`` when one estimator is given."""
    from trajlens.cli.advantages import parse_options

    grouped: dict[str, list[str]] = {}
    problems = []
    for pair in pairs:
        name = pair.partition("=")[0]
        label, dot, option = name.partition(".")
        if dot and label in labels:
            grouped.setdefault(label, []).append(pair[len(label) + 1:])
        elif dot and len(labels) > 1:
            problems.append(f"--option {pair!r}: no --estimator is labelled {label!r} (labels: {', '.join(labels)})")
        elif len(labels) == 1:
            grouped.setdefault(labels[0], []).append(pair)
        else:
            problems.append(f"--option {pair!r}: with several --estimator, write LABEL.NAME=VALUE")
    if problems:
        raise ConfigError(problems)
    return {label: parse_options(values) for label, values in grouped.items()}


@app.command()
def attribute(
    store: Annotated[str, typer.Argument(help="Store directory (with --engine ray, also a file:// URI).")],
    run: Annotated[str, typer.Option("--run", "-r", help="Run id.")],
    estimator: Annotated[Optional[list[str]], typer.Option(
        "--estimator", "-e", help="Recomputation NAME or LABEL=NAME (repeatable; default: every one the run's data allows).")] = None,
    option: Annotated[Optional[list[str]], typer.Option(
        "--option", help="Estimator option NAME=VALUE (one --estimator) or LABEL.NAME=VALUE.")] = None,
    k: Annotated[int, typer.Option("--k", min=1, max=COUNT_MAX, help="Lag in steps: credit at step t against the share change to t+k.")] = 5,
    aggregation: Annotated[Optional[list[str]], typer.Option(
        "--aggregation", help=f"Loss aggregation mode, repeatable: {', '.join(AGGREGATION_MODES[:-1])} or "
        f"{AGGREGATION_MODES[-1]} (default: verl's four, token-mean and the seq-mean ones).")] = None,
    out: Annotated[Optional[Path], typer.Option(
        "--out", "-o", help="Also write the section to a .md or .html file, or the per-class summary table "
        "(class, estimator, aggregation: credit, relative credit, superstition) to a .csv, .json or .parquet file.")] = None,
    json_out: Annotated[Optional[Path], typer.Option(
        "--json", help="Also write the verdicts (class, direction, onset, verdict, the run's estimator and "
        "aggregation, the evidence) to this JSON file.")] = None,
    engine: EngineOption = "local",
    ray_address: RayAddressOption = None,
) -> None:
    """Attribute a run's behaviour drift to the estimators whose credit predicts it.

    Credits every tool call with the advantage of the tokens that produced it under each
    estimator and loss aggregation, saves the store tables call_credit, class_credit and the
    summary tables the report reads (attribution_runs, attribution_drift, ...), and
    prints which behaviour grew or decayed, from when, which estimator's credit predicts it,
    and what the other estimators would have given the same calls.

    Example: trajlens attribute store --run causal-r6

    Example: trajlens attribute store --run causal-r6 --json verdicts.json

    Example: trajlens attribute store --run causal-r6 -e gae_raw=gae --option whiten=false --k 3

    Example: trajlens attribute store --run causal-r6 --engine ray --ray-address auto
    """
    from trajlens.attribution import AGGREGATIONS, DriftConfig, attribution_markdown, parse_recomputations
    from trajlens.engine.attribution import attribute_on
    from trajlens.engine.session import engine_session

    problems = output_problems(out, tuple(OUTPUT_FORMATS), store=store) if out is not None else []
    problems += output_problems(json_out, flag="--json", store=store) if json_out is not None else []
    problems += distinct_outputs({"--out": out, "--json": json_out})
    if problems:
        raise ConfigError(problems)
    recomputations = None
    if estimator:
        labels = [utf8_argument(pair, "--estimator").partition("=")[0] for pair in estimator]
        recomputations = parse_recomputations(estimator, _split_options(option or [], labels))
    elif option:
        raise ConfigError(["--option needs an --estimator to apply to"])
    settings = dict(aggregations=tuple(aggregation or AGGREGATIONS), drift=DriftConfig(k=k))
    with engine_session(engine, ray_address, store) as session, progress_bar("attributing") as tick:
        handle = session.local_store("attribute")
        handle.require_runs([run])
        result = attribute_on(session.engine, handle, run, recomputations, progress=tick, **settings)
    text = attribution_markdown(result)
    typer.echo(text)
    new_json = json_out is not None and not json_out.exists()
    if json_out is not None:
        import json

        document = json.dumps(result.verdict_document(), indent=2, allow_nan=False) + "\n"
        write_text_atomically(json_out, document, flag="--json")
        typer.echo(f"wrote {json_out}")
    if out is not None:
        try:
            if OUTPUT_FORMATS[out.suffix.lower()].documents:
                write_output(out, document=text)
            else:
                write_output(out, frame=result.class_summary)
        except ConfigError:
            if new_json:  # the command failed: the --json file it made goes with it
                json_out.unlink(missing_ok=True)  # type: ignore[union-attr]
            raise
        typer.echo(f"wrote {out}")
    typer.echo(f"saved call_credit, class_credit and the attribution summary tables for {run} in {store}")
