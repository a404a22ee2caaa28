"""Writes metrics the way verl's ``file`` tracking backend does (nothing here imports verl).

``FileLogger`` is transcribed from verl-project/verl ``verl/utils/tracking.py`` at commit
047621b2583780b8ebda21126e75f5bf48dea7b9, which is

    Copyright 2024 Bytedance Ltd. and/or its affiliates
    Licensed under the Apache License, Version 2.0 (the "License"); you may not use this file
    except in compliance with the License. You may obtain a copy of the License at
    http://www.apache.org/licenses/LICENSE-2.0
    Unless required by applicable law or agreed to in writing, software distributed under the
    License is distributed on an "AS IS" BASIS, WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND,
    either express or implied. See the License for the specific language governing permissions
    and limitations under the License.

verl serialises with ``orjson.dumps(data, option=orjson.OPT_SERIALIZE_NUMPY)``; orjson is not
a trajlens dependency, so :func:`orjson_dumps` writes what orjson writes for these values:
compact JSON (no spaces), NaN and infinities as ``null``, numpy scalars as plain numbers.
The ``print`` of the log path is left out.
"""

from __future__ import annotations

import json
import math
import os


def orjson_dumps(data, option=None) -> bytes:
    def plain(value):
        if hasattr(value, "item") and not isinstance(value, (list, dict)):
            value = value.item()  # numpy scalar (OPT_SERIALIZE_NUMPY)
        if isinstance(value, float) and not math.isfinite(value):
            return None  # orjson writes NaN and +-Infinity as null
        if isinstance(value, dict):
            return {key: plain(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [plain(item) for item in value]
        return value

    return json.dumps(plain(data), separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


class FileLogger:
    def __init__(self, project_name: str, experiment_name: str):
        self.project_name = project_name
        self.experiment_name = experiment_name

        self.filepath = os.getenv("VERL_FILE_LOGGER_PATH", None)
        if self.filepath is None:
            root_path = os.path.expanduser(os.getenv("VERL_FILE_LOGGER_ROOT", "."))
            directory = os.path.join(root_path, self.project_name)
            os.makedirs(directory, exist_ok=True)
            self.filepath = os.path.join(directory, f"{self.experiment_name}.jsonl")
        self.fp = open(self.filepath, "wb", buffering=0)

    def log(self, data, step):
        data = {"step": step, "data": data}
        self.fp.write(orjson_dumps(data) + b"\n")

    def finish(self):
        self.fp.close()


# What the shipped file holds: RayPPOTrainer.fit logs the validation before training at step 0,
# then one metrics dict per step (a NaN, as a critic metric can be, is written as null).
SHIPPED_METRICS: dict[int, dict] = {
    0: {"val-core/openai/gsm8k/acc/mean@1": 0.25},
    1: {"actor/pg_loss": -0.012, "actor/lr": 1e-06, "critic/vf_explained_var": float("nan"),
        "critic/grad_norm": 12.5, "training/global_step": 1, "training/epoch": 0},
    2: {"actor/pg_loss": 0.004, "actor/lr": 1e-06, "critic/vf_explained_var": 0.31,
        "critic/grad_norm": 9.75, "training/global_step": 2, "training/epoch": 0,
        "val-core/openai/gsm8k/acc/mean@1": 0.5},
}


def write_shipped(path: str) -> str:
    """Write :data:`SHIPPED_METRICS` with ``VERL_FILE_LOGGER_PATH=path``, as verl would."""
    previous = os.environ.get("VERL_FILE_LOGGER_PATH")
    os.environ["VERL_FILE_LOGGER_PATH"] = path
    try:
        logger = FileLogger("trajlens", "grpo-sandbox")
        for step, data in SHIPPED_METRICS.items():
            logger.log(data=data, step=step)
        logger.finish()
    finally:
        if previous is None:
            del os.environ["VERL_FILE_LOGGER_PATH"]
        else:
            os.environ["VERL_FILE_LOGGER_PATH"] = previous
    return path


if __name__ == "__main__":  # python tests/ingest/verl_file_logger.py regenerates the shipped file
    from pathlib import Path

    print(write_shipped(str(Path(__file__).resolve().parents[1] / "data" / "verl" / "file_logger.jsonl")))
