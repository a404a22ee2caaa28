"""A new log format, a new check condition and a new estimator each take one module plus one
registry line, and nothing else changes.

Each test copies the package into a temporary folder, writes the new module there, adds the
one registry line to its registry, and runs the commands a user types against the copy (in a
fresh process, so the copy is what is imported). A registry that does not drive, or a second
list of names somewhere else, fails these tests.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def _copy_package(root: Path) -> Path:
    shutil.copytree(REPO / "trajlens", root / "trajlens", symlinks=False,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return root


def _add_line(path: Path, after: str, line: str) -> None:
    """Insert ``line`` after the first line of ``path`` that contains ``after`` (the one registry line)."""
    lines = path.read_text().splitlines(keepends=True)
    index = next(i for i, text in enumerate(lines) if after in text)
    lines.insert(index + 1, line + "\n")
    path.write_text("".join(lines))


RUN_COMMANDS = """
import contextlib, io, json, sys
from trajlens.cli._app import main
done = []
for args in json.loads(sys.argv[1]):
    errors = io.StringIO()
    with contextlib.redirect_stderr(errors):
        status = main(args)
    done.append([status, errors.getvalue()])
    if status not in (0, 1):
        break
with open(sys.argv[2], "w") as out:
    json.dump(done, out)
"""


def _trajlens(root: Path, *commands: list) -> list[tuple[int, str]]:
    """Run ``trajlens`` commands in turn, in one fresh process that imports the copy at ``root``:
    each command's exit status and what it wrote to stderr (it stops after a usage error)."""
    results = root / "commands.json"
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, "-c", RUN_COMMANDS, json.dumps([[str(a) for a in c] for c in commands]),
                           str(results)], cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return [tuple(result) for result in json.loads(results.read_text())]


TOY_FORMAT = '''\
"""A toy log: one JSON line per trajectory, ``{"toylog": 1, "step", "group", "reward", "calls"}``."""

from __future__ import annotations

from pathlib import Path

from trajlens.ingest._fields import parse_json, read_lines
from trajlens.ingest._probe import Probe
from trajlens.rows import TOOL_CALL, TRAJECTORY, RunBuilder, RunData


def detect(target: Probe | Path | str) -> bool:
    probe = Probe.of(target)
    return probe.suffix == ".jsonl" and probe.is_file and probe.first_line().startswith('{"toylog"')


def load_toy(paths, *, run_id=None, strict=True) -> RunData:
    file = Path(paths if isinstance(paths, (str, Path)) else paths[0])
    builder = RunBuilder(run_id or file.stem, source_format="toylog", source=str(file))
    for number, line in read_lines(file):
        record = parse_json(line, str(file), record=number)
        calls = [TOOL_CALL(turn=turn, tool_name=name, arguments="{}") for turn, name in enumerate(record["calls"])]
        builder.add_trajectory(TRAJECTORY(trajectory_id=f"t{number}", step=record["step"], group_id=record["group"],
                                          task_id=record["group"], reward=record["reward"]),
                               calls, where=f"{file}: record {number}")
    return builder.build()
'''

TOY_CONDITION = '''\
"""A toy condition: fires on every step whose value is above ``above``, ignoring intervals."""

from __future__ import annotations

import polars as pl

from trajlens.checks.conditions import Evidence, Outcome
from trajlens.intervals import pooled


def above_plainly(check, measure: str, series: pl.DataFrame, proportion: bool) -> Outcome:
    values = pooled(series, proportion)
    fired = values.filter(pl.col("value") > check.above)["step"].to_list()
    worst = values.sort("value", descending=True).row(0, named=True) if values.height else None
    evidence = Evidence(worst["step"] if worst else None, worst["value"] if worst else None,
                        threshold=f"> {check.above:g}")
    return Outcome(measure, tuple(fired), evidence, values.height)
'''


def _toy_log(path: Path) -> Path:
    rows = []
    for step in range(1, 7):
        for member in range(4):
            think = step >= 4 or member == 0
            rows.append({"toylog": 1, "step": step, "group": f"s{step}", "reward": float(member % 2),
                         "calls": ["think", "str_replace_editor"] if think else ["str_replace_editor", "bash"]})
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_a_toy_log_format_and_a_toy_check_condition(tmp_path):
    root = _copy_package(tmp_path / "copy")
    (root / "trajlens" / "ingest" / "toylog.py").write_text(TOY_FORMAT)
    _add_line(root / "trajlens" / "ingest" / "formats.py", 'Format("trl"',
              '        Format("toylog", *(lambda m: (m.detect, m.load_toy))(__import__("trajlens.ingest.toylog", '
              'fromlist=["load_toy"]))),')
    (root / "trajlens" / "checks" / "toy_condition.py").write_text(TOY_CONDITION)
    _add_line(root / "trajlens" / "checks" / "kinds.py", "CONDITION_KINDS: tuple",
              '    ConditionKind("above_plainly", "trajlens.checks.toy_condition:above_plainly", requires=("above",)),')

    log = _toy_log(tmp_path / "toy-run.jsonl")
    before = log.read_bytes()
    store = tmp_path / "store"
    checks = tmp_path / "checks.toml"
    checks.write_text('[checks.toy_think]\nmeasure = "share:think"\ncondition = "above_plainly"\nabove = 0.4\n')
    ingested, classified, shares, checked = _trajlens(
        root, ["ingest", log, "--store", store], ["classify", store],
        ["sql", store, "think_share_by_step", "--param", "run_id=toy-run", "--out", tmp_path / "shares.csv"],
        ["check", store, "--run", "toy-run", "--config", checks, "--json", tmp_path / "out.json"])
    assert ingested[0] == classified[0] == shares[0] == 0, (ingested, classified, shares)
    assert "think" in (tmp_path / "shares.csv").read_text()
    assert log.read_bytes() == before
    assert checked[0] == 1, checked  # the check fired: an error-severity check fails the run
    result = json.loads((tmp_path / "out.json").read_text())
    (toy,) = result["results"]
    # think is 1 of 2 calls in every trajectory from step 4 (0.5), 1 of 8 calls before (0.125)
    assert (toy["check"], toy["condition"], toy["status"]) == ("toy_think", "above_plainly", "fail")
    assert toy["fired_steps"] == [4, 5, 6] and toy["evidence"]["value"] == 0.5


