"""The HTML report, the viewer and the run summary on built runs and on real harness logs."""

from __future__ import annotations

import hashlib
import re
import time
from pathlib import Path

import pytest
from cli_run import run_cli

import trajlens
from built_runs import built_run, write_store
from trajlens.report import report_store

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def real_folders() -> list[Path]:
    """Each folder of the real fixture logs kept beside the repository (or one level up)."""
    for root in (REPO.parent / "shared", REPO.parent.parent / "shared"):
        real = root / "fixtures" / "real"
        if real.is_dir():
            return sorted(p for p in real.iterdir() if p.is_dir() and p.name != "licenses")
    return []


@pytest.fixture(scope="module")
def built_store(tmp_path_factory):
    root = tmp_path_factory.mktemp("built")
    return trajlens.open(write_store(root, [built_run("short", steps=4), built_run("nomask", mask="all_false"),
                                            built_run("empty", mask="empty")]))


def tree_digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_report_is_byte_reproducible(built_store, tmp_path):
    first = report_store(built_store, tmp_path / "one", run_ids=["short"], comparisons=[("short:Q1", "short:Q4")])
    report_store(built_store, tmp_path / "two", run_ids=["short"], comparisons=[("short:Q1", "short:Q4")])
    one, two = tree_digest(tmp_path / "one"), tree_digest(tmp_path / "two")
    assert one == two
    assert {"index.html", "README.md", "short/stage_report.md", "short/stage_rates.svg"} <= set(one)
    assert len(first[0].viewers) == 3


def test_comparisons_say_how_to_add_one_until_one_is_added(built_store, tmp_path):
    from trajlens.report.html_report import NO_COMPARISONS

    report_store(built_store, tmp_path / "report", run_ids=["short"])
    index = tmp_path / "report" / "index.html"
    assert index.read_text().count(NO_COMPARISONS) == 1
    done = run_cli("compare", built_store.path, "short:Q1", "short:Q4", "--out", tmp_path / "cmp", "--report",
                   tmp_path / "report")
    assert done.returncode == 0, done.stderr
    text = index.read_text()
    assert NO_COMPARISONS not in text and "A = short (Q1), B = short (Q4)" in text


def test_index_is_self_contained_with_a_section_per_run_and_hook_points(built_store, tmp_path):
    report_store(built_store, tmp_path, comparisons=[("short:Q1", "short:Q4")])
    text = (tmp_path / "index.html").read_text()
    for run_id in ("short", "nomask", "empty"):
        assert f'<section class="run" id="{run_id}">' in text
    assert not re.search(r'(src|href)="(https?:)?//', text) and "<script src" not in text and "<link" not in text
    assert text.count("<svg") >= 12 and "<title>" in text
    assert 'id="report:comparisons"' in text and "A = short (Q1), B = short (Q4)" in text
    # each stage of these small runs is drawn whole: the header says how many that gave, not the N asked for
    headers = set(re.findall(r"Stages, (N=[^<]*)</h3>", text))
    assert headers and all(h.endswith("sampled per stage (whole stages)") for h in headers) and "whole stage" in text
    from trajlens.report.sections import RUN_SECTIONS

    assert [s.key for s in RUN_SECTIONS] == ["attribution", "checks"]


def test_runs_without_model_tokens_say_so(built_store, tmp_path):
    reports = {r.run_id: r for r in report_store(built_store, tmp_path, run_ids=["nomask", "empty"])}
    assert any("every response mask is false" in f for f in reports["nomask"].findings)
    assert any("every token array is empty" in f for f in reports["empty"].findings)
    assert "token arrays hold no model token" in (tmp_path / "README.md").read_text()


def test_optional_sections_appear_once_their_provider_exists(built_store, tmp_path, monkeypatch):
    from trajlens.report import sections

    monkeypatch.setattr(sections, "RUN_SECTIONS", (
        sections.RunSection("checks", "Checks", "trajlens.report.summary:run_summary"),  # importable, wrong signature
        sections.RunSection("missing", "Missing", "trajlens.not_a_module:run_section"),
    ))
    monkeypatch.setattr(sections, "resolve", lambda s: (lambda store, run_id: f"<p>checked {run_id}</p>")
                        if s.key == "checks" else None)
    report_store(built_store, tmp_path, run_ids=["short"], viewers_per_run=0)
    text = (tmp_path / "index.html").read_text()
    assert '<h3 id="short/checks">Checks</h3>' in text and "<p>checked short</p>" in text
    assert "Missing" not in text


def test_viewer_page_of_a_long_trajectory_is_built_quickly(tmp_path):
    from trajlens.report.viewer import run_credit, viewer_page

    store = trajlens.open(write_store(tmp_path, [built_run("long", long_trajectory=(300, 60_000))]))
    started = time.perf_counter()
    page = viewer_page(store, "long", "s3-t0", run_credit(store, "long", "gae_raw", steps=[3]))
    assert time.perf_counter() - started < 30
    assert page.count('<script type="application/json" id="trajectory-') == 4  # the step's four trajectories
    assert '"class":"think"' in page and '"credit":' in page and len(page) < 3_000_000


