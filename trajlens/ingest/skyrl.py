"""SkyRL (skyrl-train) rollouts: evaluation dumps and generator outputs.

Read as skyrl-train 0.3.1 writes them:

* ``dump_per_dataset_eval_results`` (``skyrl_train/utils/trainer_utils.py``) writes
  ``<export_path>/dumped_evals/global_step_<N>_evals/<data_source>.jsonl`` (``eval_only`` for
  an evaluation without training, ``skyrl_train/evaluate.py``), one line per rollout:
  ``input_prompt`` and ``output_response`` (the decoded token ids), ``score`` (the reward, a
  number or a list of per-token rewards), ``stop_reason``, ``env_class``, ``env_extras``,
  ``data_source``; and ``aggregated_results.jsonl`` (the eval metrics, not read here). Every
  other ``.jsonl`` there is a data source's rows whatever it holds: one that is empty or holds
  other records is an error naming it, never left out.
* a ``GeneratorOutput`` (``skyrl_train/generators/base.py``) saved as JSON: columns
  ``prompt_token_ids``, ``response_ids``, ``rewards`` (per rollout or per token),
  ``loss_masks``, ``stop_reasons``, ``rollout_logprobs``, ``trajectory_ids``
  (``TrajectoryID`` ``{instance_id, repetition_id}``). The trainer's own dumps of the training
  batch are pickles (``dump_data``), which are never loaded: nothing from a log is executed.

Mapping, evaluation rows: a row is a trajectory ``<folder>/<file stem>/<row>``
(``global_step_2_evals/gsm8k/1``, loaded alone or with its folder) at the step of its
``global_step_<N>_evals`` folder (0 otherwise), split ``val``; the rollouts of one prompt
(same ``input_prompt``) form a group whose id is the data source and a digest of the
prompt; ``reward`` is ``score`` (summed when per token), ``exit_status`` the
``stop_reason``, ``response_text`` the response. The decoded text keeps no tool-call
structure, so these rows have no calls.

Generator outputs: rollout ``i`` is a trajectory ``<instance_id>_<repetition_id>`` (or
``<folder>/<file stem>/<i>``), grouped by ``instance_id``; its token arrays are the response's:
``response_mask`` from ``loss_masks``, ``token_rewards`` where rewards are per token,
``log_probs`` from ``rollout_logprobs``; ``reward`` is the scalar (or the token rewards'
sum), ``model_tokens`` the masked-in response tokens.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any, Iterator, Sequence

from trajlens.errors import InputError
from trajlens.ingest._fields import INT64, Fields, type_name
from trajlens.ingest._probe import Probe, files_of, run_name
from trajlens.ingest._records import readable_records
from trajlens.rows import TOKENS, TRAJECTORY, RunBuilder, RunData

FORMAT = "skyrl"
EVAL_KEYS: frozenset[str] = frozenset({"input_prompt", "output_response", "score"})
"""Keys of a ``dump_per_dataset_eval_results`` row."""
GENERATOR_KEYS: frozenset[str] = frozenset({"prompt_token_ids", "response_ids", "rewards", "loss_masks"})
"""Keys of a ``GeneratorOutput``."""
_STEP_FOLDER = re.compile(r"global_step_(\d+)_evals$")
EVAL_ONLY_FOLDER = "eval_only"
"""The folder ``evaluate.py`` dumps an evaluation without training to."""
AGGREGATED = "aggregated_results.jsonl"
"""The eval metrics beside the rows in an eval dump folder (not read)."""


def detect(target: Probe | Path | str) -> bool:
    """Evaluation rows or a generator output, in any container."""
    probe = Probe.of(target)
    keys = probe.record_keys
    return EVAL_KEYS <= keys or GENERATOR_KEYS <= keys or is_eval_dump(probe)


def is_eval_dump(probe: Probe) -> bool:
    """Whether a file is a data source's evaluation rows by where skyrl-train dumps them
    (``<data_source>.jsonl`` in ``global_step_<N>_evals/`` or ``eval_only/``), so one that is
    empty or holds other records is read, and named, rather than left out of the run."""
    path = probe.path
    folder = path.parent.name
    return (path.suffix.lower() == ".jsonl" and path.name != AGGREGATED and probe.is_file
            and (_STEP_FOLDER.match(folder) is not None or folder == EVAL_ONLY_FOLDER))


def load_skyrl(paths: Sequence[Path | str] | Path | str, *, run_id: str | None = None,
               strict: bool = True) -> RunData:
    """Load SkyRL evaluation dumps or generator outputs (files, or folders of them) as one run."""
    from trajlens.store.writer import joined_source, slug

    files = files_of(paths, detect, strict=strict)
    name = run_name(paths, files)
    builder = RunBuilder(run_id or slug(Path(name).stem), source_format=FORMAT, source=joined_source(files))
    for file in files:
        label = f"{file.parent.name}/{file.stem}"  # the same whichever files beside it are read
        step = _step(file)
        records_read = 0
        for number, row in readable_records(file):
            records_read += 1
            where = f"{file}: record {number}"
            builder.add_record(row, lambda row: _trajectories(row, where, label, number, step),
                               where=where, strict=strict)
        if not records_read:  # a dump cut short to nothing is a data source's rows gone, not a file to pass over
            empty = InputError(str(file), "no records", expected="evaluation rows or a generator output",
                               found="an empty file" if not file.stat().st_size else "only blank lines")
            if strict:
                raise empty
            builder.skip(empty)
    return builder.build()


def _trajectories(row: Any, where: str, label: str, number: int, step: int) -> Iterator[tuple[Any, ...]]:
    """The trajectories of one record: a generator output's rollouts, or one evaluation row."""
    if not isinstance(row, dict):
        raise InputError(where, expected="an object", found=type_name(row))
    if GENERATOR_KEYS <= row.keys():
        for trajectory, tokens in generator_rollouts(row, Fields(where), label, step):
            yield trajectory, (), tokens
    else:
        yield eval_row(row, Fields(where), f"{label}/{number}", step), ()


