"""Prime Intellect hosted training samples: the rollouts ``prime train rollouts RUN_ID`` pages back.

The samples are what prime-rl's orchestrator logs to the platform with
``PrimeMonitor.log_samples`` (``src/prime_rl/utils/monitor/prime.py``; prime-rl is not published
on PyPI). Two generations of that writer are read:

* PrimeIntellect-ai/prime-rl@004274ec (current): ``_rollouts_to_parquet_bytes`` writes one
  Parquet file per step (``_SAMPLE_SCHEMA``), one row per logged rollout: ``run_id``, ``step``,
  ``problem_id`` (the task's ``idx``), ``sample_id`` (its index among the step's logged
  rollouts), ``completion`` (the last branch's whole message list as JSON text), ``trajectory``
  (JSON text: per branch its ``messages``, ``reward``, ``advantage``, ``num_input_tokens``,
  ``num_output_tokens``), ``env_name``, ``task``, ``info``, ``metrics`` and ``timing`` (JSON
  text), ``reward``, ``advantage``, ``num_input_tokens`` and ``num_output_tokens``.
* PrimeIntellect-ai/prime-rl@9fb81eab (older): a JSON ``{run_id, step, samples}`` posted per
  step, each sample ``{step, example_id, prompt, completion, trajectory, reward, advantage,
  answer, task, info, metrics, timing}`` with the messages, trajectory (per turn ``prompt``,
  ``completion``, ``reward``, ``advantage``, ``extras``, ``num_input_tokens``,
  ``num_output_tokens``) and metrics as objects.

The prime CLI (``prime`` 0.18.0, ``prime_cli/commands/rl.py`` ``get_rollouts``) prints one page
of a step's samples as the server returns them, ``json.dumps(indent=2)`` of ``{run_id, samples,
total, page, limit, total_pages}``. A sample's fields may be JSON text (as in the Parquet files)
or already objects. Samples load from such pages (a file, several, or a folder of them), from
JSONL or a JSON array of samples, and from the Parquet files, recognised by their records'
keys whatever the container.

Mapping: a sample is a trajectory ``<step>/<sample_id>`` (``<step>/<example_id>/<k>`` for a
sample without ``sample_id``, ``k`` counting the group's samples in reading order) at its
``step``; ``task_id`` is the ``problem_id`` (or ``example_id``) and ``group_id``
``<step>:<task_id>``, so the rollouts of one problem at one step form a group. ``reward`` as
logged, every numeric ``metrics`` entry a reward channel (an unscored ``null`` is left out), and
the sample's ``advantage`` (what the trainer used) is ``logged_advantage``. The messages
(``completion``: the whole conversation in the Parquet files, the turns after the prompt in
the older samples) give the calls: assistant ``tool_calls`` (verifiers' flat ``{id, name,
arguments}`` or OpenAI's objects) answered by ``tool`` messages, whose output is the
observation and, where it opens with ``<returncode>N</returncode>``, the return code; the
model's text per turn and its final answer. ``model_tokens`` is ``num_output_tokens`` (the
older samples: the sum of their turns' counts, where every turn has one); the format keeps no
token arrays. The platform's run id names the run, and the ``env_name`` of its samples is its
config.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator, NamedTuple, Sequence

from trajlens.errors import InputError
from trajlens.ingest._chat import chat_record
from trajlens.ingest._fields import INT64, Fields, parse_json, type_name
from trajlens.ingest._probe import Probe, files_of, run_name
from trajlens.ingest._records import readable_records
from trajlens.ingest.agents._common import Record
from trajlens.ingest.tools import observed_return_code
from trajlens.rows import TRAJECTORY, RunBuilder, RunData

FORMAT = "prime-hosted"
PAGE_KEYS: frozenset[str] = frozenset({"run_id", "samples"})
"""Keys of a page of samples (with ``total``, ``page``, ``limit`` and ``total_pages`` after them)."""
SAMPLE_KEYS: frozenset[str] = frozenset({"step", "completion", "reward", "advantage"})
"""Keys of every sample of either generation, besides its problem's id."""
PROBLEM_KEYS: tuple[str, ...] = ("problem_id", "example_id")
"""The problem's id: ``problem_id`` in the Parquet files, ``example_id`` in the older samples."""
FILE_NAMES: tuple[str, ...] = ("rollouts_step_*.json",)
"""Names of a step's page as saved from ``prime train rollouts RUN_ID --step N``: such a file that
is no page (empty, another shape) is read and named, not left out."""
_TOTAL_PAGES = re.compile(r'"total_pages"\s*:\s*\d+\s*\}')


