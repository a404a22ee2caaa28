"""The main job on the shipped sample runs: what a user finds in the report."""

from __future__ import annotations

import html
import re
from pathlib import Path
from xml.etree import ElementTree

import polars as pl
import pytest
from cli_run import run_cli as cli

import trajlens
from trajlens.report import report_store
from trajlens.report.overview import check_label, main_finding

pytestmark = pytest.mark.slow

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"


@pytest.fixture(scope="module")
def reports(sample_store, tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    written = report_store(sample_store, out, run_ids=["sao-r6", "multireward", "resume-lr", "causal-r6-whitened",
                                                           "causal-grpo-length"])
    from trajlens.attribution import RECOMPUTATIONS, attribute
    from trajlens.report import classify_store

    classify_store(sample_store, ["causal-multireward"])
    attribute(sample_store, "causal-multireward", tuple(r for r in RECOMPUTATIONS if r.label == "sum_then_normalize"))
    return out, {report.run_id: report for report in written}


def test_r6_report_finds_the_collapse_and_its_cause(reports):
    out, by_run = reports
    findings = "\n".join(by_run["sao-r6"].findings)
    assert "as trained (gae_raw): all-negative batches at steps 119-121" in findings.splitlines()
    assert "gae_whitened" not in findings
    assert "critic grad_norm / its clip: median" in findings and "clipped on 135 of 135 steps (100%)" in findings
    # not attributed here: the drift attribution would judge, with the stage trend folded into it
    think = next(f for f in by_run["sao-r6"].findings if f.startswith("think grew 0.07 -> 0.48 from step 83 "))
    think = think.split("; by stage, think share: ")[1]
    first = float(think.split(" in ")[0])
    last = float(think.split("-> ")[1].split(" in ")[0])
    assert first < 0.1 and last > 0.4
    assert "all-negative batches at steps 119-121" in (out / "README.md").read_text()


def test_the_think_drift_links_the_trajectory_that_shows_it(reports):
    """The finding about think's share links to the trajectory with the highest think share, by
    the metric it is about, however it is worded ("think grew ...")."""
    out, _ = reports
    page = (out / "index.html").read_text()
    findings = page[page.index('id="sao-r6/findings"'):]
    findings = findings[:findings.index("</ul>")]
    think = next(item for item in findings.split("<li") if ">think grew 0.07 -&gt; 0.48" in item)
    assert re.search(r'<a href="sao-r6/view/[^"]+\.html">a trajectory: highest think share in Q4</a>', think)
    assert findings.count("a trajectory:") == 1


def test_multireward_report_flags_the_saturated_channel(reports):
    _, by_run = reports
    findings = "\n".join(by_run["multireward"].findings)
    assert "reward channel format: rel_gain" in findings and "(saturated" in findings
    # correctness keeps its signal and its rel_gain moved less than a quarter (0.58 -> 0.48): no finding
    assert not any("channel correctness" in f for f in by_run["multireward"].findings)
    # the channels' step means and rel_gains are drawn, one panel each, beside the reward; a run of one channel has none
    assert "reward_channels_by_step.svg" in {f.name for f in by_run["multireward"].figures}
    assert "![reward_channels_by_step](reward_channels_by_step.svg)" in by_run["multireward"].markdown.read_text()
    assert "reward_channels_by_step.svg" not in {f.name for f in by_run["sao-r6"].figures}


def test_multireward_report_follows_the_estimator_registry(reports, sample_store):
    out, _ = reports
    batches = sample_store.sql("SELECT estimator, max(abs(mean)) AS worst_mean FROM advantage_batches "
                               "WHERE run_id = 'multireward' GROUP BY estimator")
    worst = dict(zip(batches["estimator"], batches["worst_mean"]))
    assert "grpo_batch_std" in worst  # the run's config declares norm_adv: batch_std
    assert "gdpo_dynamic" in worst  # with token counts, as it whitens over model tokens
    assert worst["gdpo_verl"] < 1e-6  # summarised over model tokens, as verl's GDPO whitens
    text = (out / "multireward" / "stage_report.md").read_text()
    assert "over model tokens for gdpo_verl, gdpo_dynamic; over trajectories for grpo" in text
    # its viewer pages colour each call by the credit of the estimator the page says it trained with
    assert "The run trained with `grpo_batch_std`" in text
    pages = sorted((out / "multireward" / "view").glob("*.html"))
    assert pages and all('"estimator":"grpo_batch_std"' in page.read_text() for page in pages)


def test_resume_report_flags_the_doubled_learning_rate_on_the_checks_steps(reports):
    _, by_run = reports
    lr = next(f for f in by_run["resume-lr"].findings if f.startswith("critic/lr logged at 2.00x"))
    assert "on steps 41-159 (check learning_rate_mismatch fires on 119 of the 200 steps it checks)" in lr
    assert lr == by_run["resume-lr"].findings[0]  # the heaviest finding of the run


def test_findings_say_what_the_run_does_and_what_a_recomputation_would_do(reports):
    out, by_run = reports
    twin = by_run["causal-r6-whitened"].findings
    assert "recomputed under gae_raw (not what this run trained with): all-negative batches at steps 58-59, 61-64" in twin
    assert not any(f.startswith("gae_raw:") for f in twin)
    assert '<li class="recomputed" title="about a recomputation, not the run as trained">recomputed under gae_raw' \
        in (out / "index.html").read_text()
    length = by_run["causal-grpo-length"].findings
    assert length[0].startswith("model tokens per trajectory: ") and length[0].kind == "length"
    assert not any("0.000 in Q1 -> 0.000" in f for report in by_run.values() for f in report.findings)


def test_figures_are_standalone_svgs_drawn_once_for_both_pages(reports):
    """Each figure is an SVG file the Markdown shows, with a hover title per mark, and the very
    element index.html shows inline."""
    out, by_run = reports
    figures = by_run["sao-r6"].figures
    assert {f.name for f in figures} == {"class_shares_by_step.svg", "class_shares_per_trajectory.svg",
                                         "distributions.svg", "stage_rates.svg", "advantage_batches.svg",
                                         "reward_and_length_by_step.svg"}
    markdown = by_run["sao-r6"].markdown.read_text()
    page = (out / "index.html").read_text()
    for figure in figures:
        text = figure.read_text()
        root = ElementTree.fromstring(text)
        assert root.tag == "{http://www.w3.org/2000/svg}svg" and len(text) > 20_000
        assert next(root.iter("{http://www.w3.org/2000/svg}title"), None) is not None, figure.name
        assert f"![{figure.stem}]({figure.name})" in markdown
        assert text.rstrip("\n") in page, figure.name


def test_analysis_tables_are_store_views(reports, sample_store):
    think = sample_store.sql(Path(SAMPLE.parent / "queries" / "think_share_by_step.sql").read_text(), {"run_id": "sao-r6"})
    by_step = dict(zip(think["step"], think["think_share"]))
    assert by_step[10] < 0.12 and by_step[130] > 0.6
    batches = sample_store.sql(
        "SELECT step FROM advantage_batches WHERE run_id = $run AND estimator = 'gae_raw' AND all_negative ORDER BY step",
        {"run": "sao-r6"})
    assert batches["step"].to_list() == [119, 120, 121]
    rates = sample_store.table("stage_rates").filter(pl.col("run_id") == "sao-r6").collect()
    assert set(rates["stage"]) == {"Q1", "Q2", "Q3", "Q4"}




def test_a_runs_class_share_is_its_calls_over_all_calls_in_every_table(reports, sample_store):
    """The per-trajectory class table shows the share the runs side by side (and compare) show:
    the run's think calls over its calls, not the mean of its trajectories' shares."""
    out, by_run = reports
    totals = sample_store.sql("SELECT sum(count_think) / sum(n_calls) AS pooled, avg(share_think) AS averaged "
                              "FROM trajectory_measures WHERE run_id = $run", {"run": "sao-r6"}).row(0, named=True)
    assert abs(totals["pooled"] - totals["averaged"]) > 0.02  # the two statistics differ on this run
    row = next(line for line in by_run["sao-r6"].markdown.read_text().splitlines() if line.startswith("| think |"))
    assert float(row.split("|")[2]) == pytest.approx(totals["pooled"], abs=5e-5)


def test_sample_and_advantages_commands(sample_store, tmp_path):
    markdown = tmp_path / "r7.md"
    done = cli("sample", sample_store.path, "--run", "sao-r7", "--stages", "early:1-50,late:151-200", "--out", markdown)
    assert done.returncode == 0, done.stderr
    text = markdown.read_text()
    assert "| sao-r7 | early | 1–50 |" in text and "`ran_suite`" in text
    done = cli("advantages", sample_store.path, "--run", "sao-r6", "--estimator", "gae",
               "--option", "whiten=false", "--label", "raw")
    assert done.returncode == 0, done.stderr
    assert "all-negative batches: [119, 120, 121]" in done.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (("sample", "{store}", "--run", "nope"), "run 'nope' is not in the store"),
        (("sample", "{store}", "--run", "sao-r7", "--stages", "early"), "expected quartiles, early_late, or NAME:FIRST-LAST"),
        (("sample", "{store}", "--run", "sao-r6", "--stages", "early:1000-2000"), "no trajectory falls in any stage"),
        (("sample", "{store}", "--run", "sao-r6", "--stages", "early:1-50,late:500-600"),
         "stage 'late' (steps 500-600) holds no training step (the run's steps are 1-135)"),
        (("advantages", "{store}", "--run", "resume-lr", "--estimator", "grpo"), "no trajectories"),
        (("advantages", "{store}", "--run", "sao-r6", "--estimator", "ppo"), "estimator"),
        (("advantages", "{store}", "--run", "grpo-leg", "--estimator", "gae"), "gae needs critic values"),
    ],
)
def test_analysis_command_errors_are_one_line(sample_store, args, message):
    done = cli(*(a.format(store=sample_store.path) for a in args))
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], done.stderr


