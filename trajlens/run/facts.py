"""What a stored run's data holds, for choosing estimators: :func:`stored_facts`.

The registry decides which estimators a run allows from its :class:`RunFacts`
(:func:`trajlens.estimators.registry.run_facts` computes them from frames in memory). A stored
run's token arrays can be hundreds of millions of tokens, so here the facts of its token
arrays come from the Parquet footers (rows, and the null count of each column's entries),
without reading the arrays. Every surface that asks what a stored run allows (attribution,
the report, comparisons) asks here.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, NamedTuple

import polars as pl
import pyarrow.parquet as pq

from trajlens.estimators.identify import LOGGED_COLUMNS, logs_advantages
from trajlens.estimators.registry import RunFacts, run_facts
from trajlens.run.reader import RunReader

OPTIONAL_TOKEN_COLUMNS: tuple[str, ...] = ("values", "log_probs", "sum_pi_squared")
"""Token columns a run may lack, or hold for some rows only."""
LOGGED_TOKEN_COLUMN = LOGGED_COLUMNS["tokens"]


class StoredFacts(NamedTuple):
    """The facts of a stored run, from its trajectories and the footers of its token files."""

    facts: RunFacts
    """What recomputation on the stored frames can rely on: critic values on every token row,
    token counts in ``model_tokens``, token arrays for every training trajectory."""
    token_rows: int
    """Token rows of the run (every split)."""
    complete: frozenset[str]
    """Optional token columns with no null entry."""
    present: frozenset[str]
    """Optional token columns some token file holds."""
    logged: bool = False
    """Whether the run logged advantages: a training trajectory's ``logged_advantage``, or an
    entry of a token file's ``logged_advantages`` (from the footers)."""

    def possible(self) -> RunFacts:
        """The most the run's token arrays can turn out to hold once read (a model token in a
        response mask is not known from the footers): what an estimator needs may be there."""
        return replace(self.facts, token_arrays=self.token_rows > 0,
                       token_counts=self.facts.token_counts or self.token_rows > 0,
                       critic_values=self.token_rows > 0 and "values" in self.present,
                       log_probs=self.token_rows > 0 and "log_probs" in self.present,
                       sum_pi_squared=self.token_rows > 0 and "sum_pi_squared" in self.present)


def stored_facts(reader: RunReader, trajectories: pl.DataFrame, config: Any, store: Any = None,
                 estimator_column: str | None = None) -> StoredFacts:
    """The :class:`StoredFacts` of the run ``reader`` reads, whose training ``trajectories``
    are given (in memory: one row each) and whose logged ``config`` (or, where it lacks
    ``algorithm.adv_estimator``, its ``runs.estimator``: ``estimator_column``) names its estimator.

    ``store``: the open store, asked by SQL whether every token row has its ``values`` list
    when the footers count nulls in that column (a null entry inside a list also counts there).
    """
    token_rows, complete, present, logged_tokens = _token_footers(reader)
    if "values" not in complete and "values" in present and token_rows and store is not None:
        from trajlens.errors import QueryError

        try:
            counted = store.sql('SELECT count("values") AS with_values FROM tokens WHERE run_id = $run',
                                {"run": reader.run_id})["with_values"][0]
        except QueryError:  # the store's tokens have no values column
            counted = 0
        if counted >= token_rows:
            complete = complete | {"values"}
    base = run_facts(trajectories, None, config, estimator_column)
    height = trajectories.height
    token_arrays = height > 0 and token_rows >= height
    facts = replace(
        base,
        token_arrays=token_arrays,
        token_gap="",  # which trajectory lacks them is not known from the footers
        critic_values=token_arrays and "values" in complete,
        token_counts=height > 0 and "model_tokens" in trajectories.columns
        and trajectories["model_tokens"].null_count() == 0,
        log_probs=token_arrays and "log_probs" in complete,
        sum_pi_squared=token_arrays and "sum_pi_squared" in complete,
    )
    logged = logged_tokens or logs_advantages(trajectories, "trajectories")
    return StoredFacts(facts, token_rows, frozenset(complete), frozenset(present), logged)


def _token_footers(reader: RunReader) -> tuple[int, frozenset[str], frozenset[str], bool]:
    """Token rows of the run, which optional token columns have no null entry, which some
    file holds, and whether some ``logged_advantages`` entry is not null: from the Parquet
    footers alone (a row group without statistics counts as logged)."""
    filesystem, _ = reader.location.resolve()
    files = reader.location.partitions(reader.run_id, "tokens").all_files()
    rows = 0
    nulls = dict.fromkeys(OPTIONAL_TOKEN_COLUMNS, 0)
    present: set[str] = set()
    logged = False
    for path in files:
        with filesystem.open_input_file(path) as source:
            metadata = pq.ParquetFile(source).metadata
        rows += metadata.num_rows
        leaves = {metadata.schema.column(i).path.split(".")[0]: i for i in range(metadata.num_columns)}
        if not logged and LOGGED_TOKEN_COLUMN in leaves:
            for group in range(metadata.num_row_groups):
                chunk = metadata.row_group(group).column(leaves[LOGGED_TOKEN_COLUMN])
                statistics = chunk.statistics
                logged = logged or statistics is None or not statistics.has_null_count \
                    or statistics.null_count < chunk.num_values
        for name in OPTIONAL_TOKEN_COLUMNS:
            if name not in leaves:
                nulls[name] += 1
                continue
            present.add(name)
            for group in range(metadata.num_row_groups):
                statistics = metadata.row_group(group).column(leaves[name]).statistics
                nulls[name] += statistics.null_count if statistics is not None and statistics.has_null_count else 1
    complete = {name for name, count in nulls.items() if files and count == 0}
    return rows, frozenset(complete), frozenset(present), logged


def logs_token_advantages(reader: RunReader) -> bool:
    """Whether some token file of the run holds a ``logged_advantages`` entry (footers alone)."""
    return _token_footers(reader)[3]


__all__ = ["OPTIONAL_TOKEN_COLUMNS", "StoredFacts", "logs_token_advantages", "stored_facts"]