def detect(target: Probe | Path | str) -> bool:
    """Pages of samples, or samples, in any container."""
    probe = Probe.of(target)
    keys = probe.record_keys
    if PAGE_KEYS <= keys:  # a page longer than the head shows its last keys in the tail
        return "total_pages" in keys or _TOTAL_PAGES.search(probe.tail) is not None
    return SAMPLE_KEYS <= keys and any(key in keys for key in PROBLEM_KEYS)


class Sample(NamedTuple):
    """One sample as read: where it is, the sample (or why it could not be read) and the
    platform run id of its page."""

    where: str
    record: str
    item: Any
    page_run_id: str | None


def load_prime_hosted(paths: Sequence[Path | str] | Path | str, *, run_id: str | None = None,
                      strict: bool = True) -> RunData:
    """Load pages of samples, sample files or the Parquet sample files (or folders of them) as one run."""
    from trajlens.store.writer import joined_source, slug

    files = files_of(paths, detect, FILE_NAMES, strict=strict)
    counts: dict[tuple[int, str], int] = {}
    read: list[tuple[str, Record | InputError]] = []
    run_ids: set[str] = set()
    env_names: set[str] = set()
    for file in files:
        for sample in samples(file):
            try:
                if isinstance(sample.item, InputError):
                    raise sample.item
                record, platform_run, env = sample_record(sample.item, file, sample.record, counts)
            except InputError as error:
                if strict:
                    raise
                read.append((sample.where, error))
                continue
            run_ids.update(r for r in (platform_run or sample.page_run_id,) if r)
            env_names.update([env] if env else [])
            read.append((sample.where, record))
    name = ", ".join(sorted(run_ids)) or Path(run_name(paths, files)).stem
    config: dict[str, Any] = {"env_names": sorted(env_names)} if env_names else {}
    builder = RunBuilder(run_id or slug(name), name=name, config=config, source_format=FORMAT,
                         source=joined_source(files))
    for where, item in read:
        builder.add_record(item, lambda record: record.trajectories(), where=where, strict=strict)
    return builder.build()


def samples(file: Path) -> Iterator[Sample]:
    """Every sample of ``file``: the records themselves, or the samples of each page record."""
    for number, record in readable_records(file):
        where = f"{file}: record {number}"
        if not (isinstance(record, dict) and PAGE_KEYS <= record.keys()):
            yield Sample(where, str(number), record, None)
            continue
        read = Fields(str(file), number)
        try:
            page_run = read.identifier(record, "run_id")
            items = read.items(record, "samples", required=True) or []
        except InputError as error:
            yield Sample(where, str(number), error, None)
            continue
        for index, item in enumerate(items):
            label = f"{number}, sample {index}"
            yield Sample(f"{file}: record {label}", label, item, None if page_run is None else str(page_run))


