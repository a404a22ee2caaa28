"""The registry of source formats: one entry per format, one detection contract.

Every format is a :class:`Format`: a name, a ``detect(probe) -> bool`` that looks at a path
(a :class:`~trajlens.ingest._probe.Probe`: the path and the two ends of a file, read once)
and a ``load(paths, *, run_id=None, strict=True) -> RunData``. Adding a format is one module
with those two functions plus one line in :data:`REGISTRY`.

:func:`plan` turns what the user named into sources, one per run:

* a file is taken by the first format (in registry order) that detects it;
* a folder is taken whole by a folder format (a Parquet run directory, a verl dump folder);
* any other folder is surveyed: every candidate file below it, and every sub-folder a folder
  format takes. When all of it is one format, the folder is one source of that format (a
  folder of several run folders of mini-swe-agent, say, is one run whose groups are tasks;
  a folder of Parquet run directories is one source per run). When it mixes formats, each
  sub-folder is planned on its own, and loose files form one source per format, so a folder
  holding SWE-agent, OpenHands and mini-swe-agent logs side by side ingests in one call;
* a file named as a format's logs are (:attr:`Format.names`) that no format detects goes to
  that format's loader, which says what is wrong with it; one that two formats of a mixed
  folder could claim goes to neither, but its error goes with the first (:attr:`Source.left_out`).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, NamedTuple

from trajlens.errors import InputError
from trajlens.ingest._probe import WHOLE_JSON_SUFFIXES, Probe, damage_error, depth_error, named_like, strays
from trajlens.ingest._unreadable import special_kind


# Only files with these suffixes are probed while surveying a folder; everything else (YAML
# configs, patches, READMEs, licences) is never opened.
SURVEY_SUFFIXES: frozenset[str] = frozenset({".json", ".jsonl", ".traj", ".parquet", ".eval"})


@dataclass(frozen=True)
class Format:
    """One source format."""

    name: str
    detect: Callable[[Probe], bool]
    """Whether a path is in this format, from the path and the two ends of a file."""
    load: Callable[..., Any] | None
    """``load(paths, *, run_id=None, strict=True) -> RunData`` for logs; for training scalars
    ``load(paths, *, run_id, strict=True) -> MetricsLoad`` (their rows join another run);
    ``None`` for sources the store copies as they are (Parquet run directories)."""
    kind: str = "log"
    """``log`` (loaded into a run), ``parquet`` (copied, streaming) or ``metrics`` (step scalars)."""
    folder: bool = False
    """Whether ``detect`` recognises whole folders (checked before a folder is surveyed)."""
    surveyed: bool = True
    """Whether files found while surveying a folder may be of this format."""
    keys: frozenset[str] = frozenset()
    """The keys its records carry (:attr:`Probe.record_keys`): what a file of no known format
    is compared with to name the formats it came closest to."""
    expects: str = ""
    """What a log of this format looks like, in a few words (for that message)."""
    names: tuple[str, ...] = ()
    """Patterns (``fnmatch``) of the file names that say a file is a log of this format
    (``*.traj.json``): such a file that no format detects (empty, another ``trajectory_format``)
    is read by this format's loader, which says what is wrong with it, instead of being left out
    of the run without a word."""


class Source(NamedTuple):
    """One run to load: its format, the paths that make it, and a run id when the plan names one."""

    format: Format
    paths: list[Path]
    run_id: str | None = None
    left_out: tuple[InputError, ...] = ()
    """Files beside this run's logs that look like logs gone bad but that planning could give to
    no one format (beside logs of two): the error for each, raised (or, lenient, kept as a
    skipped problem) when the run is loaded, so none is left out without a word."""


def _registry() -> tuple[Format, ...]:
    from trajlens.ingest import (
        art,
        atropos,
        harbor,
        inspect_ai,
        metrics,
        openrlhf,
        prime_hosted,
        prime_rl,
        rllm,
        skyrl,
        skyrl_agent,
        swe_agent_dataset,
        tensorboard,
        terminal_bench,
        trl,
        verifiers,
        verifiers_traces,
        verl,
    )
    from trajlens.ingest.agents import (
        mini_swe_agent_v1,
        mini_swe_agent_v2,
        openai_chat,
        openhands_v0,
        openhands_v1,
        swe_agent,
    )
    from trajlens.store.layout import is_run_dir

    return (
        Format("parquet", lambda probe: is_run_dir(probe.path), None, kind="parquet", folder=True),
        Format("trl", trl.detect, trl.load_trl, folder=True),
        Format("verl", verl.detect, verl.load_verl, folder=True, keys=frozenset(verl.REQUIRED_KEYS),
               expects="rollout dump rows (<step>.jsonl): input, output, score"),
        Format("metrics", metrics.detect, metrics.load_metric_files, kind="metrics", surveyed=False),
        Format("tensorboard", tensorboard.detect, tensorboard.load_tensorboard, kind="metrics", folder=True,
               surveyed=False),
        Format("atropos", atropos.detect, atropos.load_atropos,
               keys=frozenset({"tokens", "masks", "scores"}), expects="scored groups: tokens, masks, scores"),
        Format("swe-agent-dataset", swe_agent_dataset.detect, swe_agent_dataset.load_swe_agent_dataset,
               keys=swe_agent_dataset.COLUMNS, expects="rows of instance_id, model_name, target, trajectory"),
        Format("inspect-ai", inspect_ai.detect, inspect_ai.load_inspect_ai,
               keys=inspect_ai.LOG_KEYS, expects="an EvalLog: version, status, eval, samples"),
        # Before verifiers: the older samples are RolloutOutput rows with a step and an advantage.
        Format("prime-hosted", prime_hosted.detect, prime_hosted.load_prime_hosted,
               keys=prime_hosted.SAMPLE_KEYS | frozenset(prime_hosted.PROBLEM_KEYS),
               expects="rollout pages {run_id, samples, total_pages} or samples: step, problem_id or example_id, "
               "completion, reward, advantage", names=prime_hosted.FILE_NAMES),
        Format("verifiers", verifiers.detect, verifiers.load_verifiers,
               keys=verifiers.KEYS, expects="rollout rows: example_id, prompt, completion, reward"),
        Format("verifiers-traces", verifiers_traces.detect, verifiers_traces.load_verifiers_traces,
               keys=verifiers_traces.KEYS, expects="episodes (traces.jsonl): env, task, traces"),
        Format("skyrl", skyrl.detect, skyrl.load_skyrl, keys=skyrl.EVAL_KEYS,
               expects="eval rows of input_prompt, output_response, score (or a GeneratorOutput)"),
        Format("harbor", harbor.detect, harbor.load_harbor, folder=True, keys=harbor.RESULT_KEYS | harbor.TRAJECTORY_KEYS,
               expects="a trial's result.json (task_name, trial_name, agent_info) or an ATIF trajectory.json"),
        Format("terminal-bench", terminal_bench.detect, terminal_bench.load_terminal_bench, folder=True,
               keys=terminal_bench.KEYS,
               expects="a trial's results.json: trial_name, task_id, instruction, is_resolved"),
        Format("rllm", rllm.detect, rllm.load_rllm, keys=rllm.LOGGER_KEYS,
               expects="an episode: episode_id, is_correct, trajectories of steps", names=rllm.FILE_NAMES),
        Format("art", art.detect, art.load_art, keys=art.KEYS,
               expects="trajectory group rows: group_index, reward, messages"),
        Format("prime-rl", prime_rl.detect, prime_rl.load_prime_rl, folder=True),
        Format("skyrl-agent", skyrl_agent.detect, skyrl_agent.load_skyrl_agent),
        Format("openrlhf", openrlhf.detect, openrlhf.load_openrlhf, keys=openrlhf.KEYS,
               expects='a wandb table of columns ["global_step", "text", "reward"]'),
        Format("mini-swe-agent-v1", mini_swe_agent_v1.detect, mini_swe_agent_v1.load_mini_swe_agent_v1,
               keys=frozenset({"trajectory_format", "messages", "info"}), expects='trajectory_format "mini-swe-agent-1", messages, info',
               names=mini_swe_agent_v1.FILE_NAMES),
        Format("mini-swe-agent-v2", mini_swe_agent_v2.detect, mini_swe_agent_v2.load_mini_swe_agent_v2,
               keys=frozenset({"trajectory_format", "messages", "info"}), expects='trajectory_format "mini-swe-agent-1.1", messages, info',
               names=mini_swe_agent_v2.FILE_NAMES),
        Format("swe-agent", swe_agent.detect, swe_agent.load_swe_agent,
               keys=frozenset({"trajectory", "history", "info"}), expects='a .traj object of trajectory, history, info',
               names=swe_agent.FILE_NAMES),
        Format("openhands-v0", openhands_v0.detect, openhands_v0.load_openhands_v0, names=openhands_v0.FILE_NAMES),
        Format("openhands-v1", openhands_v1.detect, openhands_v1.load_openhands_v1, names=openhands_v1.FILE_NAMES),
        # Last: a chat log is what several of the formats above also hold.
        Format("openai-chat", openai_chat.detect, openai_chat.load_openai_chat,
               keys=frozenset({"messages"}), expects='conversations: messages of role, content, tool_calls'),
    )


@functools.cache
def registry() -> tuple[Format, ...]:
    """Every format, in detection order (built on first use: the loaders import pyarrow)."""
    return _registry()


def by_name(name: str) -> Format:
    for fmt in registry():
        if fmt.name == name:
            return fmt
    raise KeyError(name)


def detect(path: Path | str | Probe, *, folders: bool = True, surveyed_only: bool = False) -> Format | None:
    """The first format that recognises ``path`` (or the file a probe holds), or ``None``."""
    probe = Probe.of(path)
    is_dir = probe.is_dir
    for fmt in registry():
        if is_dir and not fmt.folder:
            continue
        if fmt.folder and is_dir and not folders:
            continue
        if surveyed_only and not fmt.surveyed:
            continue
        if fmt.detect(probe):
            return fmt
    return None


def plan(path: Path | str) -> list[Source]:
    """The sources (one per run) that ``path`` holds; an InputError when it holds none."""
    path = Path(path)
    if not path.exists():
        raise InputError(str(path), "no such file or directory")
    if not path.is_dir() and not path.is_file():
        # read before anything probes it: a FIFO would block, a device never end
        raise InputError(str(path), expected="a regular file or a directory", found=special_kind(path))
    found = detect(path)
    if found is not None:
        return [Source(found, [path])]
    if path.is_file():
        probe = Probe(path)
        if (error := damage_error(probe)) is not None:
            raise error  # a log cut short is said to be, before any format
        named = named_format(path)  # no format detected it (above)
        if named is not None:  # its loader says what keeps it from being one (empty, another version)
            return [Source(named, [path])]
        raise depth_error(probe) or unknown_file(probe)  # too deep to detect is said to be
    sources = _plan_folder(path) or _named_logs(path)
    if not sources:
        names = ", ".join(f.name for f in registry())
        raise InputError(str(path), "no logs in this directory", expected=f"files of a known format ({names})",
                         found="none")
    return sources


def _named_logs(directory: Path) -> list[Source]:
    """The files under ``directory`` named as a format's logs (``*.traj.json``, ``*.traj``) when its
    survey found none: one run per format, read by that format's loader, as the file given alone
    would be. A log no detection reads (UTF-16, another ``trajectory_format``, empty) is loaded, or
    named in its loader's one line, rather than the folder said to hold no logs."""
    from trajlens.ingest.agents._common import walk
    from trajlens.store.writer import slug

    named: dict[str, list[Path]] = {}
    for file in walk(directory):  # every format's log names end in an extension it lists
        if (fmt := named_format(file)) is not None and fmt.kind == "log" and file.is_file():
            named.setdefault(fmt.name, []).append(file)
    return [Source(by_name(name), found, slug(directory.name if len(named) == 1 else f"{directory.name}-{name}"))
            for name, found in named.items()]


