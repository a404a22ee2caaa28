"""inspect_ai eval logs: the ``.eval`` zip and the ``.json`` log.

Read as inspect_ai 0.3.285 writes them (``inspect_ai/log/_recorders/eval.py``: a zip holding
``header.json``, one ``samples/<id>_epoch_<n>.json`` per sample, ``summaries.json`` and
``reductions.json``; ``inspect_ai/log/_recorders/json.py``: one ``EvalLog`` object with its
``samples``). Each sample is an ``EvalSample`` (``inspect_ai/log/_log.py``): ``id``, ``epoch``,
``messages`` (``inspect_ai/model/_chat_message.py``), ``output``, ``scores`` (name ->
``Score``, ``inspect_ai/scorer/_metric.py``), ``model_usage``, ``error`` and ``limit``.

Mapping: a sample-epoch is a trajectory ``<id>/epoch<n>`` (``<log file>:<id>/epoch<n>`` when several
logs load as one run); ``task_id`` and ``group_id`` are the sample id, so a sample's epochs form
a group. A ``.eval`` member compressed with zstd (inspect_ai's default since about 0.3.130;
deflate before) needs the ``zstandard`` package on Python before 3.14. Every score is a reward channel (a dict-valued score gives ``<scorer>.<key>``), its
value as inspect's ``value_to_float`` reads it (``C`` 1, ``I`` 0, ``P`` 0.5, ``N`` 0, ``yes``/``no``,
``true``/``false``, numbers); ``reward`` is the first scorer's, ``resolved`` whether it is ``C``
where it is a letter grade or a boolean. ``exit_status`` is ``error`` for a sample that failed,
the limit's type for one that hit a limit, else the model's last ``stop_reason``.

Messages: an assistant ``tool_calls`` entry ``{id, function, arguments}`` is a call named
``function`` with ``arguments``; a call inspect could not parse (``parse_error``) is a format
error. A ``bash`` call's ``cmd``, and the ``input`` a ``bash_session`` call types, are its
command. The ``tool`` message answering it (``tool_call_id``) is the observation, its
``error.message`` appended. ``content`` is a string or a list of parts; ``text`` parts, with
``reasoning`` parts before them, are the turn's text. ``model_tokens`` and
``reasoning_tokens`` sum ``model_usage``. The run's config keeps the task, model, scorers,
solver plan and generate config.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any, Iterator, Sequence

from trajlens.errors import InputError
from trajlens.ingest._chat import chat_record
from trajlens.ingest._fields import INT64, Fields, parse_json, read_json_file, type_name
from trajlens.ingest._probe import Probe, files_of
from trajlens.ingest.agents._common import Record
from trajlens.limits import reward_problem
from trajlens.rows import RunBuilder, RunData

FORMAT = "inspect-ai"
LOG_KEYS: frozenset[str] = frozenset({"version", "status", "eval"})
"""Keys of an ``EvalLog`` (``.json`` log, or the ``header.json`` of a ``.eval`` zip)."""
HEADER = "header.json"
ZIP_ZSTD = 93
"""The zip compression method number of Zstandard (inspect_ai's ``ZipCompressionMethod.ZSTD``)."""
LOCAL_HEADER_BYTES = 30
SAMPLES_DIR = "samples/"
LETTER_GRADES: dict[str, float] = {"C": 1.0, "I": 0.0, "P": 0.5, "N": 0.0}
"""inspect's CORRECT, INCORRECT, PARTIAL and NOANSWER values and the floats it gives them."""
WORD_GRADES: dict[str, float] = {"yes": 1.0, "no": 0.0, "true": 1.0, "false": 0.0}
SESSION_TOOL = "bash_session"
SESSION_TYPING: frozenset[str] = frozenset({"type", "type_submit"})
"""``bash_session`` actions that type ``input`` into the shell (``inspect_ai/tool/_tools/_bash_session.py``)."""
CONFIG_KEYS: tuple[str, ...] = ("task", "task_version", "model", "model_generate_config", "task_args", "config",
                                "scorers", "dataset", "eval_id", "run_id", "created")


def detect(target: Probe | Path | str) -> bool:
    """A ``.eval`` zip, or a ``.json`` file whose record is an ``EvalLog``."""
    probe = Probe.of(target)
    if probe.suffix == ".eval":
        return probe.is_file and probe.head.startswith("PK\x03\x04")
    return probe.suffix == ".json" and LOG_KEYS <= probe.record_keys


def load_inspect_ai(paths: Sequence[Path | str] | Path | str, *, run_id: str | None = None,
                    strict: bool = True) -> RunData:
    """Load inspect_ai logs (``.eval`` or ``.json`` files, or folders of them) as one run."""
    from trajlens.store.writer import joined_source, slug

    files = files_of(paths, detect, strict=strict)
    name = Path(paths).stem if isinstance(paths, (str, Path)) else files[0].stem
    header = _first_header(files, strict)
    spec = header.get("eval") if isinstance(header.get("eval"), dict) else {}
    config = {key: spec[key] for key in CONFIG_KEYS if key in spec}
    if isinstance(header.get("plan"), dict):
        config["plan"] = header["plan"]
    builder = RunBuilder(run_id or slug(name), name=str(spec.get("task") or name), config=config,
                         source_format=FORMAT, source=joined_source(files))
    for file in files:
        prefix = "" if len(files) == 1 else f"{file.name}:"
        for where, sample in _samples(file):
            builder.add_record(sample, lambda sample: sample_record(sample, file, where, prefix).trajectories(),
                               where=where, strict=strict)
    return builder.build()


def _header(file: Path) -> tuple[dict[str, Any], list[Any] | None]:
    """The log's ``EvalLog`` object without samples, and its samples for a ``.json`` log."""
    if file.suffix.lower() == ".eval":
        with _open_zip(file) as archive:
            header = _member(archive, file, HEADER) if HEADER in archive.namelist() else {}
        return (header if isinstance(header, dict) else {}), None
    log = read_json_file(file)
    if not isinstance(log, dict):
        raise InputError(str(file), expected="an inspect_ai log (a JSON object)", found=type_name(log))
    samples = log.get("samples")
    if samples is not None and not isinstance(samples, list):
        raise InputError(str(file), field="samples", expected="a list of samples", found=type_name(samples))
    return log, samples


def _first_header(files: list[Path], strict: bool) -> dict[str, Any]:
    """The run's ``EvalLog`` header: the first file's, or (lenient) the first that reads, the
    others named when their samples are read."""
    for file in files:
        try:
            return _header(file)[0]
        except InputError:
            if strict:
                raise
    return {}


def _samples(file: Path) -> Iterator[tuple[str, Any]]:
    """``(where, sample)`` for each sample of ``file``; a file that cannot be read as a log is
    one item, its :class:`InputError`, as a sample that cannot be read is."""
    try:
        yield from _file_samples(file)
    except InputError as error:
        yield str(file), error


def _file_samples(file: Path) -> Iterator[tuple[str, Any]]:
    if file.suffix.lower() != ".eval":
        _, samples = _header(file)
        for index, sample in enumerate(samples or []):
            yield f"{file}: sample {index}", sample
        return
    with _open_zip(file) as archive:
        names = [n for n in archive.namelist() if n.startswith(SAMPLES_DIR) and n.endswith(".json")]
        if not names:
            raise InputError(str(file), expected=f"sample files ({SAMPLES_DIR}<id>_epoch_<n>.json)", found="none")
        for member in names:
            try:
                yield f"{file}: {member}", _member(archive, file, member)
            except InputError as error:
                yield f"{file}: {member}", error


def _open_zip(file: Path) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(file)
    except (zipfile.BadZipFile, OSError) as error:
        raise InputError(str(file), expected="an inspect_ai .eval log (a zip)", found=str(error)) from None


def _member(archive: zipfile.ZipFile, file: Path, member: str) -> Any:
    from trajlens import limits

    info = archive.getinfo(member)
    if info.file_size > limits.current().record_bytes:  # checked before inflating
        raise InputError(str(file), record=member, expected=f"a member of at most {limits.current().record_bytes:,} "
                         "bytes (raise it with --limit record_mb=...)", found=f"{info.file_size:,} bytes")
    try:
        data = _zstd_member(archive, info) if info.compress_type == ZIP_ZSTD else archive.read(member)
    except InputError:
        raise
    except NotImplementedError:
        raise InputError(str(file), record=member, expected="a zip member compressed with deflate or zstd",
                         found=f"compression method {info.compress_type}") from None
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as error:
        raise InputError(str(file), record=member, expected="a readable zip member", found=str(error)) from None
    return parse_json(data, str(file), record=member)


def _zstd_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    """A zstd member (inspect_ai's default since it switched from deflate), read with the
    ``zstandard`` package: Python's ``zipfile`` reads zstd only from 3.14."""
    try:
        import zstandard
    except ImportError:
        raise InputError(str(archive.filename), record=info.filename, expected="the zstandard package to read "
                         "zstd-compressed .eval logs (pip install zstandard)", found="it is not installed") from None
    if archive.fp is None:
        raise ValueError("the zip file is closed")
    archive.fp.seek(info.header_offset)
    local = archive.fp.read(LOCAL_HEADER_BYTES)
    if local[:4] != b"PK\x03\x04":
        raise zipfile.BadZipFile("bad local file header")
    name_length, extra_length = int.from_bytes(local[26:28], "little"), int.from_bytes(local[28:30], "little")
    archive.fp.seek(info.header_offset + LOCAL_HEADER_BYTES + name_length + extra_length)
    compressed = archive.fp.read(info.compress_size)
    try:
        return zstandard.ZstdDecompressor().decompressobj().decompress(compressed)[: info.file_size]
    except zstandard.ZstdError as error:
        raise zipfile.BadZipFile(str(error)) from None


def sample_record(sample: Any, file: Path, where: str, prefix: str = "") -> Record:
    """One ``EvalSample`` as a trajectory with its calls."""
    read = Fields(where)
    if not isinstance(sample, dict):
        raise read.error(None, "a sample (an object)", type_name(sample))
    sample_id = read.identifier(sample, "id", required=True)
    epoch = read.integer(sample, "epoch", bounds=(0, INT64[1])) or 1
    messages = read.items(sample, "messages", required=True)
    parse_errors: list[bool] = []
    converted = [_message(m, read.at(f"message {i}"), parse_errors) for i, m in enumerate(messages or [])]
    channels = _channels(read.mapping(sample, "scores") or {}, read)
    first = channels[0]["value"] if channels else None
    grade = _first_grade(read.mapping(sample, "scores") or {})
    tokens, reasoning = _usage(read.mapping(sample, "model_usage") or {}, read)
    record = chat_record(
        converted, file=file, where=where, trajectory_id=f"{prefix}{sample_id}/epoch{epoch}",
        task_id=str(sample_id), group_id=str(sample_id), reward=first, reward_channels=channels,
        resolved=grade, exit_status=_exit_status(sample, read), model_tokens=tokens, reasoning_tokens=reasoning,
        source=f"{file}:{sample_id}/epoch{epoch}",
    )
    for call, parse_error in zip(record.tool_calls, parse_errors):
        call["format_error"] = call["format_error"] or parse_error
        if call["tool_name"] == SESSION_TOOL and call["command"] is None:
            call["command"] = _session_input(call["arguments"])
    model = read.mapping(sample, "output")
    record.model = read.text(model, "model") if model else None
    return record


def _session_input(arguments: str) -> str | None:
    """What a ``bash_session`` call typed (its ``input`` for ``type`` and ``type_submit``)."""
    import json

    parsed = json.loads(arguments)
    text = parsed.get("input") if isinstance(parsed, dict) and parsed.get("action") in SESSION_TYPING else None
    return (text.rstrip("\n") or None) if isinstance(text, str) else None


def _message(message: Any, read: Fields, parse_errors: list[bool]) -> dict[str, Any]:
    """An inspect ``ChatMessage`` in the OpenAI shape the chat reader walks."""
    if not isinstance(message, dict):
        raise read.error(None, "a chat message (an object)", type_name(message))
    role = read.text(message, "role", required=True)
    converted: dict[str, Any] = {"role": role, "content": _text(message.get("content"), read)}
    if role == "assistant" and message.get("tool_calls"):
        calls = read.items(message, "tool_calls") or []
        parse_errors.extend(bool(call.get("parse_error")) if isinstance(call, dict) else False for call in calls)
        converted["tool_calls"] = calls
    elif role == "tool":
        converted["tool_call_id"] = read.identifier(message, "tool_call_id")
        error = read.mapping(message, "error")
        if error is not None:
            detail = read.text(error, "message", name="error.message")
            converted["content"] = "\n".join(p for p in (converted["content"], detail) if p)
    return converted


def _text(content: Any, read: Fields) -> str | None:
    """A message's text: a string, or its ``reasoning`` parts then its ``text`` parts."""
    if content is None or isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise read.error("content", "a string or a list of content parts", type_name(content))
    reasoning = [p.get("reasoning") for p in content if isinstance(p, dict) and p.get("type") == "reasoning"]
    text = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"]
    parts = [p for p in (*reasoning, *text) if isinstance(p, str) and p]
    return "\n".join(parts) if parts else None


def score_value(value: Any) -> float | None:
    """A score value as inspect's default ``value_to_float`` reads it (``None`` for a list or dict)."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        if value in LETTER_GRADES:
            return LETTER_GRADES[value]
        if value.lower() in WORD_GRADES:
            return WORD_GRADES[value.lower()]
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _channels(scores: dict[str, Any], read: Fields) -> list[dict[str, Any]]:
    """Each score as a reward channel; a value no reward can be (NaN, past float32) is an error
    naming the score's own field (``scores.includes.value``)."""
    channels = []
    for name, score in scores.items():
        value = read.mapping(score, "value", name=f"scores.{name}") if isinstance(score, dict) and isinstance(
            score.get("value"), dict) else None
        if value is not None:
            channels.extend({"name": f"{name}.{key}", "value": _reward(read, f"scores.{name}.value.{key}", item)}
                            for key, item in value.items() if score_value(item) is not None)
        elif isinstance(score, dict) and score_value(score.get("value")) is not None:
            channels.append({"name": name, "value": _reward(read, f"scores.{name}.value", score.get("value"))})
    return channels


def _reward(read: Fields, field: str, raw: Any) -> float:
    value = score_value(raw)
    assert value is not None
    if (problem := reward_problem(value)) is not None:
        raise read.error(field, problem, str(raw))
    return value


def _first_grade(scores: dict[str, Any]) -> bool | None:
    for score in scores.values():
        value = score.get("value") if isinstance(score, dict) else None
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value in LETTER_GRADES:
            return value == "C"
        return None
    return None


def _usage(usage: dict[str, Any], read: Fields) -> tuple[int | None, int | None]:
    output = reasoning = None
    for model, counts in usage.items():
        at = read.at(f"{read.record or ''}model_usage.{model}")
        if not isinstance(counts, dict):
            raise at.error(f"model_usage.{model}", "token counts (an object)", type_name(counts))
        tokens = at.integer(counts, "output_tokens", bounds=(0, INT64[1]))
        thinking = at.integer(counts, "reasoning_tokens", bounds=(0, INT64[1]))
        if tokens is not None:
            output = (output or 0) + tokens
        if thinking is not None:
            reasoning = (reasoning or 0) + thinking
    return output, reasoning


def _exit_status(sample: dict[str, Any], read: Fields) -> str | None:
    if sample.get("error"):
        return "error"
    limit = read.mapping(sample, "limit")
    if limit is not None:
        return read.text(limit, "type", name="limit.type")
    output = read.mapping(sample, "output")
    choices = read.items(output, "choices", name="output.choices") if output else None
    if choices and isinstance(choices[-1], dict):
        return read.text(choices[-1], "stop_reason", name="output.choices.stop_reason")
    return None


__all__ = ["FORMAT", "detect", "load_inspect_ai", "sample_record", "score_value"]
