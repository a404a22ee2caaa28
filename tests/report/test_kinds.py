"""Each kind of log gets a report that fits it: a run with validation data only, an RL run
without tools, single-step agent logs; each named for what it is and its main finding first."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from built_runs import built_run, no_tool_run, write_store
from cli_run import run_cli as cli

import trajlens
from trajlens.report import report_store
from trajlens.report.summary import COMMAND_CHARS


@pytest.fixture(scope="module")
def validation_store(tmp_path_factory):
    root = tmp_path_factory.mktemp("kinds")
    return write_store(root, [built_run("valonly", split="val"), built_run("trained")])


def test_a_validation_only_run_is_reported_as_what_it_is_beside_a_training_run(validation_store, tmp_path):
    written = {r.run_id: r for r in report_store(trajlens.open(validation_store), tmp_path / "out", viewers_per_run=1)}
    valonly, trained = written["valonly"], written["trained"]
    assert (valonly.split, valonly.kind) == ("val", "validation split only")
    assert "no train split: reported on its val split (val)" in valonly.findings
    assert (trained.split, trained.kind) == ("train", "RL run with tools")
    assert not any(f.startswith("recomputed under") or f.startswith("as trained") for f in valonly.findings)
    assert (tmp_path / "out" / "valonly" / "stage_report.md").read_text().startswith(
        "# valonly\n\nvalidation split only; trajectories of split val.")


def test_split_option_of_report_and_sample(validation_store, tmp_path):
    done = cli("report", validation_store, "--out", tmp_path / "val", "--split", "val", "--viewers", "0")
    assert done.returncode == 0, done.stderr
    readme = (tmp_path / "val" / "README.md").read_text()
    assert "no val split: reported on its train split" in readme  # the training run has no val split
    lines = done.stdout.splitlines()  # the overview, then where the report is
    assert lines[0].split() == ["trained", "RL", "run", "with", "tools"]
    assert lines[3].split() == ["valonly", "validation", "split", "only"]
    assert lines[-1].startswith("wrote reports for 2 run(s) under ") and "index.html" in lines[-1]
    done = cli("sample", validation_store, "--run", "valonly", "--n", "2")
    assert done.returncode == 0, done.stderr
    assert "run 'valonly' has no train split: sampling its val split" in done.stderr
    assert "| Q1 |" in done.stdout or "Q1" in done.stdout


def test_an_rl_run_without_tools_shows_reward_length_and_dead_groups(tmp_path):
    store = trajlens.open(write_store(tmp_path, [no_tool_run("math")]))
    (report,) = report_store(store, tmp_path / "out", viewers_per_run=1)
    assert report.kind == "RL run without tools"
    assert report.findings[0] == ("dead groups: 24 of 32 groups (75%, 95% [58%, 87%]) have equal rewards, so a "
                                  "group-relative advantage tells none of their rollouts apart")
    assert not any("0.000" in f for f in report.findings)
    names = {f.stem for f in report.figures}
    assert "reward_and_length_by_step" in names and not names & {"class_shares_by_step", "stage_rates"}
    assert set(report.trends) == {"reward", "model tokens"}
    assert [v for _, v in report.trends["reward"].points] == [0.625] * 8  # (0.5 + 1 + 0 + 1) / 4
    assert (report.trends["reward"].first, report.trends["reward"].last) == (0.625, 0.625)
    page = (tmp_path / "out" / "index.html").read_text()
    assert page.count('<svg class="trend"') == 2


def test_one_training_step_is_a_training_run_not_agent_logs(tmp_path):
    """A trainer's run of one step (its token arrays and step metrics logged) is a one-step RL
    run; its channels have no first and last quarter to compare."""
    from trajlens.checks.channels import run_channel_watch, watch_lines
    from trajlens.synth.generate import generate

    generate("multireward", tmp_path / "m1", steps=1, batch=8)
    trajlens.ingest([tmp_path / "m1"], tmp_path / "store")
    store = trajlens.open(tmp_path / "store")
    (report,) = report_store(store, tmp_path / "out", viewers_per_run=0)
    assert report.kind == "RL run of one training step"
    assert "a single training step: no stages to compare" in report.findings
    assert not any("agent logs" in f for f in report.findings)
    lines = watch_lines(run_channel_watch(store, report.run_id))
    assert lines[0].endswith("(the run's one step)") and "->" not in lines[0]


REAL = Path("/work/shared/fixtures/real")
for _root in (Path(__file__).resolve().parents[n] for n in (2, 3)):
    if (_root / "shared" / "fixtures" / "real").is_dir():
        REAL = _root / "shared" / "fixtures" / "real"


@pytest.mark.skipif(not (REAL / "mini-swe-agent-deepseek-pr816").is_dir(), reason="real fixture logs not present")
def test_single_step_agent_logs_set_resolved_beside_unresolved(tmp_path):
    trajlens.ingest([REAL / "mini-swe-agent-deepseek-pr816"], tmp_path / "store")
    store = trajlens.open(tmp_path / "store")
    (report,) = report_store(store, tmp_path / "out")
    assert report.kind == "eval run (one step of agent logs)"
    main = report.findings[0]  # the outcome leads, above the dead groups of the three reruns per task
    assert main.startswith("resolved 54% of 24 attempts (95% [35%, 72%]); resolved attempts took ")
    assert main.endswith("; exit status of the unresolved: Submitted 11")
    assert [c[2] for c in report.failing] == [""] * len(report.failing)  # one step: no steps named
    text = report.markdown.read_text()
    assert "### Resolved against unresolved" in text
    assert "The same values, not repeated: tool calls as turns." in text  # one call per turn
    contrast = text.split("### Resolved against unresolved")[1].split("###")[0]
    suite = next(line for line in contrast.splitlines() if line.startswith("| ran the full suite |"))
    assert all(0 <= float(cell) <= 1 for cell in suite.split("|")[2:5])  # a Wilson interval stays in [0, 1]
    assert "## Stages" not in text and "stage_rates" not in {f.stem for f in report.figures}
    # Three pages (the default), both outcomes among them: the medians first.
    assert _viewer_reasons(tmp_path) == ["resolved: median tool calls", "unresolved: median tool calls",
                                         "resolved: most tool calls"]
    page = next((tmp_path / "out" / report.run_id / "view").glob("*.html")).read_text()
    assert '"text":"' in page and "back to the report" in page  # the model's own text, and the way back
    # --viewers N gives at most N pages: here more than the default, and one.
    (report,) = report_store(store, tmp_path / "six", viewers_per_run=6)
    assert [r.split(": ")[1] for r in _viewer_reasons(tmp_path, "six")] == [
        "median tool calls", "median tool calls", "most tool calls", "most tool calls", "fewest tool calls", "fewest tool calls"]
    assert len(report.viewers) == len({p.name for p in report.viewers}) == 6
    (report,) = report_store(store, tmp_path / "one", viewers_per_run=1)
    assert len(report.viewers) == 1 and _viewer_reasons(tmp_path, "one") == ["resolved: median tool calls"]


def _viewer_reasons(tmp_path, out: str = "out") -> list[str]:
    page = (tmp_path / out / "index.html").read_text()
    section = page[page.index('/trajectories">Trajectories</h3>'):]
    return [item.split("</a>: ")[1].split("</li>")[0] for item in section.split("<li>")[1:] if "</a>: " in item]


@pytest.mark.skipif(not (REAL / "mini-swe-agent-deepseek-pr816").is_dir(), reason="real fixture logs not present")
def test_view_takes_a_task_id_or_suffix_and_suggests_close_ids(tmp_path):
    trajlens.ingest([REAL / "mini-swe-agent-gemini3pro"], tmp_path / "store")
    store = tmp_path / "store"
    run = trajlens.open(store).run_ids()[0]
    task = "astropy__astropy-12907"
    done = cli("view", store, "--run", run, "--trajectory", task, "--out", tmp_path / "a.html", "--no-credit")
    assert done.returncode == 0, done.stderr
    assert "20251118_gemini-3-pro-74pct/astropy__astropy-12907" in (tmp_path / "a.html").read_text()
    done = cli("view", store, "--run", run, "--trajectory", "astropy__astropy-12908", "--out", tmp_path / "b.html")
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1].startswith(
        "error: --trajectory 'astropy__astropy-12908': not a trajectory or task of run")
    assert "close ids: 20251118_gemini-3-pro-74pct/astropy__astropy-12907" in done.stderr


def _html_rows(section: str) -> list[list[str]]:
    """The cells of each body row of the first table in ``section``."""
    body = section.split("<tbody>")[1].split("</tbody>")[0]
    return [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in body.split("</tr>")[:-1]]


@pytest.mark.parametrize(("split", "trajectories", "resolved"), [("train", "12", "0.500"), ("val", "6", "1.000")])
def test_side_by_side_and_top_commands_report_the_split_of_the_run_section(tmp_path, split, trajectories, resolved):
    from built_runs import VAL_COMMAND

    store = trajlens.open(write_store(tmp_path, [built_run("mixed", val_per_step=2), built_run("plain")]))
    written = {r.run_id: r for r in report_store(store, tmp_path / "out", viewers_per_run=0, split=split)}
    assert written["mixed"].split == split
    page = (tmp_path / "out" / "index.html").read_text()
    rows = {row[0]: row for row in _html_rows(page.split('<section id="report:runs">')[1])}
    assert rows["mixed"][1:4] == [split, trajectories, resolved]
    assert rows["plain"][1] == "train"  # no val split: the split its section reports
    commands = written["mixed"].html.split('id="mixed/summary-top_commands"')[1].split("</table>")[0]
    assert (VAL_COMMAND in commands) == (split == "val")
    assert ("pytest -q" in commands) == (split == "train")


def test_top_commands_name_the_action_that_gave_each_call_its_class(tmp_path):
    chained = ("cd /repo && pytest -q tests", "mkdir -p out && python3 run.py", "git status && grep -rn 'a b' . | head -3",
               "cat > f.py <<'EOF'\nx = 1\nEOF", "export A=1; sed -i s/a/b/ f.py", "timeout 60 python -m pytest tests/t.py",
               "(cd src && pytest)", "ls   -la", "git diff -- f > patch.txt")
    store = trajlens.open(write_store(tmp_path, [built_run("chained", commands=chained, calls=9)]))
    report_store(store, tmp_path / "out", viewers_per_run=0)
    table = (tmp_path / "out" / "chained" / "stage_report.md").read_text().split("### Most common commands per class")[1]
    table = table.split("\n#")[0]  # up to the next heading
    rows = {tuple(cell.strip() for cell in line.strip("|").split("|")[:2]) for line in table.splitlines()
            if line.startswith("| ") and not line.startswith(("| class", "| ---"))}
    assert rows == {("test_suite", "pytest -q"), ("test_suite", "pytest"), ("run_script", "python run.py"),
                    ("search", "grep -rn"), ("search", "ls -la"), ("edit", "cat >"), ("edit", "sed -i"),
                    ("edit", "git diff >"), ("test_targeted", "python -m pytest"), ("think", "think")}


def test_top_commands_count_commands_whose_words_differ_past_their_start_apart(tmp_path):
    """Two tests of one file share their first 40 characters: each is its own row; words longer than
    the table shows are cut with an ellipsis, not silently."""
    long_name = "pytest tests/test_requests.py::test_" + "x" * 60
    commands = ("pytest tests/test_requests.py::test_prepare_body_unicode",
                "pytest tests/test_requests.py::test_prepared_request_none", long_name)
    store = trajlens.open(write_store(tmp_path, [built_run("long", commands=commands, calls=3)]))
    report_store(store, tmp_path / "out", viewers_per_run=0)
    table = (tmp_path / "out" / "long" / "stage_report.md").read_text().split("### Most common commands per class")[1]
    rows = {line.strip("|").split("|")[1].strip() for line in table.split("\n#")[0].splitlines()
            if line.startswith("| test_targeted")}
    assert rows == {commands[0], commands[1], long_name[:COMMAND_CHARS - 1] + "…"}


def test_a_training_run_reported_on_its_validation_split_keeps_its_kind(tmp_path):
    """``--split val`` on a verl run with 7 training and 2 validation trajectories: the run is an RL
    run reported on its val split, not "validation split only"; its one validation step is said
    as such (not "one step of agent logs"), and no training channel finding joins the section."""
    store = tmp_path / "store"
    trajlens.ingest([Path(__file__).resolve().parents[1] / "data" / "verl" / "grpo-sandbox"], store)
    (report,) = report_store(trajlens.open(store), tmp_path / "out", split="val", viewers_per_run=0)
    assert (report.split, report.kind) == ("val", "RL run with tools")
    assert "the val split is at a single step: no stages to compare" in report.findings
    assert not any("one step of agent logs" in f or f.startswith("reward channel") for f in report.findings)