class Closeness(NamedTuple):
    """How near a file's records come to one format's: the keys they share and lack."""

    format: Format
    shared: frozenset[str]
    missing: frozenset[str]


CLOSEST_SHOWN = 3
"""How many of the nearest formats the message for a file of no known format names."""


def closest(probe: Probe) -> list[Closeness]:
    """The formats whose record keys the file's first record shares most of (none shared: not
    listed), nearest first."""
    keys = probe.record_keys
    near = [Closeness(fmt, fmt.keys & keys, fmt.keys - keys) for fmt in registry() if fmt.keys and fmt.keys & keys]
    near.sort(key=lambda c: (-len(c.shared) / len(c.format.keys), len(c.missing)))
    return near[:CLOSEST_SHOWN]


def unknown_file(probe: Probe) -> InputError:
    """The one-line error for a file no format detects: the formats it came closest to, what
    each expected and what it lacks; or, when none is near, every format's name."""
    near = closest(probe)
    keys = sorted(probe.record_keys)
    if not near:
        names = ", ".join(f.name for f in registry())
        found = _what_file(probe) + (f" (records with keys {', '.join(keys[:8])})" if keys else "")
        return InputError(str(probe.path), expected=f"a log of a known format ({names})", found=found)
    parts = [f"{c.format.name} ({c.format.expects}; {_shortfall(c)})" for c in near]
    return InputError(str(probe.path), "no known format; closest: " + "; ".join(parts),
                      found=f"records with keys {', '.join(keys[:8])}")


