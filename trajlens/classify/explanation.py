"""What ``trajlens classify --explain`` prints: one tab-separated line per classified call.

The lines are made where a step is classified (:class:`trajlens.engine.classify.ClassifyStep`),
so a run's explanation holds its printed text only, not its calls' arguments and outputs.
"""

from __future__ import annotations

import polars as pl

EXPLAIN_COMMAND_CHARS = 60
"""Characters of a command shown per call."""
EXPLANATION_HEADER: tuple[str, ...] = (
    "run_id", "trajectory_id", "call_index", "tool_name", "class", "decided_by", "source", "command")
"""The columns of the lines, in order."""
EXPLAIN_LINES_AT_ONCE = 65_536
"""Lines of an explanation written to the output together."""
_FIELDS = ("run_id", "trajectory_id", "call_index", "tool_name", "primary_class", "decided_by", "rule_source")


def explanation_lines(calls: pl.DataFrame) -> pl.Series:
    """``line`` per call of ``calls`` (classified with ``explain=True``): its fields of
    :data:`EXPLANATION_HEADER` joined by tabs, missing ones empty, and the start of its command
    (newlines written ``\\n``, tabs as spaces; cut to :data:`EXPLAIN_COMMAND_CHARS` characters,
    the last one ``…``)."""
    command = (pl.col("command").fill_null("").str.replace_all("\n", "\\n", literal=True)
               .str.replace_all("\t", " ", literal=True))
    cut = (pl.when(command.str.len_chars() > EXPLAIN_COMMAND_CHARS)
           .then(command.str.slice(0, EXPLAIN_COMMAND_CHARS - 1) + "…").otherwise(command))
    fields = [pl.col(name).cast(pl.String).fill_null("") if name in calls.columns else pl.lit("") for name in _FIELDS]
    return calls.select(pl.concat_str([*fields, cut], separator="\t").alias("line")).to_series()
