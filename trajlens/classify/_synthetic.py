"""Generated tool calls that look like real agent logs, for benchmarks and agreement tests.

:func:`synthetic_tool_calls` mixes the command shapes seen in the real fixtures (chains,
pipes, heredocs that write and heredocs that run, Django and SymPy runners, editor and think
tools, SWE-agent commands, rejected calls) with random file names, line numbers and test
names, so almost every command text is distinct and nothing is classified from a cache.
"""

from __future__ import annotations

import json

import numpy as np
import polars as pl

_PACKAGES = ("astropy", "django", "sympy", "requests", "pvlib", "pydicom", "astroid", "sqlfluff", "sklearn", "seaborn")
_MODULES = ("core", "utils", "models", "io", "fields", "parser", "nodes", "config", "dataset", "rules")
_WORDS = ("parse", "reindl", "to_json", "getitem", "format", "trim", "legend", "refit", "proxy", "debug", "separable")
_CODE = (
    "import {pkg}\nprint({pkg}.__version__)",
    "from {pkg}.{mod} import {word}\nresult = {word}({n})\nprint(result)\nassert result is not None",
    "import numpy as np\nx = np.arange({n})\nprint(x.sum() / {n2})",
)


def _command(rng: np.random.Generator, kind: int) -> tuple[str, str, str | None]:
    """(tool_name, arguments JSON, command) of one generated call."""
    pkg = _PACKAGES[rng.integers(len(_PACKAGES))]
    mod = _MODULES[rng.integers(len(_MODULES))]
    word = _WORDS[rng.integers(len(_WORDS))]
    n, n2 = int(rng.integers(1, 2000)), int(rng.integers(1, 2000))
    tag = f"{word}_{n}"
    path = f"{pkg}/{mod}/{word}{n % 97}.py"
    test = f"{pkg}/tests/test_{mod}_{n % 89}.py"
    script = f"reproduce_{tag}.py"
    code = _CODE[n % len(_CODE)].format(pkg=pkg, mod=mod, word=word, n=n, n2=n2)
    shapes = (
        f"cat {path}",
        f"sed -n '{n},{n + 40}p' {path}",
        f"cd /testbed && nl -ba {path} | sed -n '{n},{n2}p'",
        f"head -n {n} {path}",
        f"grep -rn \"def {word}\" {pkg}/ | head -20",
        f"find . -name \"*{word}*.py\" -type f | xargs grep -l \"{mod}\" 2>/dev/null",
        f"ls -la {pkg}/{mod}",
        f"sed -i 's/{word}(/{word}_{n}(/g' {path}",
        f"cat > {script} << 'EOF'\n{code}\nEOF",
        f"cat <<'EOF' > {script}\n{code}\nEOF\npython {script}",
        f"cp {path} {path}.bak && echo '# {tag}' >> {path}",
        f"python {script}",
        f"cd /testbed && python {script} 2>&1 | tail -{n % 50 + 5}",
        f"python -c \"from {pkg}.{mod} import {word}; print({word}({n}))\"",
        f"python3 - <<'PY'\n{code}\nPY",
        f"cd /testbed && python -m pytest {test} -x -q 2>&1 | tail -{n % 80 + 10}",
        f"pytest {test}::test_{word}_{n2} -xvs",
        f"python -m pytest -k \"{word} and not slow\" -q",
        f"./tests/runtests.py {mod}_{word}.tests --verbosity 2",
        f"bin/test {test}",
        f"python -m unittest {pkg}.tests.test_{mod}_{n % 89}",
        f"cd /testbed && python -m pytest tests/ -q -p no:cacheprovider 2>&1 | tail -{n % 40 + 5}",
        f"timeout {n % 300 + 30} pytest -x",
        "./tests/runtests.py --parallel 1",
        f"tox -e py3{n % 12}",
        f"pip install {pkg}=={n % 9}.{n2 % 20}",
        f"git diff {path}",
        f"git status && git diff --stat -- {pkg}",
        f"bash -lc 'cd /testbed && grep -n \"{word}\" {path}'",
        f"echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached -- {pkg}",
        f"open {path} {n}",
        f"edit {n}:{n + 3}\n    return {word}({n2})\nend_of_edit",
        f"find_file {word}{n % 97}.py {pkg}",
    )
    tools = (
        ("str_replace_editor", {"command": "view", "path": f"/testbed/{path}", "view_range": [n, n + 30]}),
        ("str_replace_editor", {"command": "str_replace", "path": f"/testbed/{path}", "old_str": word, "new_str": tag}),
        ("str_replace_editor", {"command": "create", "path": f"/testbed/{script}", "file_text": code}),
        ("think", {"thought": f"The {word} call in {mod} fails for n={n}; check the edge case first."}),
        ("finish", {"message": f"Fixed {word} in {path}."}),
    )
    if kind < len(shapes):
        command = shapes[kind]
        first = command.split(None, 1)[0]
        tool = first if first in ("open", "edit", "find_file") else "bash"
        return tool, json.dumps({"command": command}), command
    tool, arguments = tools[kind - len(shapes)]
    return tool, json.dumps(arguments), None


_SHAPES = 33
_TOOLS = 5


def synthetic_tool_calls(n: int, seed: int = 0, *, calls_per_trajectory: int = 50) -> pl.DataFrame:
    """``n`` generated tool calls in the ``tool_calls`` schema (about 1 in 200 rejected)."""
    rng = np.random.default_rng(seed)
    weights = np.ones(_SHAPES + _TOOLS)
    weights[_SHAPES + 3] = 4.0  # think calls are common in the runs trajlens is for
    kinds = rng.choice(len(weights), size=n, p=weights / weights.sum())
    tool_names, arguments, commands = [], [], []
    for kind in kinds:
        tool, argument, command = _command(rng, int(kind))
        tool_names.append(tool)
        arguments.append(argument)
        commands.append(command)
    index = np.arange(n)
    return pl.DataFrame(
        {
            "run_id": "synthetic",
            "step": (index // (calls_per_trajectory * 16)).astype(np.int64),
            "trajectory_id": [f"t{i}" for i in index // calls_per_trajectory],
            "call_index": (index % calls_per_trajectory).astype(np.int32),
            "turn": (index % calls_per_trajectory).astype(np.int32),
            "tool_name": tool_names,
            "arguments": arguments,
            "command": pl.Series(commands, dtype=pl.String),
            "observation": pl.Series([None] * n, dtype=pl.String),
            "return_code": pl.Series([None] * n, dtype=pl.Int32),
            "token_start": pl.Series([None] * n, dtype=pl.Int64),
            "token_end": pl.Series([None] * n, dtype=pl.Int64),
            "format_error": rng.random(n) < 0.005,
        }
    )
