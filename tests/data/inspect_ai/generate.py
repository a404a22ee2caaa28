"""Write the inspect_ai fixture logs with inspect_ai's own log writer and its mock model.

Run in a throwaway environment with inspect_ai installed (no model service is needed)::

    python -m venv /tmp/venv-inspect && /tmp/venv-inspect/bin/pip install inspect_ai==0.3.285
    /tmp/venv-inspect/bin/python tests/data/inspect_ai/generate.py

It writes ``tiny.eval`` (the zip log) and ``tiny.json`` (the JSON log) beside this script:
two samples, two epochs each, a ``bash`` and a ``python`` tool, scored by ``includes()``.
inspect_ai 0.3.285 compresses ``.eval`` members with zstd (``inspect_ai/_util/zipfile.py``,
``zipfile_compress_kwargs``), which Python reads only from 3.14 or with ``zstandard``; earlier
releases wrote deflate. ``tiny.eval`` is written with deflate (the writer's own kwargs switched),
``zstd/tiny.eval`` as the release writes it by default.
"""

from __future__ import annotations

import shutil
import tempfile
import zipfile
from pathlib import Path

from inspect_ai import Task, eval
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import includes
from inspect_ai.solver import generate, system_message, use_tools
from inspect_ai.tool import ToolError, tool

HERE = Path(__file__).resolve().parent


@tool
def bash():
    async def execute(cmd: str) -> str:
        """Run a shell command.

        Args:
            cmd: The command line.
        """
        if cmd.startswith("false"):
            raise ToolError("exit status 1")
        return f"ran: {cmd}"

    return execute


@tool
def python():
    async def execute(code: str) -> str:
        """Run Python code.

        Args:
            code: The program.
        """
        return "42\n"

    return execute


def outputs() -> list[ModelOutput]:
    """What the mock model answers, in order: four sample-epochs of three turns each."""
    model = "mockllm/model"
    turns = []
    for answer, command in (("The answer is 42.", "ls -la /src"), ("I think it is 41.", "false && ls"),
                            ("Paris", "grep -rn capital /src"), ("It is Lyon.", "python -m pytest -q")):
        turns.append(ModelOutput.for_tool_call(model, "bash", {"cmd": command}, content="Let me look."))
        turns.append(ModelOutput.for_tool_call(model, "python", {"code": "print(6 * 7)"}))
        turns.append(ModelOutput.from_content(model, answer))
    for number, turn in enumerate(turns):
        # Usage given, so the mock model does not count tokens with a tokenizer it would download.
        turn.usage = ModelUsage(input_tokens=100 + number, output_tokens=10 + number, total_tokens=110 + 2 * number)
    return turns


def main() -> None:
    task = Task(
        dataset=[Sample(input="What is six times seven?", target="42", id="multiply"),
                 Sample(input="What is the capital of France?", target="Paris", id="capital")],
        solver=[system_message("Use the tools."), use_tools([bash(), python()]), generate()],
        scorer=includes(),
        epochs=2,
        name="tiny",
    )
    from inspect_ai._util.zipfile import zipfile_compress_kwargs

    zstd = dict(zipfile_compress_kwargs)
    (HERE / "zstd").mkdir(exist_ok=True)
    for log_format, target, compression in (("eval", "zstd/tiny.eval", zstd),
                                            ("eval", "tiny.eval", {"compression": zipfile.ZIP_DEFLATED,
                                                                   "compresslevel": 6}),
                                            ("json", "tiny.json", zstd)):
        zipfile_compress_kwargs.clear()
        zipfile_compress_kwargs.update(compression)
        with tempfile.TemporaryDirectory() as folder:
            model = get_model("mockllm/model", custom_outputs=outputs())
            [log] = eval(task, model=model, log_dir=folder, log_format=log_format, max_samples=1,
                         display="none", epochs=2)
            shutil.copy(log.location, HERE / target)


if __name__ == "__main__":
    main()
