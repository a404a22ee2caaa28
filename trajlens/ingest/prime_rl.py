"""prime-rl training batches: ``<output_dir>/rollouts/step_<N>/rollouts.bin``.

Read as prime-rl's filesystem transport writes them (PrimeIntellect-ai/prime-rl@02f03abb, not
published on PyPI): ``FileSystemTrainingBatchSender.send`` (``src/prime_rl/transport/filesystem.py``)
encodes each step's ``TrainingBatch`` with ``msgspec.msgpack`` to ``rollouts/step_<step>/rollouts.bin``
under the run's output folder (``get_rollout_dir``, ``get_step_path``, ``src/prime_rl/utils/utils.py``).
The structs (``src/prime_rl/transport/types.py``) are ``array_like``, so each is a msgpack array
in field order: a batch is ``[examples, temperature, ...]`` and an example
``[prompt_ids, prompt_mask, completion_ids, completion_mask, completion_logprobs, advantage, ...]``
(``advantage`` left out or null where the orchestrator set none). The first six example
fields and the batch's first two are the same in the releases of the transport read; later
fields (reference log-probs, sequence length) are not read. Decoding needs ``msgpack``
(``pip install 'trajlens[prime-rl]'``).

Mapping: each example is a trajectory ``<step>/<index>`` at the folder's step; examples of the
same prompt token ids at a step form a group (the batch keeps no example id), named
``<step>:p<k>`` by first appearance, with task ``p<k>`` by the prompt's first appearance in the
run. The token arrays are the prompt (untrained) then the completion: ``completion_mask`` as
the response mask (each entry a boolean or 0/1; anything else is an error naming it),
``completion_logprobs`` as log-probs (a null entry stays null: not logged, never 0.0, which
would claim probability 1), and the example's ``advantage`` as
``logged_advantage`` and on every trained token as ``logged_advantages`` (the trainer's loss
applies it so). The batch keeps no reward, text or tool calls; ``model_tokens`` counts the
trained tokens and the batch's ``temperature`` is the run's config (its first step's).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Sequence

from trajlens.errors import InputError, MissingDependencyError
from trajlens.ingest._fields import Fields, type_name
from trajlens.ingest._probe import Probe, files_of
from trajlens.ingest._unreadable import reason
from trajlens.rows import TOKENS, TRAJECTORY, RunBuilder, RunData

FORMAT = "prime-rl"
BATCH_FILE = "rollouts.bin"
STEP_FOLDER = re.compile(r"step_(\d+)")
EXTRA = "trajlens[prime-rl]"


def detect(target: Probe | Path | str) -> bool:
    """A ``rollouts/step_<N>/rollouts.bin`` file, or a folder holding them (the run's output
    folder, its ``rollouts`` folder or one ``step_<N>`` folder), taken whole."""
    probe = Probe.of(target)
    path = probe.path
    if not probe.is_dir:
        return (path.name == BATCH_FILE and len(path.parents) > 1 and STEP_FOLDER.fullmatch(path.parent.name) is not None
                and path.parents[1].name == "rollouts")
    if STEP_FOLDER.fullmatch(path.name) and path.parent.name == "rollouts":
        return (path / BATCH_FILE).is_file()
    rollouts = path if path.name == "rollouts" else path / "rollouts"
    return rollouts.is_dir() and any(detect(step / BATCH_FILE) and step.joinpath(BATCH_FILE).is_file()
                                     for step in rollouts.glob("step_*"))


def load_prime_rl(paths: Sequence[Path | str] | Path | str, *, run_id: str | None = None,
                  strict: bool = True) -> RunData:
    """Load prime-rl batch files (or folders of them) as one run, in step order."""
    from trajlens.store.writer import joined_source, slug

    files = sorted(files_of(paths, lambda probe: not probe.is_dir and detect(probe), strict=strict), key=_step)
    output = files[0].parents[2]
    name = output.name or "prime-rl"
    builder: RunBuilder | None = None
    prompts: dict[tuple[int, ...], str] = {}
    for file in files:
        where = str(file)
        try:
            batch = _decode(file)
            if builder is None:
                builder = RunBuilder(run_id or slug(name), name=name, config=_config(batch),
                                     source_format=FORMAT, source=joined_source(files))
            for row, tokens, at in batch_rows(batch, _step(file), prompts, where):
                builder.add_trajectory(row, (), tokens, where=at)
        except InputError as error:
            if strict:
                raise
            if builder is None:
                builder = RunBuilder(run_id or slug(name), name=name, source_format=FORMAT,
                                     source=joined_source(files))
            builder.skip(error)
    assert builder is not None
    return builder.build()


def _step(file: Path) -> int:
    return int(STEP_FOLDER.fullmatch(file.parent.name).group(1))  # type: ignore[union-attr]


def _decode(file: Path) -> Any:
    try:
        import msgpack
    except ModuleNotFoundError:
        raise MissingDependencyError(EXTRA, "Reading prime-rl training batches") from None
    try:
        return msgpack.unpackb(file.read_bytes(), raw=False, strict_map_key=False)
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as error:
        raise InputError(str(file), "not a msgpack training batch", expected="msgpack",
                         found=_undecodable(error, msgpack)) from None


def _undecodable(error: Exception, msgpack: Any) -> str:
    """What the decoder found wrong, in words: its own message where it gives one (the
    format and nesting errors give none)."""
    if isinstance(error, msgpack.StackError):
        return "arrays or maps nested deeper than the decoder allows"
    if isinstance(error, msgpack.FormatError):
        return "a byte that begins no msgpack value"
    return reason(error)


def _config(batch: Any) -> dict[str, Any]:
    if isinstance(batch, list) and len(batch) > 1 and isinstance(batch[1], (int, float)) and not isinstance(batch[1], bool):
        return {"temperature": float(batch[1])}
    return {}


def batch_rows(batch: Any, step: int, prompts: dict[tuple[int, ...], str], where: str):
    """``(trajectory row, tokens, where)`` for each example of one decoded ``TrainingBatch``;
    ``prompts`` names the run's prompts by first appearance."""
    read = Fields(where)
    if not isinstance(batch, list) or not batch or not isinstance(batch[0], list):
        raise read.error(None, "a TrainingBatch (an array whose first item is the examples)", type_name(batch))
    groups: dict[tuple[int, ...], str] = {}
    for index, example in enumerate(batch[0]):
        at = read.at(f"example {index}")
        if not isinstance(example, list) or len(example) < 5:
            raise at.error(None, "a TrainingExample array [prompt_ids, prompt_mask, completion_ids, completion_mask, "
                           "completion_logprobs, advantage]", type_name(example))
        prompt = _ints(example[0], "prompt_ids", at)
        completion = _ints(example[2], "completion_ids", at)
        mask = at.mask({"completion_mask": example[3]}, "completion_mask", required=True)
        logprobs = example[4]
        if len(mask) != len(completion):
            raise at.error("completion_mask", f"{len(completion)} entries (one per completion id)", str(len(mask)))
        if not isinstance(logprobs, list) or len(logprobs) != len(completion):
            raise at.error("completion_logprobs", f"{len(completion)} numbers (one per completion id)",
                           str(len(logprobs)) if isinstance(logprobs, list) else type_name(logprobs))
        numbers = [at.number({"completion_logprobs": v}, "completion_logprobs", name=f"completion_logprobs[{position}]")
                   for position, v in enumerate(logprobs)]
        advantage = at.number({"advantage": example[5]}, "advantage") if len(example) > 5 else None
        key = tuple(prompt)
        task = prompts.setdefault(key, f"p{len(prompts)}")
        group = groups.setdefault(key, f"{step}:{task}")
        trained = mask
        row = TRAJECTORY(trajectory_id=f"{step}/{index}", step=step, task_id=task, group_id=group, num_turns=1,
                         model_tokens=sum(trained), logged_advantage=advantage)
        tokens = TOKENS(
            response_mask=[False] * len(prompt) + trained,
            log_probs=[0.0] * len(prompt) + numbers,
            logged_advantages=None if advantage is None else [0.0] * len(prompt) + [advantage if t else 0.0 for t in trained],
        )
        yield row, tokens, f"{where}: example {index}"


def _ints(value: Any, name: str, read: Fields) -> list[int]:
    if not isinstance(value, list) or any(isinstance(v, bool) or not isinstance(v, int) for v in value):
        raise read.error(name, "a list of integers", type_name(value))
    return value


__all__ = ["FORMAT", "batch_rows", "detect", "load_prime_rl"]