def _step(file: Path) -> int:
    match = _STEP_FOLDER.match(file.parent.name)
    return int(match.group(1)) if match else 0


def eval_row(row: dict[str, Any], read: Fields, trajectory_id: str, step: int) -> dict[str, Any]:
    """One evaluation row as a trajectory."""
    prompt = read.text(row, "input_prompt", required=True)
    source = read.text(row, "data_source") or "unknown"
    digest = hashlib.sha1((prompt or "").encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return TRAJECTORY(
        trajectory_id=trajectory_id, step=step, split="val", task_id=f"{source}/{digest}",
        reward=_reward(row, "score", read), exit_status=read.text(row, "stop_reason"), num_turns=1,
        response_text=read.text(row, "output_response"),
    )


def _reward(row: dict[str, Any], key: str, read: Fields) -> float | None:
    value = row.get(key)
    if isinstance(value, list):
        return sum(_numbers(value, key, read))
    return read.number(row, key, required=True)  # every row SkyRL dumps scores its response


def _numbers(values: Any, name: str, read: Fields) -> list[float]:
    if not isinstance(values, list):
        raise read.error(name, "a list of numbers", type_name(values))
    return [read.number({name: v}, name) or 0.0 for v in values]


def generator_rollouts(output: dict[str, Any], read: Fields, label: str, step: int):
    """``(trajectory, tokens)`` for each rollout of a ``GeneratorOutput``."""
    responses = read.items(output, "response_ids", required=True) or []
    columns = {}
    for key in ("rewards", "loss_masks", "stop_reasons", "rollout_logprobs", "trajectory_ids"):
        column = read.items(output, key, required=key in ("rewards", "loss_masks"))
        if column is not None and len(column) != len(responses):
            raise read.error(key, f"{len(responses)} entries (one per response)", f"{len(column)}")
        columns[key] = column
    for index, response in enumerate(responses):
        at = read.at(f"{read.record}, rollout {index}" if read.record else f"rollout {index}")
        if not isinstance(response, list):
            raise at.error("response_ids", "a list of token ids", type_name(response))
        mask = at.mask({"loss_masks": columns["loss_masks"][index]}, "loss_masks", required=True,
                       name=f"loss_masks[{index}]")
        reward = columns["rewards"][index]
        token_rewards = None
        if isinstance(reward, list):
            token_rewards = _numbers(reward, "rewards", at)
            reward = sum(token_rewards)
        else:
            reward = at.number({"rewards": reward}, "rewards")
        instance, repetition = _trajectory_id(columns["trajectory_ids"], index, at)
        log_probs = None
        if columns["rollout_logprobs"] is not None:
            log_probs = _numbers(columns["rollout_logprobs"][index], "rollout_logprobs", at)
        stop = columns["stop_reasons"][index] if columns["stop_reasons"] is not None else None
        trajectory = TRAJECTORY(
            trajectory_id=f"{instance}_{repetition}" if instance is not None else f"{label}/{index}",
            step=step, task_id=instance if instance is not None else f"{label}/{index}",
            reward=reward, exit_status=stop if isinstance(stop, str) else None, num_turns=1,
            model_tokens=sum(mask),
        )
        tokens = TOKENS(response_mask=mask, token_rewards=token_rewards, log_probs=log_probs)
        yield trajectory, tokens


def _trajectory_id(ids: list[Any] | None, index: int, read: Fields) -> tuple[str | None, int | None]:
    if ids is None or ids[index] is None:
        return None, None
    entry = ids[index]
    if not isinstance(entry, dict):
        raise read.error("trajectory_ids", "a TrajectoryID object {instance_id, repetition_id}", type_name(entry))
    instance = read.identifier(entry, "instance_id", required=True, name="trajectory_ids.instance_id")
    repetition = read.integer(entry, "repetition_id", required=True, name="trajectory_ids.repetition_id",
                              bounds=(0, INT64[1]))
    return str(instance), repetition


__all__ = ["EVAL_KEYS", "FORMAT", "GENERATOR_KEYS", "detect", "eval_row", "generator_rollouts", "is_eval_dump",
           "load_skyrl"]
