"""JSON inside a page's script elements: no text of a trajectory can end the element or send the
HTML parser into its escaped states (``<!--<script`` swallowed the rest of the viewer page)."""

from __future__ import annotations

import json
import re

import pytest

import trajlens
from trajlens.report.html import json_script
from trajlens.report.viewer import viewer_page

HOSTILE = [
    "<!--<script>var a=1;",
    "</script><p>after</p>",
    "<!-- --> </SCRIPT > & &amp; <b>",
    "line\u2028separator\u2029paragraph",
    "quote \" backslash \\ slash </",
]
"""Texts an observation may hold (``cat index.html``) that broke or could break the page."""

_SCRIPT_BLOCK = re.compile(r'<script type="application/json" id="([^"]+)">(.*?)</script>', re.S)


@pytest.mark.parametrize("text", HOSTILE)
def test_json_in_a_script_holds_no_markup_and_reads_back(text):
    element = json_script("data", {"obs": text, "list": [text]})
    found = _SCRIPT_BLOCK.fullmatch(element)
    assert found is not None and found.group(1) == "data"
    body = found.group(2)
    assert not set(body) & {"<", ">", "&", "\u2028", "\u2029"}
    assert json.loads(body) == {"obs": text, "list": [text]}


def _run_with_observation(observation: str):
    from trajlens.rows import RunBuilder

    builder = RunBuilder("page", estimator="grpo", config={"group_size": 2}, source_format="test", source="page")
    for member in (0, 1):
        builder.add_trajectory(
            {"step": 1, "trajectory_id": f"t{member}", "group_id": "g", "task_id": "task", "reward": float(member),
             "reward_channels": [], "resolved": bool(member), "exit_status": "submitted",
             "model_tokens": 3, "observation_tokens": 2},
            [{"turn": 0, "tool_name": "bash", "command": "cat index.html", "arguments": '{"command": "cat index.html"}',
              "observation": observation, "return_code": 0, "token_start": 0, "token_end": 3},
             {"turn": 1, "tool_name": "bash", "command": "ls", "arguments": '{"command": "ls"}',
              "observation": "after", "return_code": 0, "token_start": 3, "token_end": 5}],
            {"response_mask": [True, True, True, False, True], "values": None,
             "token_rewards": [0, 0, 0, 0, float(member)], "log_probs": None},
            where=f"page: record {member}",
        )
    return builder.build()


def test_the_viewer_keeps_a_page_whose_observation_opens_a_comment_and_a_script(tmp_path):
    from built_runs import write_store

    observation = "<html><!--<script>var a=1;\n</script>--></html> & done"
    store = trajlens.open(write_store(tmp_path, [_run_with_observation(observation)]))
    page = viewer_page(store, "page", "t0")
    head, script = page.split('<div id="calls"></div>', 1)
    assert '<header id="head">' in head
    blocks = _SCRIPT_BLOCK.findall(script)
    assert [name for name, _ in blocks] == ["trajectory-0", "trajectory-1", "meta"]
    for _, body in blocks:
        assert "<" not in body
    trajectory = json.loads(blocks[0][1])
    assert trajectory["calls"][0]["obs"] == observation
    assert trajectory["calls"][1]["obs"] == "after"
    assert json.loads(blocks[-1][1])["run"] == "page"
    # Nothing of the observation is left as markup: the page's own script follows the data intact.
    assert script.count("<script") == 4 and script.count("</script>") == 4
