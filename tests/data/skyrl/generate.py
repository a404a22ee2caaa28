"""Write the SkyRL fixture with skyrl-train's own dump function, taken from its release wheel.

    pip download --no-deps --only-binary=:all: --python-version 3.12 skyrl-train==0.3.1 -d /tmp/skyrl
    python tests/data/skyrl/generate.py /tmp/skyrl/skyrl_train-0.3.1-py3-none-any.whl

skyrl-train needs Python 3.12, ray, torch and vLLM to import, so the writer,
``dump_per_dataset_eval_results`` (with ``sanitize_data_source``) of
``skyrl_train/utils/trainer_utils.py``, is read from the wheel and run on its own: it only
needs ``json``, a path, a logger and a tokenizer's ``decode`` (a word list here). It writes
``export/dumped_evals/global_step_2_evals/`` as the trainer's ``evaluate`` does
(``skyrl_train/evaluate.py``). ``generator_output.json`` is a ``GeneratorOutput``
(``skyrl_train/generators/base.py``) as ``json.dump`` writes that TypedDict, with
``TrajectoryID`` dataclasses as their fields.
"""

from __future__ import annotations

import ast
import json
import sys
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
WRITER = "skyrl_train/utils/trainer_utils.py"
FUNCTIONS = ("sanitize_data_source", "dump_per_dataset_eval_results")
WORDS = ["<s>", "What", "is", "6*7", "?", "42", "48", "Name", "a", "prime", "7", "9", "</s>"]


class Tokenizer:
    def decode(self, ids: list[int]) -> str:
        return " ".join(WORDS[i] for i in ids)


class Logger:
    def info(self, message: str) -> None:
        pass


def writer(wheel: Path) -> dict:
    source = zipfile.ZipFile(wheel).read(WRITER).decode()
    tree = ast.parse(source)
    chosen = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name in FUNCTIONS]
    namespace: dict = {"json": json, "Path": Path, "logger": Logger(), "List": list, "Dict": dict, "Any": object,
                       "AutoTokenizer": object, "GeneratorOutput": dict}
    exec(compile(ast.Module(body=chosen, type_ignores=[]), WRITER, "exec"), namespace)
    return namespace


def main(wheel: Path) -> None:
    dump = writer(wheel)["dump_per_dataset_eval_results"]
    outputs = {
        "prompt_token_ids": [[0, 1, 2, 3, 4]] * 2 + [[0, 7, 8, 9, 4]] * 2,
        "response_ids": [[5, 12], [6, 12], [10, 12], [11, 12]],
        "rewards": [1.0, 0.0, 1.0, 0.0],
        "stop_reasons": ["stop", "stop", "stop", "length"],
    }
    folder = HERE / "export" / "dumped_evals" / "global_step_2_evals"
    folder.mkdir(parents=True, exist_ok=True)
    dump(folder, Tokenizer(), outputs, ["gsm8k", "gsm8k", "primes/easy", "primes/easy"],
         ["gsm8k", "gsm8k", "primes", "primes"], [{"answer": "42"}, {"answer": "42"}, {}, {}],
         {"eval/all/avg_score": 0.5})
    generator_output = {
        "prompt_token_ids": [[0, 1, 2, 3, 4]] * 2,
        "response_ids": [[5, 12, 12], [6, 12, 12]],
        "rewards": [[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]],
        "loss_masks": [[1, 1, 0], [1, 1, 0]],
        "stop_reasons": ["stop", "stop"],
        "rollout_metrics": None,
        "rollout_logprobs": [[-0.5, -0.1, 0.0], [-1.5, -0.2, 0.0]],
        "trajectory_ids": [{"instance_id": "q1", "repetition_id": 0}, {"instance_id": "q1", "repetition_id": 1}],
        "is_last_step": None,
    }
    (HERE / "generator_output.json").write_text(json.dumps(generator_output) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
