"""Writes TensorBoard event files the way transformers' ``TensorBoardCallback`` (and so TRL) does.

The writer is the trainer's own: ``torch.utils.tensorboard.SummaryWriter``. What the callback
does with it is transcribed below from transformers ``src/transformers/integrations/
integration_utils.py`` (``rewrite_logs`` and ``TensorBoardCallback.on_train_begin`` /
``on_log``, read from a copy of its main branch of 2025), which is

    Copyright 2020 The HuggingFace Team. All rights reserved.
    Licensed under the Apache License, Version 2.0 (the "License"); you may not use this file
    except in compliance with the License. You may obtain a copy of the License at
    http://www.apache.org/licenses/LICENSE-2.0
    Unless required by applicable law or agreed to in writing, software distributed under the
    License is distributed on an "AS IS" BASIS, WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND,
    either express or implied. See the License for the specific language governing permissions
    and limitations under the License.

(the transcription drops the hyper-parameter-search branch and the model-config text).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

# What GRPOTrainer logs at each logging step (TRL's ``_metrics``, averaged), as TRL names them.
LOGS: dict[int, dict[str, float]] = {
    1: {"loss": 0.0, "grad_norm": 0.8, "learning_rate": 1e-06, "reward": 1.25, "reward_std": 0.5,
        "rewards/format_reward/mean": 0.75, "rewards/format_reward/std": 0.25, "completions/mean_length": 14.5,
        "epoch": 0.5},
    2: {"loss": 0.01, "grad_norm": 0.4, "learning_rate": 5e-07, "reward": 1.75, "reward_std": 0.25,
        "rewards/format_reward/mean": 1.0, "rewards/format_reward/std": 0.0, "completions/mean_length": 13.0,
        "epoch": 1.0},
}
EVAL_LOGS: dict[int, dict[str, float]] = {2: {"eval_loss": 0.02, "eval_reward": 1.5, "epoch": 1.0}}


def rewrite_logs(d):
    new_d = {}
    eval_prefix = "eval_"
    eval_prefix_len = len(eval_prefix)
    test_prefix = "test_"
    test_prefix_len = len(test_prefix)
    for k, v in d.items():
        if k.startswith(eval_prefix):
            new_d["eval/" + k[eval_prefix_len:]] = v
        elif k.startswith(test_prefix):
            new_d["test/" + k[test_prefix_len:]] = v
        else:
            new_d["train/" + k] = v
    return new_d


class TensorBoardCallback:
    """``TensorBoardCallback`` as transformers has it, less what this fixture does not use."""

    def __init__(self, tb_writer=None):
        from torch.utils.tensorboard import SummaryWriter

        self._SummaryWriter = SummaryWriter
        self.tb_writer = tb_writer

    def _init_summary_writer(self, logging_dir, log_dir=None):
        log_dir = log_dir or logging_dir
        if self._SummaryWriter is not None:
            self.tb_writer = self._SummaryWriter(log_dir=log_dir)

    def on_train_begin(self, logging_dir, args_json):
        if self.tb_writer is None:
            self._init_summary_writer(logging_dir)
        if self.tb_writer is not None:
            self.tb_writer.add_text("args", args_json)

    def on_log(self, logging_dir, global_step, logs):
        if self.tb_writer is None:
            self._init_summary_writer(logging_dir)
        if self.tb_writer is not None:
            logs = rewrite_logs(logs)
            for k, v in logs.items():
                if isinstance(v, (int, float)):
                    self.tb_writer.add_scalar(k, v, global_step)
                elif isinstance(v, str):
                    self.tb_writer.add_text(k, v, global_step)
            self.tb_writer.flush()

    def on_train_end(self):
        if self.tb_writer:
            self.tb_writer.close()
            self.tb_writer = None


def write_runs(output_dir: Path, *, date: str = "Nov30_12-00-00_host", steps=(1, 2)) -> Path:
    """``{output_dir}/runs/<date>/events.out.tfevents.*`` for ``steps`` of :data:`LOGS` (and the
    evaluation of step 2); returns the event file."""
    logging_dir = output_dir / "runs" / date  # TrainingArguments.logging_dir's default
    callback = TensorBoardCallback()
    callback.on_train_begin(str(logging_dir), json.dumps({"output_dir": str(output_dir), "logging_steps": 1}))
    for step in steps:
        callback.on_log(str(logging_dir), step, LOGS[step])
        if step in EVAL_LOGS:
            callback.on_log(str(logging_dir), step, EVAL_LOGS[step])
    callback.on_train_end()
    (event_file,) = logging_dir.glob("events.out.tfevents.*")
    return event_file


def expected_scalars(steps=(1, 2)) -> dict[tuple[int, str], float]:
    """(step, tag) -> value as float32 (``add_scalar`` stores scalars as 32-bit floats)."""
    import numpy as np

    found = {}
    for step in steps:
        for logs in (LOGS[step], EVAL_LOGS.get(step, {})):
            for tag, value in rewrite_logs(logs).items():
                found[(step, tag)] = float(np.float32(value))
    return found


def set_written_time(event_file: Path, unix_time: int) -> Path:
    """Rename an event file as if its writer had started at ``unix_time`` (the name's first field)."""
    parts = event_file.name.split(".")
    parts[3] = str(unix_time)
    target = event_file.with_name(".".join(parts))
    os.replace(event_file, target)
    return target


SHIPPED = Path(__file__).resolve().parents[1] / "data" / "tensorboard"
"""The shipped copy (``tests/data/tensorboard/runs/<date>/``), regenerated by
``python tests/ingest/tensorboard_fixture.py``."""


if __name__ == "__main__":
    import shutil

    shutil.rmtree(SHIPPED / "runs", ignore_errors=True)
    print(write_runs(SHIPPED))
