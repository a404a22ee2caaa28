"""Rows of nebius/SWE-agent-trajectories, written in the schema its dataset card declares.

``dataset_info.features``: instance_id, model_name (string), target (bool), trajectory
(list of {cutoff_date, mask, role, system_prompt, text}), exit_status, generated_patch,
eval_logs (string). Roles are ``system``, ``user`` and ``ai``; the action is the last fenced
block of an ``ai`` message (SWE-agent's ThoughtActionParser).
"""

from __future__ import annotations

import json
from pathlib import Path

SYSTEM = "You are an autonomous programmer. Commands: open, goto, edit, find_file, search_dir, submit."


def _message(role: str, text: str, mask: bool) -> dict:
    return {"cutoff_date": "2024-06-01", "mask": mask, "role": role,
            "system_prompt": SYSTEM if role == "system" else "", "text": text}


def _ai(thought: str, action: str) -> dict:
    return _message("ai", f"DISCUSSION\n{thought}\n\n```\n{action}\n```\n", True)


ROWS = [
    {"instance_id": "astropy__astropy-12907", "model_name": "swe-agent-llama-70b", "target": True,
     "trajectory": [
         _message("system", SYSTEM, False),
         _message("user", "We're currently solving the following issue: separability matrix ...", False),
         _ai("Let me find the file.", "find_file separable.py"),
         _message("user", "Found 1 matches for \"separable.py\": /astropy/modeling/separable.py", False),
         _ai("Open it.", "open astropy/modeling/separable.py 240"),
         _message("user", "[File: /astropy/modeling/separable.py (317 lines total)]", False),
         _ai("Run the reproduction.", "python reproduce.py"),
         _message("user", "[[ True False]\n [False  True]]", False),
         _ai("Submit.", "submit"),
     ],
     "exit_status": "submitted", "generated_patch": "diff --git a/x b/x", "eval_logs": "PASSED"},
    {"instance_id": "astropy__astropy-12907", "model_name": "swe-agent-llama-8b", "target": False,
     "trajectory": [
         _message("system", SYSTEM, False),
         _message("user", "We're currently solving the following issue: separability matrix ...", False),
         _message("ai", "I think the bug is in separable.py but I will not run anything.", True),
         _message("user", "Your output was not formatted correctly.", False),
         _ai("Search.", "search_dir \"_cstack\""),
         _message("user", "Found 3 matches", False),
     ],
     "exit_status": "exit_cost", "generated_patch": "", "eval_logs": ""},
]


def write_parquet(path: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    message = pa.struct([("cutoff_date", pa.string()), ("mask", pa.bool_()), ("role", pa.string()),
                         ("system_prompt", pa.string()), ("text", pa.string())])
    schema = pa.schema([("instance_id", pa.string()), ("model_name", pa.string()), ("target", pa.bool_()),
                        ("trajectory", pa.list_(message)), ("exit_status", pa.string()),
                        ("generated_patch", pa.string()), ("eval_logs", pa.string())])
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(ROWS, schema=schema), path)
    return path


def write_jsonl(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    return path