def _shortfall(near: Closeness) -> str:
    """What keeps a file from a format it came close to: the keys its first record lacks, or,
    when it has them all, that their values are not the ones the format's detection reads (a
    list of messages that is no list, another ``trajectory_format``, a record that is no JSON)."""
    if near.missing:
        return f"lacks {', '.join(sorted(near.missing))}"
    return "has all its keys, but their values are not this format's"


def _plan_folder(directory: Path) -> list[Source]:
    damaged: list[InputError] = []
    entries = _named_as_beside(survey(directory, damaged))
    formats = {fmt.name: fmt for _, fmt in entries}
    if not formats:
        if damaged:
            raise damaged[0]
        return []
    if len(formats) == 1:
        (fmt,) = formats.values()
        if damaged:
            # A log cut short reads as no log, or as another format's (its ends are what tells a
            # format): beside logs of one format it is one of them, and their run says so (lenient,
            # where its loader reads each file on its own: a skipped problem, the rest of the run
            # loaded as it would be without it).
            if fmt.kind != "log" or fmt.folder:
                raise damaged[0]
            # one named as its logs are, or a stray beside them, is read by its loader, which names
            # the bad record; the others' errors go with the run
            logs = [path for path, _ in entries if path.is_file()]
            read = {*strays(logs, [Path(error.file) for error in damaged])}
            unread = tuple(error for error in damaged
                           if Path(error.file) not in read and not named_like(Path(error.file), fmt.names))
            return [Source(fmt, [directory], left_out=unread), *_metrics_beside(directory)]
        if fmt.kind == "parquet":
            return [Source(fmt, [entry]) for entry, _ in entries]
        if fmt.folder:  # a trainer's dump folders (rollouts, validation) are one run
            from trajlens.store.writer import slug

            folders = [entry for entry, _ in entries]
            run_id = slug(directory.name) if len(folders) > 1 else None
            return [Source(fmt, folders, run_id), *_metrics_beside(directory)]
        return [Source(fmt, [directory]), *_metrics_beside(directory)]
    sources: list[Source] = []
    loose: dict[str, list[Probe]] = {}
    unknown: list[Probe] = []
    for child in _children(directory):
        if child.is_dir():
            found = detect(child)
            sources.extend([Source(found, [child])] if found is not None else _plan_folder(child))
        elif child.suffix.lower() in SURVEY_SUFFIXES:
            probe = Probe(child)
            if (error := _cut_short(probe)) is not None:
                raise error  # no format's, whatever its head looks like (see survey)
            fmt = detect(probe, surveyed_only=True)
            if fmt is not None:
                loose.setdefault(fmt.name, []).append(probe)
            elif (error := damage_error(probe)) is not None:
                raise error
            else:
                unknown.append(probe)
    from trajlens.store.writer import slug

    given, left_out = _loose_strays(loose, unknown)
    for name, probes in loose.items():
        files = [probe.path for probe in probes] + given.get(name, [])
        run_id = slug(directory.name if len(loose) == 1 else f"{directory.name}-{name}")
        sources.append(Source(by_name(name), files, run_id, tuple(left_out.get(name, ()))))
    return sources


