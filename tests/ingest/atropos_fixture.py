"""Writes Atropos scored groups the way an environment saves them (nothing here imports atroposlib).

``BaseEnv`` (NousResearch/atropos, ``atroposlib/envs/base.py``) writes each ``ScoredDataGroup``
as one JSONL line with ``jsonlines`` when ``data_path_to_save_groups`` is set. Masks hold the
token id for trained tokens and -100 for the rest.
"""

from __future__ import annotations

import json
from pathlib import Path

GROUPS = [
    {
        "tokens": [[1, 2, 3, 4, 5], [1, 2, 3, 6]],
        "masks": [[-100, -100, 3, 4, 5], [-100, -100, 3, 6]],
        "scores": [1.0, -1.0],
        "advantages": [[1.0, 1.0, 1.0, 1.0, 1.0], [-1.0, -1.0, -1.0, -1.0]],
        "ref_logprobs": None,
        "messages": [
            [{"role": "user", "content": "List files."},
             {"role": "assistant", "content": "", "tool_calls": [
                 {"id": "a", "type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}}]},
             {"role": "tool", "tool_call_id": "a", "content": "a.txt"},
             {"role": "assistant", "content": "a.txt"}],
            [{"role": "user", "content": "List files."}, {"role": "assistant", "content": "I cannot."}],
        ],
        "group_overrides": None,
        "overrides": None,
        "images": None,
    },
    {
        "tokens": [[7, 8, 9], [7, 8, 10]],
        "masks": [[-100, 8, 9], [-100, 8, 10]],
        "scores": [0.5, 0.5],
        "advantages": None,
        "ref_logprobs": None,
        "messages": None,
        "inference_logprobs": [[0.0, -0.1, -0.2], [0.0, -0.3, -0.4]],
        "group_overrides": None,
        "overrides": None,
        "images": None,
    },
]


def write_groups(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(group) + "\n" for group in GROUPS))
    return path