SNAPSHOTS = Path(__file__).resolve().parents[1] / "snapshots"
QUERY_PARAMS = {"run_id": "sao-r6", "name": "critic/grad_norm", "metric": "share:think", "estimator": "gae_raw",
                "run_a": "sao-r6", "run_b": "multireward"}
QUERY_RUN = {"reward_channels_by_step": "multireward", "dead_groups_by_step": "multireward",
             "attribution_relative_credit_by_step": "causal-multireward", "call_credit_by_class": "causal-multireward"}
QUERY_ESTIMATOR = {"call_credit_by_class": "sum_then_normalize"}


def check_snapshot(name: str, text: str) -> None:
    """Compare with tests/snapshots/NAME; TRAJLENS_UPDATE_SNAPSHOTS=1 rewrites it instead."""
    import os

    path = SNAPSHOTS / name
    if os.environ.get("TRAJLENS_UPDATE_SNAPSHOTS") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"no snapshot {path}; create it with TRAJLENS_UPDATE_SNAPSHOTS=1"
    assert text == path.read_text(), f"{name} differs from its snapshot"


QUERY_FILES = sorted((SAMPLE.parent / "queries").glob("*.sql"))


@pytest.mark.parametrize("path", QUERY_FILES, ids=[p.stem for p in QUERY_FILES])
def test_query_results_match_their_snapshots(reports, sample_store, path):
    text = path.read_text()
    params = {k: v for k, v in QUERY_PARAMS.items() if f"${k}" in text}
    if "run_id" in params:
        params["run_id"] = QUERY_RUN.get(path.stem, "sao-r6")
    if "estimator" in params:
        params["estimator"] = QUERY_ESTIMATOR.get(path.stem, params["estimator"])
    frame = sample_store.sql(text, params)
    check_snapshot(f"queries/{path.stem}.csv", frame.head(40).write_csv(float_precision=6))


