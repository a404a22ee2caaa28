"""Write the SkyRL-Agent trace fixture with SkyRL-Agent's own message converter.

SkyRL-Agent is not published on PyPI; its code ships inside the ``skyrl`` 0.3.0 wheel
(``skyrl-agent/skyrl_agent/...``). Unpack that wheel and pass the folder:

    pip download --no-deps skyrl==0.3.0 -d /tmp/skyrl && unzip -q /tmp/skyrl/skyrl-0.3.0-*.whl -d /tmp/skyrl/whl
    python tests/data/skyrl_agent/generate.py /tmp/skyrl/whl/skyrl-agent

The CodeAct agent (``skyrl_agent/agents/oh_codeact/codeact_agent.py``, ``CodeActAgent.step``)
keeps ``self.messages``: the first step's messages converted by
``convert_fncall_messages_to_non_fncall_messages`` (``skyrl_agent/functional/function_calling.py``:
tools described in the system prompt, calls as ``<function=...>`` text, tool results as user
messages ``EXECUTION RESULT of [<tool>]:``), then each raw model response as an assistant
message and each step's last converted message (the observation, with ``Steps remaining: N.``
appended) as a user message. At wandb step 1 and every 10th it writes ``json.dumps(self.messages)``
to ``./trace/<run name>/step<step>/<instance id>/<trajectory id>/trace_<utc %Y%m%d_%H%M%S_%f>.json``,
once per agent step, so a trajectory's folder holds one growing file per step. This script runs
that loop for two instances, two trajectories each, at step 10 of run ``demo-run``, with the
converter itself (``litellm``, imported there only for a type, is stubbed) and fixed timestamps.
The model's responses are the converter's own rendering of each tool call.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE / "trace" / "demo-run" / "step10"
MAX_ITERATIONS = 5
TOOLS = [
    {"type": "function", "function": {"name": "execute_bash", "description": "Run a bash command.",
     "parameters": {"type": "object", "properties": {"command": {"type": "string", "description": "The command."}},
                    "required": ["command"]}}},
    {"type": "function", "function": {"name": "finish", "description": "Finish the task.",
     "parameters": {"type": "object", "properties": {}, "required": []}}},
]
TASKS = {
    "astropy__astropy-12907": [("ls", "setup.py\nastropy\n"), ("python -m pytest -q astropy/modeling", "1 failed")],
    "django__django-11099": [("grep -rn UsernameValidator django/contrib/auth", "validators.py:9:class ...")],
}


def converter(package: Path):
    sys.modules.setdefault("litellm", types.SimpleNamespace(ChatCompletionToolParam=dict))
    spec = importlib.util.spec_from_file_location("function_calling", package / "skyrl_agent" / "functional" / "function_calling.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.convert_fncall_messages_to_non_fncall_messages


def run_trajectory(convert, instance: str, trajectory: int, steps: list[tuple[str, str]]) -> None:
    folder = ROOT / instance / str(trajectory)
    folder.mkdir(parents=True)
    history = [{"role": "system", "content": "You are a software engineer."},
               {"role": "user", "content": f"Fix the issue of {instance}."}]
    messages: list[dict] = []
    actions = [("execute_bash", {"command": command}, output) for command, output in steps]
    actions += [("finish", {}, None)] if trajectory == 0 else []  # trajectory 1 runs out of steps unfinished
    for number, (tool, arguments, output) in enumerate(actions):
        converted = convert(history, TOOLS, add_in_context_learning_example=False)
        if not messages:
            messages = converted
        else:
            observation = converted[-1]
            observation["content"] += f"\nSteps remaining: {MAX_ITERATIONS - number + 1}."
            messages.append(observation)
        call = {"id": f"call_{number}", "type": "function",
                "function": {"name": tool, "arguments": json.dumps(arguments)}}
        assistant = {"role": "assistant", "content": f"Step {number + 1}.", "tool_calls": [call]}
        response = convert([assistant], TOOLS, add_in_context_learning_example=False)[0]["content"]
        messages.append({"role": "assistant", "content": response})
        (folder / f"trace_20260101_000000_{number:06d}.json").write_text(json.dumps(messages, default=lambda x: str(x)))
        history += [assistant]
        if output is not None:
            history.append({"role": "tool", "tool_call_id": call["id"], "name": tool, "content": output})


def main() -> None:
    convert = converter(Path(sys.argv[1]))
    shutil.rmtree(HERE / "trace", ignore_errors=True)
    for instance, steps in TASKS.items():
        for trajectory in (0, 1):
            run_trajectory(convert, instance, trajectory, steps)


if __name__ == "__main__":
    main()