def _named_as_beside(entries: list[tuple[Path, Format]]) -> list[tuple[Path, Format]]:
    """``entries`` with each file named as the logs of one format among them (``*.traj.json``),
    that another format, which does not name its logs so, detected, given to the format of its
    name: it is such a log gone bad (see :func:`claimed_by`), and its loader says how, rather than
    the folder splitting into runs of two formats."""
    present = list({fmt.name: fmt for _, fmt in entries}.values())
    if len(present) < 2:
        return entries
    given = []
    for path, fmt in entries:
        named = [other for other in present if other is not fmt and named_like(path, other.names)]
        if path.is_file() and len(named) == 1 and not named_like(path, fmt.names):
            fmt = named[0]
        given.append((path, fmt))
    return given


def _loose_strays(loose: dict[str, list[Probe]],
                  unknown: list[Probe]) -> tuple[dict[str, list[Path]], dict[str, list[InputError]]]:
    """The loose files of a mixed folder that no format detected, given to the format whose logs
    they look like gone bad: its :func:`strays`, or named as its logs are (:attr:`Format.names`).
    One that looks like the logs of two formats is read by neither, but its error goes with the
    first of them (raised on load, or a skipped problem under lenient), so it is never dropped
    without a word."""
    claims: dict[Path, list[str]] = {}
    for name, probes in loose.items():
        named = [probe.path for probe in unknown if named_like(probe.path, by_name(name).names)]
        for path in dict.fromkeys([*strays(probes, unknown), *named]):
            claims.setdefault(path, []).append(name)
    given: dict[str, list[Path]] = {}
    left_out: dict[str, list[InputError]] = {}
    for path, names in claims.items():
        if len(names) == 1:
            given.setdefault(names[0], []).append(path)
        else:
            left_out.setdefault(names[0], []).append(InputError(
                str(path), f"left out: it looks like a log of {' and of '.join(names)} gone bad, and sits beside both",
                expected="a log of one known format (load the file on its own to see what is wrong with it)",
                found=_what_file(Probe(path))))
    return given, left_out


