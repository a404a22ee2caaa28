"""Write the prime-rl rollout fixture as prime-rl's filesystem transport writes it.

prime-rl is not published on PyPI. Its orchestrator hands each step's training batch to the
trainer through ``FileSystemTrainingBatchSender.send`` (``src/prime_rl/transport/filesystem.py``
at PrimeIntellect-ai/prime-rl@02f03abb): ``msgspec.msgpack.Encoder().encode(batch)`` written to
``<output_dir>/rollouts/step_<step>/rollouts.bin`` (``get_rollout_dir``, ``get_step_path`` in
``src/prime_rl/utils/utils.py``). The structs below are ``TrainingExample`` and ``TrainingBatch``
of ``src/prime_rl/transport/types.py`` at that commit, copied field for field (``array_like``:
each struct is a msgpack array in field order; ``omit_defaults``: a trailing default is left out).
Needs ``msgspec`` (``pip install msgspec``):

    python tests/data/prime_rl/generate.py

Two steps of two prompts, two samples each; the advantage is the orchestrator's per-sample
scalar (reward minus the prompt's mean); one sample at step 1 carries none.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import msgspec

HERE = Path(__file__).resolve().parent
OUTPUT = HERE / "outputs" / "run-1"


class TrainingExample(msgspec.Struct, array_like=True, gc=False, omit_defaults=True):
    prompt_ids: list[int]
    prompt_mask: list[int]
    completion_ids: list[int]
    completion_mask: list[int]
    completion_logprobs: list[float]
    advantage: float | None = None


class TrainingBatch(msgspec.Struct, array_like=True, gc=False):
    examples: list[TrainingExample]
    temperature: float
    seq_len: int
    step: int


def example(prompt: list[int], completion: list[int], advantage: float | None) -> TrainingExample:
    return TrainingExample(prompt_ids=prompt, prompt_mask=[0] * len(prompt), completion_ids=completion,
                           completion_mask=[1] * (len(completion) - 1) + [0],  # the last token is not trained
                           completion_logprobs=[-0.5] * len(completion), advantage=advantage)


def send(batch: TrainingBatch) -> None:
    """``FileSystemTrainingBatchSender.send``."""
    step_path = OUTPUT / "rollouts" / f"step_{batch.step}"
    step_path.mkdir(parents=True, exist_ok=True)
    (step_path / "rollouts.bin").write_bytes(msgspec.msgpack.Encoder().encode(batch))


def main() -> None:
    shutil.rmtree(OUTPUT, ignore_errors=True)
    first, second = [1, 2, 3], [4, 5]
    send(TrainingBatch(examples=[example(first, [10, 11, 12], 0.5), example(first, [13, 14], -0.5),
                                 example(second, [15, 16, 17, 18], 0.0), example(second, [19, 20], 0.0)],
                       temperature=1.0, seq_len=8, step=0))
    send(TrainingBatch(examples=[example(first, [21, 22], 1.0), example(first, [23, 24, 25], -1.0),
                                 example(second, [26, 27], 0.25), example(second, [28, 29], None)],
                       temperature=1.0, seq_len=8, step=1))


if __name__ == "__main__":
    main()
