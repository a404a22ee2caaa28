"""The report, comparison and viewer pages in headless Chromium: they load with no console error
and no network request, figures render, and the viewer's filter and navigation work.

Screenshots of each page type go to ``$TRAJLENS_SCREENSHOTS`` (default ``out/browser-tests/``)
for a person to look at.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from cdp import ROOT, Browser

pytestmark = pytest.mark.slow

SHOTS = Path(os.environ.get("TRAJLENS_SCREENSHOTS", ROOT / "out" / "browser-tests"))


def load(browser: Browser, path: Path) -> float:
    started = time.perf_counter()
    browser.open(path)
    browser.settle()
    return time.perf_counter() - started


def assert_clean(browser: Browser) -> None:
    assert browser.console_errors() == []
    assert browser.network_requests() == []


def test_report_index_loads_clean_with_figures(browser, pages):
    load(browser, pages["index"])
    assert_clean(browser)
    figures = browser.evaluate("""[...document.querySelectorAll('figure.chart svg')].map(s => {
        const box = s.getBoundingClientRect();
        return {width: box.width, height: box.height, marks: s.querySelectorAll('path').length,
                tips: s.querySelectorAll('title').length};
    })""")
    assert len(figures) >= 8
    for figure in figures:
        assert figure["width"] > 300 and figure["height"] > 150 and figure["marks"] > 10
    assert sum(f["tips"] for f in figures) > 20
    assert browser.evaluate("document.querySelectorAll('section.run').length") == 4
    assert browser.evaluate("document.querySelectorAll('[id=\"report:comparisons\"] table tbody tr').length") > 10
    browser.screenshot(SHOTS / "report_index.png")
    browser.evaluate("document.querySelector('[id=\"long/figure-advantage_batches\"]').scrollIntoView()")
    browser.screenshot(SHOTS / "report_figure.png")


def test_findings_link_to_evidence_that_exists(browser, pages):
    load(browser, pages["index"])
    missing = browser.evaluate("""[...document.querySelectorAll('ul.findings a[href^="#"]')]
        .map(a => a.getAttribute('href')).filter(h => !document.getElementById(h.slice(1)))""")
    assert missing == []
    assert browser.evaluate("document.querySelectorAll('ul.findings a').length") > 2


def test_comparison_page_loads_clean(browser, pages):
    load(browser, pages["comparison"])
    assert_clean(browser)
    assert browser.evaluate("document.querySelectorAll('tbody tr').length") > 10
    browser.screenshot(SHOTS / "comparison.png")


def test_viewer_handles_a_long_trajectory_lazily(browser, pages):
    long_calls = pages["long_calls"]
    seconds = load(browser, pages["viewer"])
    assert_clean(browser)
    assert seconds < 10
    state = browser.evaluate("({id: document.getElementById('trajectory-id').textContent,"
                             " rendered: document.querySelectorAll('.call').length,"
                             " meta: document.querySelector('#head .meta').textContent})")
    assert state["id"] == "s3-t0" and f"{long_calls} calls" in state["meta"]
    assert 0 < state["rendered"] < long_calls  # rendered as it scrolls into view
    browser.screenshot(SHOTS / "viewer_top.png")
    painted = browser.evaluate("""(() => { const c = document.querySelector('.call canvas');
        const d = c.getContext('2d').getImageData(0, 0, c.width, 1).data;
        for (let i = 0; i < d.length; i += 4) if (d[i] < 250 || d[i + 1] < 250 || d[i + 2] < 250) return true;
        return false; })()""")
    assert painted
    started = time.perf_counter()
    for _ in range(200):  # scroll down as a reader would, a screen and a half at a time
        browser.evaluate("window.scrollBy(0, 1400)")
        browser.settle(0.05)
        if browser.evaluate("document.querySelectorAll('.call').length") == long_calls:
            break
    assert browser.evaluate("document.querySelectorAll('.call').length") == long_calls
    assert time.perf_counter() - started < 20
    browser.screenshot(SHOTS / "viewer_bottom.png")


def test_viewer_filter_hides_a_class(browser, pages):
    load(browser, pages["viewer"])
    visible = "[...document.querySelectorAll('.call')].filter(d => d.offsetParent !== null && d.dataset.class === 'think').length"
    assert browser.evaluate(visible) > 0
    browser.evaluate("document.querySelector('#filters input[data-class=\"think\"]').click()")
    assert browser.evaluate(visible) == 0
    assert browser.evaluate("document.querySelectorAll('.call:not(.hidden)').length") > 0
    browser.screenshot(SHOTS / "viewer_filtered.png")
    browser.evaluate("document.querySelector('#filters input[data-class=\"think\"]').click()")
    assert browser.evaluate(visible) > 0
    assert_clean(browser)


def test_viewer_navigates_within_the_step(browser, pages):
    load(browser, pages["viewer"])
    first = browser.evaluate("document.getElementById('trajectory-id').textContent")
    browser.evaluate("document.getElementById('next').click()")
    browser.settle()
    second = browser.evaluate("document.getElementById('trajectory-id').textContent")
    assert second != first and second.startswith("s3-")
    assert browser.evaluate("decodeURIComponent(location.hash.slice(1))") == second
    browser.evaluate("document.getElementById('prev').click()")
    assert browser.evaluate("document.getElementById('trajectory-id').textContent") == first
    assert_clean(browser)


@pytest.mark.parametrize("kind", ["index", "comparison", "viewer", "validation viewer", "report viewer"])
def test_pages_fit_the_window_with_unique_ids(browser, pages, kind):
    """At 1,400 px nothing sticks out of the window (wide tables scroll in their own box), no
    id is used twice (inline SVG figures included), and nothing is logged as an error."""
    load(browser, pages[kind])
    layout = browser.layout()
    assert layout["width"] > 1300  # the window the reader has
    assert layout["scroll_width"] <= layout["width"] and layout["wide"] == [], layout
    assert layout["duplicate_ids"] == []
    assert_clean(browser)
    browser.screenshot(SHOTS / f"layout_{kind.replace(' ', '_')}.png")


def test_the_overview_is_the_first_screen(browser, pages):
    load(browser, pages["index"])
    layout = browser.layout()
    assert layout["overview_bottom"] is not None and layout["overview_bottom"] <= layout["height"]
    rows = browser.evaluate("""[...document.querySelectorAll('[id=\"report:overview\"] tbody tr')].map(r => ({
        run: r.cells[0].textContent, kind: r.cells[1].textContent, finding: r.cells[3].textContent,
        trends: r.querySelectorAll('svg.trend').length,
        linked: !!document.getElementById(r.cells[0].querySelector('a').getAttribute('href').slice(1))}))""")
    by_run = {row["run"]: row for row in rows}
    assert set(by_run) == {"long", "short", "valonly", "math"}
    assert all(row["linked"] for row in rows)
    assert by_run["valonly"]["kind"] == "validation split only"
    assert by_run["math"]["kind"] == "RL run without tools" and by_run["math"]["finding"].startswith("dead groups:")
    assert by_run["math"]["trends"] == 2 and by_run["short"]["trends"] == 3
    # a link into the page lands below the sticky navigation, not under it
    browser.evaluate("location.hash = '#short/findings'")
    browser.settle()
    top = browser.evaluate("document.getElementById('short/findings').getBoundingClientRect().top")
    nav = browser.evaluate("document.querySelector('nav.top').getBoundingClientRect().bottom")
    assert top >= nav
    browser.screenshot(SHOTS / "overview.png")


def test_viewer_and_comparison_pages_link_back_to_the_report(browser, pages):
    for kind in ("report viewer", "comparison"):
        load(browser, pages[kind])
        href = browser.evaluate("document.querySelector('nav.top a').href")
        assert href.startswith("file://") and "index.html" in href
        target = Path(href[len("file://"):].split("#")[0])
        assert target.resolve() == pages["index"].resolve()


def test_the_viewer_counts_the_calls_the_shares_count_and_the_rejected_apart(browser, tmp_path):
    """A trajectory's header gives the calls its shares count (``n_calls``), then those the harness
    rejected, which no share counts."""
    import shutil

    import polars as pl

    import trajlens
    from cli_run import run_cli
    from trajlens.report.viewer import write_viewer

    run = tmp_path / "run"
    shutil.copytree(ROOT / "sample_data" / "causal-r6", run)
    (part,) = (run / "tool_calls").glob("step=000010/*.parquet")
    pl.read_parquet(part).with_columns(pl.col("format_error") | (pl.col("call_index") % 5 == 2)).write_parquet(part)
    store = tmp_path / "store"
    assert run_cli("ingest", run, "--store", store, "--run", "fe").returncode == 0
    assert run_cli("classify", store).returncode == 0
    opened = trajlens.open(store)
    measured = opened.table("trajectory_measures").filter(pl.col("step") == 10).select("trajectory_id", "n_calls").collect()
    trajectory, counted = measured.row(0)
    rejected = opened.tool_calls.filter((pl.col("trajectory_id") == trajectory) & pl.col("format_error")).collect().height
    assert rejected > 0
    load(browser, write_viewer(opened, "fe", trajectory, tmp_path / "page.html"))
    assert_clean(browser)
    assert f"{counted} calls (+{rejected} rejected)" in browser.evaluate("document.querySelector('#head .meta').textContent")