def named_format(path: Path) -> Format | None:
    """The first format whose log file names (:attr:`Format.names`) ``path`` has, or None."""
    return next((fmt for fmt in registry() if named_like(path, fmt.names)), None)


def claimed_by(path: Path) -> Format | None:
    """:func:`named_format`, when no format detects ``path``, it is cut short, or the format that
    detects it does not name its logs so: a file named as a log of that format that cannot be read
    as one (an empty ``*.traj.json``, one of another ``trajectory_format``, one whose end, which
    tells the format, was cut off), whose loader says why."""
    named = named_format(path)
    if named is None:
        return None
    probe = Probe(path)
    found = detect(probe)
    if found is None or damage_error(probe) is not None:
        return named
    # a log of another format that does not name its logs so: one cut just after a closing brace
    # still closes, and reads as a chat log once the end that named its own format is gone
    return None if named_like(path, found.names) else named


def _what_file(probe: Probe) -> str:
    """A file no format detects, in a few words: empty, blank, or of no known format."""
    if probe.is_file and probe.path.stat().st_size == 0:
        return "an empty file"
    if not probe.head.strip():
        return "a file of only blank space"
    return "a file of no known format"


def _metrics_beside(directory: Path) -> list[Source]:
    """Training scalars in ``directory``: files of a metrics format directly in it, and folders a
    metrics format takes whole (TensorBoard's ``runs/``). They join its one run."""
    formats = [fmt for fmt in registry() if fmt.kind == "metrics"]
    sources: list[Source] = []
    for child in _children(directory):
        is_dir = child.is_dir() and not child.is_symlink()
        if not is_dir and not child.is_file():
            continue
        fmt = next((f for f in formats if (f.folder or not is_dir) and f.detect(Probe(child))), None)
        if fmt is not None:
            sources.append(Source(fmt, [child]))
    return sources


