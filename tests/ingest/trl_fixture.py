"""Writes a TRL GRPOTrainer output folder the way TRL writes one (nothing here imports TRL).

``GRPOTrainer.log`` (huggingface/trl v0.23-v0.25) builds ``{"step": [str(step)] * n, "prompt": ...,
"completion": ..., **rewards, "advantage": ...}`` and writes it with ``DataFrame.to_parquet`` to
``completions/completions_{step:05d}.parquet``; ``transformers.TrainerState.save_to_json``
writes ``trainer_state.json`` as ``json.dumps(asdict(state), indent=2, sort_keys=True)``. The
same columns and types are written here with pyarrow.

The run: 2 logging steps, 2 prompts x 3 generations each; two reward functions
(``accuracy``, ``format``; ``format`` is NaN for one row, as when a function does not apply);
advantages as TRL's default computes them, ``(r - mean_group) / (std_group + 1e-4)``
(``scale_rewards="group"``, unbiased std).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

PROMPTS = [
    "<|im_start|>user\nCount the lines of a.txt.<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user\nFix the failing test.<|im_end|>\n<|im_start|>assistant\n",
]
COMPLETIONS = [
    '<tool_call>{"name": "bash", "arguments": {"command": "wc -l a.txt"}}</tool_call>',
    "There are 3 lines.",
    '<tool_call>{"name": "bash", "arguments": {"command": "pytest -q"}}</tool_call>',
]
ACCURACY = {1: [[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]], 2: [[1.0, 1.0, 1.0], [0.0, 1.0, 1.0]]}
FORMAT = {1: [[1.0, float("nan"), 1.0], [1.0, 1.0, 0.0]], 2: [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]}
EPS = 1e-4


def advantages(rewards: list[float]) -> list[float]:
    mean = statistics.fmean(rewards)
    std = statistics.stdev(rewards)
    return [(r - mean) / (std + EPS) for r in rewards]


def expected_rows(step: int) -> list[dict]:
    rows = []
    for group, prompt in enumerate(PROMPTS):
        accuracy, fmt = ACCURACY[step][group], FORMAT[step][group]
        totals = [a + (0.0 if f != f else f) for a, f in zip(accuracy, fmt)]  # nansum
        for member, advantage in enumerate(advantages(totals)):
            rows.append({"step": str(step), "prompt": prompt, "completion": COMPLETIONS[member],
                         "accuracy": accuracy[member], "format": fmt[member], "advantage": advantage})
    return rows


def write_trl_output(output_dir: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    completions = output_dir / "completions"
    completions.mkdir(parents=True, exist_ok=True)
    for step in (1, 2):
        pq.write_table(pa.Table.from_pylist(expected_rows(step)), completions / f"completions_{step:05d}.parquet")
    log_history = [
        {"completion_length": 14.5, "epoch": 0.5, "grad_norm": 0.8, "kl": 0.0, "learning_rate": 1e-06, "loss": 0.0,
         "reward": 1.33, "reward_std": 0.52, "rewards/accuracy/mean": 0.5, "step": 1},
        {"completion_length": 13.0, "epoch": 1.0, "grad_norm": 0.4, "kl": 0.001, "learning_rate": 5e-07,
         "loss": 0.01, "reward": 1.83, "reward_std": 0.41, "rewards/accuracy/mean": 0.83, "step": 2},
        {"epoch": 1.0, "step": 2, "total_flos": 0.0, "train_loss": 0.005, "train_runtime": 12.5,
         "train_samples_per_second": 0.96, "train_steps_per_second": 0.16},
    ]
    state = {"best_metric": None, "best_model_checkpoint": None, "epoch": 1.0, "eval_steps": 500, "global_step": 2,
             "is_hyper_param_search": False, "is_local_process_zero": True, "is_world_process_zero": True,
             "log_history": log_history, "logging_steps": 1, "max_steps": 2, "num_input_tokens_seen": 0,
             "num_train_epochs": 1, "save_steps": 500, "stateful_callbacks": {}, "total_flos": 0.0,
             "train_batch_size": 6, "trial_name": None, "trial_params": None}
    (output_dir / "trainer_state.json").write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")
    return output_dir
