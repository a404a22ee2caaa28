"""Write the OpenRLHF fixture with OpenRLHF's own ``WandbLogger`` and wandb in offline mode.

    pip download --no-deps openrlhf==0.11.2 -d /tmp/openrlhf
    python -m venv /tmp/venv-wandb && /tmp/venv-wandb/bin/pip install wandb
    /tmp/venv-wandb/bin/python tests/data/openrlhf/generate.py /tmp/openrlhf/openrlhf-0.11.2-*.whl

``openrlhf/utils/logging_utils.py`` imports only the standard library (wandb inside the
class), so it is loaded from the wheel on its own, without torch or Ray. Its ``log_train`` is
called as the PPO trainer calls it (``openrlhf/trainer/ppo_trainer.py``: ``generated_samples``
is ``[decoded sequence, reward]``), for three steps; the table files wandb writes under
``files/media/table/train/`` are copied into ``wandb-run/``.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path
from types import SimpleNamespace

HERE = Path(__file__).resolve().parent
MODULE = "openrlhf-0.11.2.data/purelib/openrlhf/utils/logging_utils.py"
SAMPLES = [
    (1, "Solve 6*7. Answer: 48", 0.0),
    (2, "Solve 6*7. Answer: 42", 1.0),
    (3, "Name a prime. Answer: 7", 1.0),
]


def main(wheel: Path) -> None:
    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / "logging_utils.py"
        source.write_bytes(zipfile.ZipFile(wheel).read(MODULE))
        spec = importlib.util.spec_from_file_location("logging_utils", source)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        os.environ.update(WANDB_MODE="offline", WANDB_DIR=folder, WANDB_API_KEY="0" * 40, WANDB_SILENT="true")
        wandb_args = SimpleNamespace(key=None, org=None, project="openrlhf-fixture", group=None, run_name="ppo")
        logger = module.WandbLogger(SimpleNamespace(logger=SimpleNamespace(wandb=wandb_args)))
        for step, text, reward in SAMPLES:
            logger.log_train(step, {"generated_samples": [text, reward], "policy_loss": 0.1 * step})
        logger.close()
        tables = sorted(Path(folder).glob("wandb/offline-run-*/files/media/table/train/*.table.json"))
        target = HERE / "wandb-run"
        if target.exists():
            shutil.rmtree(target)
        target.mkdir()
        for number, table in enumerate(tables):
            shutil.copy(table, target / f"generated_samples_{number}.table.json")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