def test_stage_report_matches_its_snapshot(reports):
    out, _ = reports
    check_snapshot("reports/sao-r6_stage_report.md", (out / "sao-r6" / "stage_report.md").read_text())


REAL = next((root / "shared" / "fixtures" / "real" for root in (SAMPLE.parent.parent, SAMPLE.parent.parent.parent)
             if (root / "shared" / "fixtures" / "real").is_dir()), SAMPLE.parent.parent / "shared" / "fixtures" / "real")


@pytest.mark.skipif(not REAL.is_dir(), reason="real fixture logs not present")
def test_report_on_real_agent_logs(tmp_path):
    """Agent logs have one step, some no rewards, and intervals at rates of exactly 0."""
    for folder in ("mini-swe-agent-deepseek-pr816", "SWE-agent"):
        trajlens.ingest([REAL / folder], tmp_path / "store")
    store = trajlens.open(tmp_path / "store")
    written = {r.run_id: r for r in report_store(store, tmp_path / "report")}
    deepseek = written["mini-swe-agent-deepseek-pr816"]
    assert "one step of agent logs (step 0): no training stages to compare" in deepseek.findings
    assert "## Recomputed advantages" in deepseek.markdown.read_text()  # groups of 3 with verdicts
    assert "## Recomputed advantages" not in written["SWE-agent"].markdown.read_text()  # no rewards
    assert written["SWE-agent"].findings[0] == "no resolved verdicts in the log; exit status: submitted 21, not logged 1"
    grpo = store.sql("SELECT count(*) AS steps, any_value(mean) AS mean FROM advantage_batches "
                     "WHERE run_id = 'mini-swe-agent-deepseek-pr816' AND estimator = 'grpo'")
    assert grpo.row(0) == (1, pytest.approx(0.0, abs=1e-6))  # GRPO advantages sum to zero per group