def survey(directory: Path, damaged: list[InputError] | None = None) -> list[tuple[Path, Format]]:
    """Every log below ``directory`` with its format: whole folders a folder format takes, and
    candidate files otherwise. Hidden entries and symbolic links to folders are skipped.

    A JSON file cut short (:func:`damage_error`) is no log of any format, whatever its head looks
    like, and a damaged file no format detects (a Parquet file without its footer) is none either:
    the error of each goes to ``damaged`` when given (the caller decides whose run it belongs
    to), else it is raised."""
    found: list[tuple[Path, Format]] = []
    probed: list[Probe] = []
    unknown: list[Probe] = []
    for child in _children(directory):
        if child.is_dir():
            fmt = detect(child, surveyed_only=True)
            if fmt is not None and fmt.folder:
                found.append((child, fmt))
            elif not child.is_symlink():
                found.extend(survey(child, damaged))
        elif child.suffix.lower() in SURVEY_SUFFIXES:
            probe = Probe(child)
            if (error := _cut_short(probe)) is not None:
                if damaged is None:
                    raise error
                damaged.append(error)
                continue
            fmt = detect(probe, surveyed_only=True)
            if fmt is not None:
                found.append((child, fmt))
                probed.append(probe)
            elif (error := damage_error(probe)) is not None:
                if damaged is None:
                    raise error
                damaged.append(error)
            else:
                unknown.append(probe)
    # A file no format recognised, beside logs of one format with its suffix, is read as one of
    # them (see strays): its loader names its bad record.
    here = [(path, fmt) for path, fmt in found if path.parent == directory and path.is_file()]
    for stray in strays(probed, unknown):
        owners = {fmt.name: fmt for path, fmt in here if path.suffix == stray.suffix}
        if len(owners) == 1:
            found.append((stray, *owners.values()))
    return found


def _cut_short(probe: Probe) -> InputError | None:
    """The error of a JSON log cut short (:func:`damage_error`), checked before detection: its end,
    which tells a format, is gone, so what its head looks like says nothing. Only a JSON file's two
    ends are read (a Parquet file's footer is read after detection, where none takes it)."""
    return damage_error(probe) if probe.suffix in WHOLE_JSON_SUFFIXES else None


def _children(directory: Path) -> list[Path]:
    try:
        names = sorted(os.listdir(directory))
    except OSError as error:
        raise InputError(str(directory), expected="a readable directory", found=error.strerror or str(error)) from None
    return [directory / name for name in names if not name.startswith(".")]


__all__ = ["Closeness", "Format", "Source", "by_name", "claimed_by", "closest", "detect", "plan", "registry", "survey",
           "unknown_file"]