def test_a_condition_the_registry_does_not_hold_is_refused(tmp_path):
    from trajlens.checks.spec import CheckConfigError, parse_checks

    with pytest.raises(CheckConfigError, match="field 'condition': expected one of threshold"):
        parse_checks({"checks": {"x": {"measure": "share:think", "condition": "above_plainly", "above": 1}}}, "c.toml")


TOY_ESTIMATOR = '''\
"""Median baseline: each trajectory's score minus the (lower) median score of its group."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from trajlens.estimators.grpo import OutcomeResult


def median_baseline(token_rewards: torch.Tensor, response_mask: torch.Tensor, group_ids: Any,
                    masked_rewards: str = "keep") -> OutcomeResult:
    scores = token_rewards.sum(dim=1)
    _, inverse = np.unique(np.asarray([str(g) for g in group_ids]), return_inverse=True)
    groups = torch.as_tensor(inverse)
    baseline = torch.empty_like(scores)
    for group in groups.unique():
        rows = groups == group
        baseline[rows] = scores[rows].median()
    advantages = scores - baseline
    return OutcomeResult(advantages[:, None] * response_mask, advantages, scores, baseline,
                         torch.ones_like(scores), "group_median")
'''

TOY_ESTIMATOR_ENTRY = (
    '    EstimatorSpec(name="median_baseline", summary="Score minus the group median.", '
    'function="trajlens.estimators.median_baseline:median_baseline", kind=Kind.OUTCOME, '
    'inputs=Input.GROUPS | Input.REWARDS, options=(_SCORE,), reference="none", reference_version="toy", '
    'statistics=Statistics.TRAJECTORIES, '
    'conventions=(EstimatorChoice("toy_median", "median_baseline", {}, "toy median baseline"),), '
    'declared_by=(Declaration((("algorithm.adv_estimator", "median_baseline"),), "median_baseline"),)),'
)


def _toy_run(directory: Path) -> Path:
    """12 steps of 4 groups of 4, logged advantages as the median baseline gives them, and a
    think habit that earns the best score in a group."""
    from trajlens.rows import RunBuilder
    from trajlens.store.layout import RunDirWriter

    builder = RunBuilder("toy-median", config={"algorithm": {"adv_estimator": "median_baseline"}},
                         source_format="test", source="toy")
    for step in range(1, 13):
        for group in range(4):
            rewards = [float((step * 7 + group * 3 + member * 5) % 4) for member in range(4)]
            median = sorted(rewards)[1]  # torch's median of four: the lower middle value
            for member, reward in enumerate(rewards):
                thinks = reward >= 2 or (step > 6 and member == 0)
                calls = [{"turn": 0, "tool_name": "think" if thinks else "bash",
                          "arguments": '{"thought": "x"}' if thinks else '{"command": "ls"}'},
                         {"turn": 1, "tool_name": "bash", "command": "pytest", "arguments": '{"command": "pytest"}'}]
                builder.add_trajectory({"step": step, "trajectory_id": f"{step}-{group}-{member}",
                                        "group_id": f"{step}:{group}", "task_id": f"task{group}", "reward": reward,
                                        "logged_advantage": reward - median, "model_tokens": 10},
                                       calls, where=f"toy {step}-{group}-{member}")
    run = builder.build()
    with RunDirWriter(directory, run.runs) as writer:
        writer.write_run(run)
    return directory


def test_a_toy_estimator_runs_through_every_surface(tmp_path):
    root = _copy_package(tmp_path / "copy")
    (root / "trajlens" / "estimators" / "median_baseline.py").write_text(TOY_ESTIMATOR)
    _add_line(root / "trajlens" / "estimators" / "registry.py", "_SPECS: tuple[EstimatorSpec, ...] = (",
              TOY_ESTIMATOR_ENTRY)
    store, run = tmp_path / "store", "toy-median"
    checks = tmp_path / "checks.toml"
    checks.write_text('[checks.run_mean]\nmeasure = "advantage:run:mean"\ncondition = "threshold"\nabove = 10\n')
    done = _trajlens(
        root, ["ingest", _toy_run(tmp_path / run), "--store", store],
        ["advantages", store, "--run", run, "--estimator", "median_baseline"],
        ["advantages", store, "--run", run, "--identify", "--json", tmp_path / "identify.json"],
        ["classify", store],
        ["attribute", store, "--run", run, "--out", tmp_path / "attribution.md"],
        ["report", store, "--run", run, "--out", tmp_path / "report", "--viewers", "0"],
        ["check", store, "--run", run, "--config", checks, "--json", tmp_path / "c.json"])
    assert [status for status, _ in done] == [0] * 7, done
    verdict = json.loads((tmp_path / "identify.json").read_text())
    assert "toy median baseline" in json.dumps(verdict), verdict
    assert "run's estimator: median_baseline" in (tmp_path / "attribution.md").read_text()
    assert "| median_baseline | 12 |" in (tmp_path / "report" / run / "stage_report.md").read_text()
    (result,) = json.loads((tmp_path / "c.json").read_text())["results"]
    assert result["status"] == "pass" and result["reason"] == "the run's estimator is median_baseline (from its config)"