def sample_record(sample: Any, file: Path, record: str, counts: dict[tuple[int, str], int]
                  ) -> tuple[Record, str | None, str | None]:
    """One sample as a trajectory, with the platform run id and environment it names;
    ``counts`` numbers the samples of each group that have no ``sample_id``."""
    read = Fields(str(file), record)
    where = f"{file}: record {record}"
    if not isinstance(sample, dict):
        raise read.error(None, "a rollout sample (an object)", type_name(sample))
    step = read.integer(sample, "step", required=True, bounds=(0, INT64[1]))
    assert step is not None  # required
    key = next((k for k in PROBLEM_KEYS if sample.get(k) is not None), PROBLEM_KEYS[0])
    problem = str(read.identifier(sample, key, required=True))
    sample_id = read.integer(sample, "sample_id", bounds=(0, INT64[1]))
    if sample_id is None:
        index = counts.get((step, problem), 0)
        counts[(step, problem)] = index + 1
        trajectory_id = f"{step}/{problem}/{index}"
    else:
        trajectory_id = f"{step}/{sample_id}"
    fields: dict[str, Any] = dict(
        step=step, task_id=problem, group_id=f"{step}:{problem}", reward=read.reward(sample, "reward"),
        reward_channels=_channels(sample, read), logged_advantage=read.number(sample, "advantage"),
        model_tokens=_model_tokens(sample, read), source=f"{file}:{record}",
    )
    completion = _json_field(sample, "completion", read)
    if isinstance(completion, str) or completion is None:
        made = Record(TRAJECTORY(trajectory_id=trajectory_id, num_turns=0 if completion is None else 1,
                                 response_text=completion or None, **fields), [], where=where)
    else:
        made = chat_record(completion, file=file, where=where, trajectory_id=trajectory_id, **fields)
        for call in made.tool_calls:
            if call.get("return_code") is None:
                call["return_code"] = observed_return_code(call.get("observation"))
    platform_run = read.identifier(sample, "run_id")
    return made, None if platform_run is None else str(platform_run), read.text(sample, "env_name") or None


def _json_field(sample: dict[str, Any], key: str, read: Fields) -> Any:
    """A field written as JSON text (the Parquet files) or as the value itself; ``""`` is none.
    A ``completion`` of text that is not a JSON list is a completion environment's answer."""
    value = sample.get(key)
    if not isinstance(value, str):
        return value
    text = read.text(sample, key) or ""
    if not text.strip():
        return None
    if key == "completion":
        try:
            parsed = parse_json(text, read.file, record=read.record)
        except InputError:
            return text
        return parsed if isinstance(parsed, list) else text
    try:
        return parse_json(text, read.file, record=read.record)
    except InputError as error:
        raise read.error(key, "JSON text", error.found or str(error)) from None


def _channels(sample: dict[str, Any], read: Fields) -> list[dict[str, Any]]:
    metrics = _json_field(sample, "metrics", read)
    if metrics is None:
        return []
    if not isinstance(metrics, dict):
        raise read.error("metrics", "an object of named scores", type_name(metrics))
    channels = []
    for name, value in metrics.items():
        if isinstance(value, bool):
            channels.append({"name": name, "value": float(value)})
        elif isinstance(value, (int, float)):
            channels.append({"name": name, "value": read.number(metrics, name, name=f"metrics.{name}")})
    return channels


def _model_tokens(sample: dict[str, Any], read: Fields) -> int | None:
    tokens = read.integer(sample, "num_output_tokens", bounds=(0, INT64[1]))
    if tokens is not None:
        return tokens
    turns = _json_field(sample, "trajectory", read)
    if not isinstance(turns, list) or not turns:
        return None
    counts = []
    for index, turn in enumerate(turns):
        if not isinstance(turn, dict):
            raise read.error(f"trajectory[{index}]", "a turn (an object)", type_name(turn))
        counts.append(read.integer(turn, "num_output_tokens", bounds=(0, INT64[1]),
                                   name=f"trajectory[{index}].num_output_tokens"))
    return None if any(count is None for count in counts) else sum(c for c in counts if c is not None)


__all__ = ["FORMAT", "PAGE_KEYS", "PROBLEM_KEYS", "SAMPLE_KEYS", "Sample", "detect", "load_prime_hosted", "sample_record", "samples"]