def test_report_on_a_verl_dump_without_token_counts(tmp_path):
    trajlens.ingest([SAMPLE.parent / "tests" / "data" / "verl" / "grpo-sandbox"], tmp_path / "store")
    store = trajlens.open(tmp_path / "store")
    (report,) = report_store(store, tmp_path / "report")
    assert any(f.startswith("reward channel format: rel_gain 0.50") and "saturated" in f for f in report.findings)
    labels = set(store.sql("SELECT DISTINCT estimator FROM advantage_batches")["estimator"])
    assert labels == {"grpo", "dr_grpo", "rloo", "sum_then_normalize"}  # gdpo_verl needs token counts


def test_the_report_keeps_the_advantages_a_user_saved_under_other_labels(tmp_path):
    trajlens.ingest([SAMPLE.parent / "tests" / "data" / "verl" / "grpo-sandbox"], tmp_path / "store")
    saved = cli("advantages", tmp_path / "store", "--run", "grpo-sandbox", "-e", "rloo", "--label", "mine")
    assert saved.returncode == 0, saved.stderr
    report_store(trajlens.open(tmp_path / "store"), tmp_path / "report")
    labels = set(trajlens.open(tmp_path / "store").sql("SELECT DISTINCT estimator FROM advantage_batches")["estimator"])
    assert labels == {"mine", "grpo", "dr_grpo", "rloo", "sum_then_normalize"}


def test_the_overview_lists_failures_in_the_order_they_first_fired(reports):
    """sao-r6: the starved critic fails from step 1, the think share from step 67, the all-negative
    streak at 119-121; the first screen names them in that order, failures before warnings."""
    _, by_run = reports
    failing = by_run["sao-r6"].failing
    statuses = [status for _, status, _ in failing]
    assert statuses == sorted(statuses, key=lambda status: status != "fail")
    first = [int(steps.split("-")[0].split(",")[0]) for _, status, steps in failing if status == "fail"]
    assert first == sorted(first)
    names = [name for name, status, _ in failing if status == "fail"]
    assert set(names[:2]) == {"critic_starved", "critic_explained_variance_unwhitened"}
    assert names[-1] == "all_negative_streak"


