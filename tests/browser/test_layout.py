"""Every page kind measured in headless Chromium at 1,400 x 900 px: nothing wider than the
window, no element id used twice, no console error, and the index's first screen holding the
runs. Each page's first screen is kept as a screenshot in the test's folder (and under
``$TRAJLENS_SCREENSHOTS`` when set) for a person to look at.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from cdp import Browser

pytestmark = pytest.mark.slow

WIDTH, HEIGHT = 1400, 900

# Elements whose box reaches past the window's right edge (1 px of rounding allowed), inside
# scrolling containers too: a table scrolled sideways hides its last columns all the same.
OVERFLOWING = """(() => {
  const limit = window.innerWidth + 1, found = [];
  for (const e of document.body.querySelectorAll('*')) {
    if (e.closest('svg') && e.tagName.toLowerCase() !== 'svg') continue;  // marks scale with their figure
    const box = e.getBoundingClientRect();
    if (box.width === 0 || box.height === 0) continue;
    const parent = e.parentElement.getBoundingClientRect();
    if (box.right > limit + window.scrollX && !(parent.right > limit + window.scrollX)) {  // outermost only
      const where = e.closest('[id]');
      found.push(e.tagName.toLowerCase() + (e.className && e.className.baseVal === undefined ? '.' + e.className : '')
                 + ' in #' + (where ? where.id : 'body') + ' right=' + Math.round(box.right));
    }
  }
  return {document: document.documentElement.scrollWidth, elements: found.slice(0, 10), count: found.length};
})()"""

DUPLICATE_IDS = """(() => { const seen = {};
  for (const e of document.querySelectorAll('[id]')) seen[e.id] = (seen[e.id] || 0) + 1;
  return Object.entries(seen).filter(([, n]) => n > 1).map(([id, n]) => id + ' x' + n).slice(0, 10); })()"""


@pytest.fixture
def window(browser: Browser):
    browser.call("Emulation.setDeviceMetricsOverride", width=WIDTH, height=HEIGHT, deviceScaleFactor=1, mobile=False)
    yield browser
    browser.call("Emulation.clearDeviceMetricsOverride")


def shoot(browser: Browser, tmp_path: Path, name: str) -> Path:
    shot = browser.screenshot(tmp_path / f"{name}.png")
    if os.environ.get("TRAJLENS_SCREENSHOTS"):
        target = Path(os.environ["TRAJLENS_SCREENSHOTS"])
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, target / f"layout_{name}.png")
    return shot


def open_page(browser: Browser, path: Path, fragment: str = "") -> None:
    browser.open(path)
    if fragment:
        browser.evaluate(f"location.hash = {fragment!r}")
    browser.settle()


def assert_fits(browser: Browser) -> None:
    assert browser.evaluate("window.innerWidth") == WIDTH
    measured = browser.evaluate(OVERFLOWING)
    assert measured["count"] == 0 and measured["document"] <= WIDTH, measured
    assert browser.evaluate(DUPLICATE_IDS) == []
    assert browser.console_errors() == []


@pytest.mark.parametrize("kind", ["index", "comparison", "viewer"])
def test_page_fits_the_window(window, pages, kind, tmp_path):
    open_page(window, pages[kind])
    shoot(window, tmp_path, kind)
    assert_fits(window)


def test_run_section_fits_the_window_and_shows_its_heading(window, pages, tmp_path):
    run = pages["runs"][0]
    open_page(window, pages["index"], f"#{run}")
    shoot(window, tmp_path, "run_section")
    assert_fits(window)
    top = window.evaluate(f"document.getElementById({run!r}).getBoundingClientRect().top")
    assert -1 <= top < HEIGHT / 2  # scrolled to the section


def test_index_first_screen_holds_the_runs(window, pages, tmp_path):
    open_page(window, pages["index"])
    shoot(window, tmp_path, "index_first_screen")
    runs = pages["runs"]
    overview = window.evaluate("""(() => { const o = document.getElementById('report:overview');
        return o && {top: o.getBoundingClientRect().top,
                     links: [...o.querySelectorAll('a[href^="#"]')].map(a => a.getAttribute('href').slice(1))}; })()""")
    if overview is not None:
        assert 0 <= overview["top"] < HEIGHT
        assert set(runs) <= set(overview["links"])
        return
    # Without an overview: the page's heading and the first run (a link to it in the page, or
    # its section) start within the first screen.
    first = window.evaluate(f"""(() => {{
        const heading = document.querySelector('main h1, main h2');
        const link = document.querySelector('main a[href="#{runs[0]}"]') || document.getElementById({runs[0]!r});
        return {{heading: heading.getBoundingClientRect().top, run: link.getBoundingClientRect().top}}; }})()""")
    assert 0 <= first["heading"] < HEIGHT and 0 <= first["run"] < HEIGHT, first


def test_comparison_page_links_back_to_the_report(window, pages):
    open_page(window, pages["comparison"])
    target = window.evaluate("document.querySelector('nav a').href")
    assert Path(target.removeprefix("file://")).resolve() == pages["index"].resolve()
    header = window.evaluate("[...document.querySelectorAll('thead th')].map(t => t.textContent)")
    assert "p adjusted" in header and "effect" in header
    assert "Benjamini-Hochberg" in window.evaluate("document.body.textContent")
