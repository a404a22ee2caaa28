"""TensorBoard event files (``events.out.tfevents.*``) as training scalars.

Trainers that log to TensorBoard write their scalars as a TFRecord file of ``Event`` protos:
``transformers``' ``TensorBoardCallback`` (and so TRL) through
``torch.utils.tensorboard.SummaryWriter`` into ``{output_dir}/runs/<date>_<host>/``, with the
logged dict's keys rewritten to ``train/<key>`` and ``eval/<key>`` (``train/loss``,
``train/reward``, ``train/rewards/format_reward/mean``) at ``state.global_step``; verl's
``tensorboard`` tracking backend into ``$TENSORBOARD_DIR``; TF2's ``tf.summary.scalar`` as
tensors. Each scalar becomes a ``step_metrics`` row: the tag as the metric name, the event's
step, the value.

Files are read by the ``tensorboard`` package (``pip install 'trajlens[tensorboard]'``; read
with tensorboard 2.21.0), never by a parser of our own: its record reader
(``tensorboard.compat.tensorflow_stub.pywrap_tensorflow.PyRecordReader_New``, which checks
each record's length and CRC32C), ``event_pb2.Event`` for the protos, and the same read-time
compatibility layers ``EventFileLoader`` applies (``data_compat`` turns legacy
``simple_value`` scalars into scalar tensors; ``dataclass_compat`` marks each value's data
class). A value counts as a scalar when its tag's summary metadata says data class
``SCALAR`` (the ``scalars`` plugin); histograms, images, text and hparams are skipped.
An event holding only legacy ``simple_value`` scalars (what ``add_scalar`` writes) is read
without that migration, which would only wrap each float32 in a rank-0 tensor and is most of
the time otherwise; what remains is mostly the record reader's pure-Python CRC32C.

Reading rules, beside those of :mod:`trajlens.ingest.metrics`:

* Several event files of one run (a resumed training writes a new one, often in a new
  ``runs/<date>`` folder) are read in the order they were created, by the Unix time in their
  names (``events.out.tfevents.<time>.<host>.<pid>.<n>``). A later value for the same step
  and tag replaces the earlier one, as TensorBoard shows a resumed run.
* A NaN or infinite scalar is kept, as in every metrics file: a diverging run logs them.
* A truncated last record (a writer killed mid-write) or a record that fails its checksum is
  an error naming the file and the record (1-based); lenient mode keeps the records before it.

Errors name the file, the record, and the tag as the field.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator, NamedTuple, Sequence

from trajlens.errors import InputError, MissingDependencyError, Problem
from trajlens.ingest._probe import Probe

FORMAT = "tensorboard"
EVENT_FILE = re.compile(r"events\.out\.tfevents\.(\d+)(\..*)?")
"""The name every TensorBoard writer gives its event files."""
EXTRA = "'trajlens[tensorboard]'"
MAX_DEPTH = 4
"""Folders below a named folder searched for event files (``runs/<date>/`` is two)."""


class _Scalar(NamedTuple):
    step: int
    name: str
    value: float


def is_event_file(path: Path) -> bool:
    return bool(EVENT_FILE.fullmatch(path.name))


def detect(target: Probe | Path | str) -> bool:
    """An event file, or a folder whose files (up to :data:`MAX_DEPTH` deep) are all event files."""
    path = Probe.of(target).path
    if path.is_file():
        return is_event_file(path)
    if not path.is_dir():
        return False
    found = False
    for file in _walk(path, MAX_DEPTH):
        if not is_event_file(file):
            return False
        found = True
    return found


def event_files(paths: Sequence[Path | str] | Path | str) -> list[Path]:
    """The event files named, or found below named folders, in the order they were written."""
    given = [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]
    found: list[Path] = []
    for path in given:
        if path.is_dir():
            found.extend(p for p in _files_below(path, MAX_DEPTH) if is_event_file(p))
        else:
            found.append(path)
    return sorted(found, key=_written_at)


def load_tensorboard(paths: Sequence[Path | str] | Path | str, *, run_id: str, strict: bool = True):
    """Read the scalars of event files (or folders of them) as ``step_metrics`` rows of ``run_id``.

    Returns a :class:`trajlens.ingest.metrics.MetricsLoad`.
    """
    import polars as pl

    from trajlens.ingest.metrics import MetricsLoad
    from trajlens.schema import conform

    _require_tensorboard()
    files = event_files(paths)
    if not files:
        named = paths if isinstance(paths, (str, Path)) else ", ".join(str(p) for p in paths)
        raise InputError(str(named), "no event files", expected="events.out.tfevents.* files", found="none")
    latest: dict[tuple[int, str], float] = {}
    problems: list[Problem] = []
    for path in files:
        for item in _read_file(path):
            if isinstance(item, InputError):
                if strict:
                    raise item
                problems.append(item.as_problem())
                continue
            latest[(item.step, item.name)] = item.value
    frame = pl.DataFrame(
        {"run_id": [run_id] * len(latest), "step": [step for step, _ in latest], "name": [name for _, name in latest],
         "value": list(latest.values())},
        schema={"run_id": pl.String, "step": pl.Int64, "name": pl.String, "value": pl.Float64},
    ).sort("step", "name")
    return MetricsLoad(conform(frame.to_arrow(), "step_metrics", str(files[0])), problems)


def _read_file(path: Path) -> Iterator[_Scalar | InputError]:
    """The scalars of one event file; an InputError (then the end) for an unreadable record."""
    from google.protobuf.message import DecodeError
    from tensorboard import data_compat, dataclass_compat
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.compat.tensorflow_stub import errors, pywrap_tensorflow
    from tensorboard.util import tensor_util

    if not path.is_file():
        raise InputError(str(path), "cannot read", expected="a TensorBoard event file", found="no such file")
    try:
        reader = pywrap_tensorflow.PyRecordReader_New(str(path))
    except (errors.OpError, OSError) as error:
        raise InputError(str(path), "cannot read", expected="a TensorBoard event file", found=str(error)) from None
    initial_metadata: dict[str, Any] = {}
    scalar_tags: dict[str, bool] = {}
    record = 0
    try:
        while True:
            record += 1
            try:
                reader.GetNext()
            except errors.OutOfRangeError:
                return
            except errors.DataLossError as error:
                part, found = _damage(error)
                yield InputError(str(path), "a truncated or corrupt record", record=record, field=part,
                                 expected="a complete TFRecord (length, data, CRC32C checksums)", found=found)
                return
            try:
                event = event_pb2.Event.FromString(reader.record())
            except DecodeError as error:
                yield InputError(str(path), record=record, expected="a tensorboard Event proto", found=str(error))
                return
            if event.HasField("summary") and event.summary.value and all(
                    value.WhichOneof("value") == "simple_value" for value in event.summary.value):
                # A legacy scalar (torch's add_scalar): data_compat would only wrap this float32
                # in a rank-0 tensor; read it as it is (the migration is most of the time).
                for value in event.summary.value:
                    scalar_tags[value.tag] = True
                    yield _checked(path, record, event.step, value.tag, float(value.simple_value))
                continue
            event = data_compat.migrate_event(event)
            for migrated in dataclass_compat.migrate_event(event, initial_metadata):
                if not migrated.HasField("summary"):
                    continue
                for value in migrated.summary.value:
                    if value.HasField("metadata"):
                        scalar_tags[value.tag] = value.metadata.data_class == summary_pb2.DATA_CLASS_SCALAR
                    if not scalar_tags.get(value.tag) or not value.HasField("tensor"):
                        continue
                    yield _scalar(path, record, migrated.step, value, tensor_util)
    finally:
        reader.file_handle.close()


def _scalar(path: Path, record: int, step: int, value: Any, tensor_util: Any) -> _Scalar | InputError:
    try:
        array = tensor_util.make_ndarray(value.tensor)
    except (ValueError, TypeError) as error:
        return InputError(str(path), record=record, field=value.tag, expected="a scalar tensor", found=str(error))
    if array.size != 1 or array.dtype.kind not in "fiub":
        return InputError(str(path), record=record, field=value.tag, expected="a single number",
                          found=f"a {array.dtype} tensor of shape {list(array.shape)}")
    return _checked(path, record, step, value.tag, float(array.reshape(())))


def _checked(path: Path, record: int, step: int, tag: str, number: float) -> _Scalar | InputError:
    if not 0 <= step < 2**63:
        return InputError(str(path), record=record, field="step", expected="a step from 0 to 2**63-1", found=str(step))
    return _Scalar(int(step), tag, number)


def _damage(error: Exception) -> tuple[str, str]:
    """The part of a TFRecord the reader found damaged (``length``, ``length crc``, ``data``,
    ``data crc``), and how, from the reader's message."""
    text = str(getattr(error, "message", None) or error)
    truncated = re.search(r"truncated record in (header crc|header|data crc|data)", text)
    if truncated:
        part = truncated.group(1).replace("header", "length")
        return part, f"the file ends inside the record's {part} (a writer stopped mid-record)"
    if "header crc32" in text:
        return "length crc", "a length whose CRC32C checksum does not match"
    return "data crc", "data whose CRC32C checksum does not match (a corrupt record)"


def _require_tensorboard() -> None:
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        raise MissingDependencyError(EXTRA, "Reading TensorBoard event files") from None


def _written_at(path: Path) -> tuple[int, str]:
    match = EVENT_FILE.fullmatch(path.name)
    return (int(match.group(1)) if match else 0, str(path))


def _files_below(directory: Path, depth: int) -> list[Path]:
    """Non-hidden files below ``directory``, at most ``depth`` folders down (no symlinked folders)."""
    return list(_walk(directory, depth))


def _walk(directory: Path, depth: int) -> Iterator[Path]:
    try:
        children = sorted(directory.iterdir())
    except OSError:
        return
    for child in children:
        if child.name.startswith("."):
            continue
        if child.is_file():
            yield child
        elif child.is_dir() and not child.is_symlink() and depth > 0:
            yield from _walk(child, depth - 1)


__all__ = ["EXTRA", "FORMAT", "detect", "event_files", "is_event_file", "load_tensorboard"]