def test_the_overview_names_each_runs_main_problem_first(reports):
    out, by_run = reports
    main = {run_id: report.findings[0] for run_id, report in by_run.items()}
    assert main["causal-grpo-length"].startswith("model tokens per trajectory: ")
    assert "response_length_inflation" in [name for name, _, _ in by_run["causal-grpo-length"].failing]
    assert main["resume-lr"].startswith("critic/lr logged at 2.00x")
    assert main["multireward"].startswith("reward channel format:") and "saturated" in main["multireward"]
    assert main["sao-r6"].startswith(("think grew 0.07 -> 0.48 from step 83 (all 670 trajectories of the first and "
                                      "last stage, p < 0.001); not attributed yet", "critic grad_norm"))
    assert ("view decayed 0.28 -> 0.16 from step 68 (all 670 trajectories of the first and last stage, p < 0.001); "
            "displaced by think") in \
        "\n".join(by_run["sao-r6"].findings)
    assert by_run["resume-lr"].kind == "training scalars only" and by_run["sao-r6"].kind == "RL run with tools"
    # a run with no trajectories is reported on none: no split is named for it, on any surface
    readme = (out / "README.md").read_text()
    assert "## resume-lr\n\ntraining scalars only.\n" in readme and "## sao-r6\n\nRL run with tools; trajectories " \
        "of split train.\n" in readme
    assert (out / "resume-lr" / "stage_report.md").read_text().startswith("# resume-lr\n\nNo trajectories: training "
                                                                          "scalars only.\n")
    page = (out / "index.html").read_text()
    overview = page[page.index('<section id="report:overview">'):page.index("</section>")]
    assert page.index('<section id="report:overview">') < page.index('<section class="run"')
    for run_id, report in by_run.items():
        assert f'<a href="#{run_id}">{run_id}</a>' in overview
        assert html.escape(main_finding(report)) in overview
    # the control run's story: raw GAE, which it did not train with, would have collapsed it
    assert main_finding(by_run["causal-r6-whitened"]).startswith(
        "nothing notable in the run as trained; recomputed under gae_raw (not what this run trained with): "
        "all-negative batches at steps ")
    assert overview.count('<svg class="trend"') >= 3 * 4  # reward, length and a class for each run with steps
    readme = (out / "README.md").read_text().splitlines()
    assert readme[2] == "| run | kind | checks that fire | main finding |"
    row = next(line for line in readme if line.startswith("| [causal-grpo-length]"))
    assert "response_length_inflation (warn, steps 46-60)" in row and "| model tokens per trajectory: " in row
    # the table names a run's first checks and "N more"; its section lists every one, and its pages
    start = readme.index("## sao-r6")
    section = "\n".join(readme[start:next((i for i in range(start + 1, len(readme)) if readme[i].startswith("## ")),
                                           len(readme))])
    assert "| 5 more |" not in section and by_run["sao-r6"].failing[3:], "sao-r6 fires more checks than the table shows"
    for check in by_run["sao-r6"].failing:
        assert f"- {check_label(*check)}" in section
    assert "think_share (fail, steps " in section
    for exemplar in by_run["sao-r6"].exemplars:
        assert f"- [{exemplar.trajectory_id}](sao-r6/view/{exemplar.path.name}): {exemplar.why}" in section
        assert (out / "sao-r6" / "view" / exemplar.path.name).is_file()


def test_channel_findings_come_in_the_order_of_the_channels_names(sample_store):
    """Equal in weight, they were ranked in the order a hash grouping gave them, which changed
    from one report to the next: the overview's main finding of causal-multireward-gdpo was one
    channel's or the other's."""
    from trajlens.report.scalars import channel_findings

    channels = [f.split(":")[0] for f in channel_findings(sample_store, "causal-multireward")]
    assert channels == sorted(channels) == ["reward channel correctness", "reward channel format"]
    # the control run: neither channel's rel_gain moved by a quarter (4.96 -> 4.90, 0.87 -> 0.95)
    assert channel_findings(sample_store, "causal-multireward-gdpo") == []


def test_the_critic_finding_reads_the_clip_of_each_step_and_names_real_steps(tmp_path):
    """The clip changes at step 6 and grad_norm stays above 30 on steps 16-18: the finding takes
    the checks' ratio over the clip in force at each step and the steps the check fires at."""
    import json

    from trajlens.checks.evaluate import check_run
    from trajlens.report.scalars import critic_findings

    lines = []
    for step in range(11, 21):
        norm = 40.0 if step in (16, 17, 18) else 4.0
        lines.append({"_step": step, "critic/grad_norm": norm, "critic/grad_clip": 2.0 if step <= 15 else 10.0})
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text("".join(json.dumps(line) + "\n" for line in lines))
    (finding,) = critic_findings(check_run(metrics))
    # ratios: 2.0 on steps 11-15, 4.0 on 16-18, 0.4 on 19-20
    assert finding.startswith("critic grad_norm / its clip: median 2.00x, clipped on 8 of 10 steps (80%)")
    assert finding.endswith("critic_grad_norm_run fires at steps 16-18")
    assert finding.kind == "critic"  # a check on the critic fires: a finding of weight


def test_a_grad_norm_at_its_clip_without_a_check_firing_is_context(tmp_path):
    """A critic's grad_norm at its clip on half the steps (median 1.0x) led the first screen of
    runs where nothing happened, weighed as sao-r6's starved critic; no check on the critic fires."""
    import json

    from trajlens.checks.evaluate import check_run
    from trajlens.report.overview import MAIN_FINDING_LEAST
    from trajlens.report.scalars import critic_findings

    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text("".join(json.dumps({"_step": step, "critic/grad_norm": 1.0 + (0.1 if step % 2 else -0.1),
                                           "critic/grad_clip": 1.0}) + "\n" for step in range(1, 21)))
    (finding,) = critic_findings(check_run(metrics))
    assert finding.startswith("critic grad_norm / its clip: median 1.00x, clipped on 10 of 20 steps (50%)")
    assert finding.importance < MAIN_FINDING_LEAST


