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


def _trajlens(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([sys.executable, "-m", "trajlens", *map(str, args)], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)


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

from trajlens.checks.conditions import Evidence, Outcome, pooled


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
    _add_line(root / "trajlens" / "ingest" / "formats.py", 'Format("atropos"',
              '        Format("toylog", *(lambda m: (m.detect, m.load_toy))(__import__("trajlens.ingest.toylog", '
              'fromlist=["load_toy"]))),')
    (root / "trajlens" / "checks" / "toy_condition.py").write_text(TOY_CONDITION)
    _add_line(root / "trajlens" / "checks" / "kinds.py", "CONDITION_KINDS: tuple",
              '    ConditionKind("above_plainly", "trajlens.checks.toy_condition:above_plainly", requires=("above",)),')

    log = _toy_log(tmp_path / "toy-run.jsonl")
    before = log.read_bytes()
    store = tmp_path / "store"
    ingested = _trajlens(root, "ingest", log, "--store", store)
    assert ingested.returncode == 0, ingested.stderr
    classified = _trajlens(root, "classify", store)
    assert classified.returncode == 0, classified.stderr
    shares = _trajlens(root, "sql", store, "think_share_by_step", "--param", "run_id=toy-run",
                       "--out", tmp_path / "shares.csv")
    assert shares.returncode == 0, shares.stderr
    assert "think" in (tmp_path / "shares.csv").read_text()
    assert log.read_bytes() == before

    checks = tmp_path / "checks.toml"
    checks.write_text('[checks.toy_think]\nmeasure = "share:think"\ncondition = "above_plainly"\nabove = 0.4\n')
    checked = _trajlens(root, "check", store, "--run", "toy-run", "--config", checks, "--json", tmp_path / "out.json")
    assert checked.returncode == 1, checked.stderr  # the check fired: an error-severity check fails the run
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
    store = tmp_path / "store"
    assert _trajlens(root, "ingest", _toy_run(tmp_path / "toy-median"), "--store", store).returncode == 0

    recomputed = _trajlens(root, "advantages", store, "--run", "toy-median", "--estimator", "median_baseline")
    assert recomputed.returncode == 0, recomputed.stderr
    identified = _trajlens(root, "advantages", store, "--run", "toy-median", "--identify",
                           "--json", tmp_path / "identify.json")
    assert identified.returncode == 0, identified.stderr
    verdict = json.loads((tmp_path / "identify.json").read_text())
    assert "toy median baseline" in json.dumps(verdict), verdict

    assert _trajlens(root, "classify", store).returncode == 0
    attributed = _trajlens(root, "attribute", store, "--run", "toy-median", "--out", tmp_path / "attribution.md")
    assert attributed.returncode == 0, attributed.stderr
    assert "run's estimator: median_baseline" in (tmp_path / "attribution.md").read_text()

    reported = _trajlens(root, "report", store, "--run", "toy-median", "--out", tmp_path / "report", "--viewers", "0")
    assert reported.returncode == 0, reported.stderr
    assert "| median_baseline | 12 |" in (tmp_path / "report" / "toy-median" / "stage_report.md").read_text()

    checks = tmp_path / "checks.toml"
    checks.write_text('[checks.run_mean]\nmeasure = "advantage:run:mean"\ncondition = "threshold"\nabove = 10\n')
    checked = _trajlens(root, "check", store, "--run", "toy-median", "--config", checks, "--json", tmp_path / "c.json")
    assert checked.returncode == 0, checked.stderr
    (result,) = json.loads((tmp_path / "c.json").read_text())["results"]
    assert result["status"] == "pass", result