def test_view_command(built_store, tmp_path):
    out = tmp_path / "t.html"
    done = run_cli("view", built_store.path, "--run", "short", "--trajectory", "s2-t1", "--out", out)
    assert done.returncode == 0, done.stderr
    # the built run declares verl's GAE (its runs.estimator), which whitens: its own estimator colours the page
    assert "credit under gae_whitened" in done.stdout and '"id":"s2-t1"' in out.read_text()
    done = run_cli("view", built_store.path, "--run", "short", "--trajectory", "nope", "--out", out)
    assert done.returncode == 1 and done.stderr.strip() == "error: --trajectory 'nope': not a trajectory or task of run 'short'"


@pytest.fixture(scope="module")
def real_reports(tmp_path_factory):
    folders = real_folders()
    if not folders:
        pytest.skip("no real fixture logs beside the repository")
    root = tmp_path_factory.mktemp("real")
    trajlens.ingest(folders, root / "store", strict=False)
    store = trajlens.open(root / "store")
    reports = report_store(store, root / "report", viewers_per_run=1)
    return store, root / "report", {r.run_id: r for r in reports}


def test_report_on_every_real_log_folder(real_reports):
    store, out, reports = real_reports
    assert set(reports) == {folder.name for folder in real_folders()}
    index = (out / "index.html").read_text()
    for run_id, report in reports.items():
        markdown = report.markdown.read_text()
        assert "### Verification mix" in markdown and "### Class shares per trajectory" in markdown
        assert "### Turns and length per trajectory" in markdown and "format errors / tool calls" in markdown
        assert report.viewers and report.viewers[0].exists()
        assert f'id="{run_id}/summary-top_commands"' in index
    assert 'id="report:runs"' in index  # the runs side by side
    # agent logs without steps or outcomes: their exemplar is the run's median, not a quarter's
    section = (out / "README.md").read_text().split("## OpenHands")[1].split("\n## ")[0]
    assert "): median tool calls of the run" in section and " in Q1" not in section


def test_real_logs_report_resolved_rate_run_script_and_dead_groups(real_reports):
    _, out, reports = real_reports
    deepseek = reports["mini-swe-agent-deepseek-pr816"].markdown.read_text()
    # 24 rollouts of 8 tasks, 13 resolved; 6 of the 8 groups of three resolved alike. The resolved
    # rate is the checks' `resolved`: Wilson on the effective size, 23 for a share of 24 trajectories.
    assert "| resolved rate | 0.5417 | 0.3471 | 0.7243 | 24 | Wilson |" in deepseek
    assert "| 8 | 6 | 0.75 |" in deepseek
    assert "| run_script |" in deepseek
    gemini = reports["mini-swe-agent-gemini3pro"].markdown.read_text()
    assert "| resolved rate |" in gemini and "| quick_check | python -c |" in gemini


PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_png_writes_each_figure_as_png_too_and_the_markdown_shows_them(built_store, tmp_path):
    done = run_cli("report", built_store.path, "--run", "short", "--out", tmp_path / "report", "--png", "--viewers", "0")
    assert done.returncode == 0, done.stderr
    run = tmp_path / "report" / "short"
    svgs, pngs = sorted(run.glob("*.svg")), sorted(run.glob("*.png"))
    assert [p.stem for p in pngs] == [s.stem for s in svgs] and "stage_rates" in [p.stem for p in pngs]
    assert all(p.read_bytes().startswith(PNG_MAGIC) and p.stat().st_size > 10_000 for p in pngs)
    markdown = (run / "stage_report.md").read_text()
    assert all(f"![{p.stem}]({p.name})" in markdown for p in pngs) and ".svg)" not in markdown


def test_real_logs_figures_say_no_data_rather_than_blank(real_reports):
    _, out, reports = real_reports
    text = (out / "index.html").read_text()
    assert "one step, see the per-trajectory shares" not in text  # no per-step figure for one-step runs
    assert all("class_shares_by_step.svg" not in str(f) for r in reports.values() for f in r.figures)


def test_no_run_id_can_take_an_id_of_the_page_or_of_another_runs_parts(tmp_path, tiny_run_dir):
    """Runs named like the page's own sections (``runs``, ``overview``, ``comparisons``), and a run
    ``x`` beside a run ``x-checks``, each keep ids of their own, and every link finds its target."""
    import re as regex

    import trajlens as library

    store = tmp_path / "store"
    for run_id in ("runs", "overview", "x", "x-checks"):
        library.ingest([tiny_run_dir], store, run_id=run_id)
    library.report_store(library.open(store), tmp_path / "out", viewers_per_run=0)
    page = (tmp_path / "out" / "index.html").read_text()
    ids = regex.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})
    for target in set(regex.findall(r'href="#([^"]+)"', page)):
        assert target in ids, target
    assert {"runs", "overview", "x", "x-checks", "x/checks"} <= set(ids)