def test_the_overview_table_keeps_its_columns_and_links_each_run_to_its_heading():
    """A ``|`` in a finding (a channel named ``fmt|x``) stays in its cell, and a run id with a
    ``.`` or capitals links to the fragment a Markdown renderer gives its ``## run`` heading."""
    from types import SimpleNamespace

    from trajlens.markdown import markdown_anchor
    from trajlens.report.overview import overview_markdown

    report = SimpleNamespace(run_id="My.Run_1", kind="RL run", failing=[], findings=[], trends=[])
    lines = overview_markdown([report])
    assert lines[:2] == ["| run | kind | checks that fire | main finding |", "| --- | --- | --- | --- |"]
    assert lines[2].startswith("| [My.Run_1](#myrun_1) | RL run | none | ")
    assert markdown_anchor("sao-r6") == "sao-r6" and markdown_anchor("Run A.b") == "run-ab"
    from trajlens.markdown import markdown_row
    assert markdown_row(["reward channel fmt|x"]) == "| reward channel fmt\\|x |"


def test_the_exemplar_of_a_shrinking_class_is_where_the_class_still_was(samples_store_copy, tmp_path):
    """causal-multireward's submit share shrinks to 0 by Q4: its exemplar is Q1's highest, said so;
    the class-shares figure's tips give the class spread table's quartiles, and no other share."""
    store = trajlens.open(samples_store_copy)
    (report,) = report_store(store, tmp_path / "report", run_ids=["causal-multireward"], viewers_per_run=3)
    page = (tmp_path / "report" / "index.html").read_text()
    assert "highest submit share in Q1, before it shrank" in page and "highest submit share in Q4" not in page
    row = next(line for line in report.markdown.read_text().splitlines() if line.startswith("| edit | "))
    q1, median, q3 = (float(value) for value in row.split(" | ")[2:5])  # the class spread table's
    assert f"edit: median {median:.2f}, quartiles {q1:.2f}-{q3:.2f} of the shares of 1920 trajectories</title>" in page
    assert "mean" not in page.split("<title>edit: median", 1)[1].split("</title>", 1)[0]


def test_a_falling_reward_is_a_finding_that_leaves_the_main_one_first(reports):
    """sao-r6's mean reward fell 0.443 -> 0.303 and its resolved rate 38.5% -> 24.8% (first vs last
    quarter); only an unlabelled sparkline showed it. Both are stage trends now, worded as the
    others, with the N=80 sample of the last stage from the outcome by stage; the think drift
    still leads."""
    out, by_run = reports
    findings = [str(f) for f in by_run["sao-r6"].findings]
    reward = next(f for f in findings if f.startswith("mean reward: "))
    resolved = next(f for f in findings if f.startswith("resolved rate: "))
    assert reward.startswith("mean reward: 0.443 in Q1 -> 0.303 in Q4 (N=80 sample: ")
    assert resolved.startswith("resolved rate: 0.385 in Q1 -> 0.248 in Q4 (N=80 sample: ")
    assert main_finding(by_run["sao-r6"]).startswith("think grew 0.07 -> 0.48 from step 83")
    stage_report = (out / "sao-r6" / "stage_report.md").read_text()
    assert "## Outcome by stage" in stage_report and "· pop 0.303 |" in stage_report and "· pop 24.8% |" in stage_report


def _element(page: str, anchor: str) -> str:
    """The text of the element ``id=anchor`` of ``page`` up to the next heading (a row: the row)."""
    start = page.index(f'id="{anchor}"')
    tag = page.rfind("<", 0, start)
    if page.startswith("<tr", tag):
        return page[tag:page.index("</tr>", start)]
    end = page.find("<h3", start + 1)
    return page[tag:end if end > 0 else len(page)]


def test_every_evidence_link_lands_where_its_fact_is_shown(reports):
    """index.html linked every stage trend to the stage figure, which plots the think share, the
    suite rate and the verification mix only (tokens, turns, the view and submit shares were on no
    figure), and each channel finding to the outcome table, which holds no channel. A finding now
    links to the figure when it plots its metric, else to its metric's first row of the stage
    tables, and a channel finding to the channel table, which holds its rel_gain."""
    from trajlens.report.plots import STAGE_PLOT_METRICS

    out, by_run = reports
    page = (out / "index.html").read_text()
    seen = set()
    for run_id in ("sao-r6", "multireward", "causal-grpo-length"):
        start = page.index(f'id="{run_id}/findings"')
        items = re.findall(r"<li[^>]*>(.*?)</li>", page[start:page.index("</ul>", start)])
        subjects = {html.escape(str(f)): getattr(f, "subject", None) for f in by_run[run_id].findings}
        for item in items:
            text = item.split("<a ", 1)[0]
            subject = subjects[text]
            (target,) = re.findall(r'<a href="#([^"]+)">evidence</a>', item)
            if subject is None:
                continue
            shown = _element(page, target)
            if subject in STAGE_PLOT_METRICS:
                assert target == f"{run_id}/figure-stage_rates", text
            elif subject.startswith("channel:"):
                assert target == f"{run_id}/channels", text
                row = re.search(rf'<tr><td class="text">{subject.partition(":")[2]}</td>(.*?)</tr>', shown)
                early, late = re.search(r"rel_gain (\S+) in the first quarter -&gt; (\S+) in the last", text).groups()
                cells = re.findall(r'<td class="num">([^<]*)</td>', row.group(1))
                assert [f"{float(c):.2f}" for c in cells[:2]] == [early, late], text
            else:
                assert shown.startswith("<tr") and f'<td class="text">{subject}</td>' in shown, text
            seen.add(subject)
    assert {"mean:model_tokens", "mean:num_turns", "share:view", "share:submit", "reward", "resolved",
            "channel:format"} <= seen


def test_the_first_screen_gives_its_denominators_and_says_how_to_read_its_numbers(reports):
    """resume-lr's critic was "clipped on 44% of steps" (89 of 200, no denominator said) and its LR line
    read "(119 of 200 steps checked; ...)", as if only 119 were checked; neither page said what
    the brackets or Q1 and Q4 are."""
    from trajlens.report.overview import OVERVIEW_LEGEND

    out, by_run = reports
    findings = by_run["resume-lr"].findings
    assert any(f.startswith("critic grad_norm / its clip: median 0.97x, clipped on 89 of 200 steps (44%)") for f in findings)
    assert not any("steps checked" in f for f in findings)
    assert "95% interval" in OVERVIEW_LEGEND and "by default Q1-Q4, its quarters" in OVERVIEW_LEGEND and "rel_gain: " in OVERVIEW_LEGEND
    readme = (out / "README.md").read_text().splitlines()
    table_end = next(i for i, line in enumerate(readme) if i > 2 and not line.startswith("|"))
    assert readme[table_end:table_end + 2] == ["", OVERVIEW_LEGEND]
    page = (out / "index.html").read_text()
    assert f'</table><p class="note">{html.escape(OVERVIEW_LEGEND)}</p></section>' in page


def test_the_critic_findings_link_to_the_table_of_the_scalars_they_read(reports):
    """sao-r6's starved critic and its explained variance linked to an empty anchor: they link to
    a table of the scalars they read, whose numbers are theirs, in the page and the stage report."""
    import re

    out, by_run = reports
    critic = next(f for f in by_run["sao-r6"].findings if f.startswith("critic grad_norm / its clip: median "))
    explained = next(f for f in by_run["sao-r6"].findings if f.startswith("critic/vf_explained_var "))
    assert critic.evidence == explained.evidence == "scalars"
    page = (out / "index.html").read_text()
    start = page.index('<h3 id="sao-r6/scalars">Training scalars</h3>')
    table = page[start:page.index("</table>", start)]
    cells = [re.findall(r"<td[^>]*>([^<]*)</td>", row) for row in table.split("<tr")[2:]]
    rows = {cells_[0]: cells_[1:] for cells_ in cells}
    median = float(critic.split("median ")[1].split("x")[0])
    clipped, steps = critic.split("clipped on ")[1].split(" steps")[0].split(" of ")
    ratio = rows["critic grad_norm / its clip"]
    assert (int(ratio[0].replace(",", "")), round(float(ratio[2]), 2), ratio[4]) == (int(steps), median, clipped)
    low, high = explained.split(" ")[1], explained.split(" ")[3]
    assert f"{float(rows['critic/vf_explained_var'][1]):.2f}" == low and f"{float(rows['critic/vf_explained_var'][3]):.2f}" == high
    assert "## Training scalars" in (out / "sao-r6" / "stage_report.md").read_text()
