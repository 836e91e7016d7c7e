"""The dashboard driven in Debian's headless chromium through Playwright: `python -m pytest -m browser`.

Needs `apt-get install chromium` (/usr/bin/chromium) and the Python playwright package; never a browser
that Playwright downloads. DASHBOARD_SCREENSHOT=docs/dashboard.png saves the screenshot of the run page (with a diff open) there.
"""

import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from dashboard_data import make_run, record, serving

from autoresearch_mcp.server.dashboard import dashboard_app
from autoresearch_mcp.server.store import Store

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = pytest.mark.browser

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WAIT_MS = 10_000


@pytest.fixture(scope="module")
def browser() -> Iterator["Browser"]:
    """One chromium for the file (a launch costs seconds of CPU); each test gets a context of its own."""
    if not CHROMIUM.is_file():
        pytest.fail("Debian's chromium is missing: apt-get install -y chromium")
    # Imported here: the default test run collects this file without needing playwright.
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser: "Browser") -> Iterator["Page"]:
    # A fresh context: no cookie, storage or cache of an earlier test's, as a fresh profile would be.
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    yield page
    context.close()


@pytest.fixture
def run(tmp_path: Path) -> tuple[Store, Path, str]:
    return make_run(tmp_path)


def test_the_run_list_renders_and_clicking_a_run_shows_its_chart_and_experiments(page, run):
    store, transcripts, run_id = run
    with serving(dashboard_app(store, None, transcripts=transcripts)) as url:
        page.goto(url)
        row = page.locator(f'#run-table tr[data-run="{run_id}"]')
        row.wait_for()
        assert "hpo-covertype" in row.inner_text()
        assert "20 / 30" in row.inner_text()
        page.click(f'#run-table a[data-run="{run_id}"]')
        page.locator("#metric-chart svg").wait_for()
        assert page.locator("#experiments tr.exp").count() == 20
        assert page.locator("#tokens-chart svg").is_visible()
        assert page.locator(f'#run-table tr.selected[data-run="{run_id}"]').count() == 1
        # The page's one clock reading is in UTC, as every time the CLI and the report show.
        page.wait_for_function("document.getElementById('live').textContent.startsWith('updated')")
        assert page.locator("#live").inner_text().endswith(" UTC")


def test_a_new_experiment_appears_without_a_reload(page, run):
    store, transcripts, run_id = run
    with serving(dashboard_app(store, None, transcripts=transcripts)) as url:
        page.goto(f"{url}#run={run_id}")
        page.locator("#experiments tr.exp").nth(19).wait_for()
        page.evaluate("window.stillTheSamePage = true")
        record(store, run_id, 21, random.Random(3), 3)
        page.locator('#experiments tr.exp[data-iteration="21"]').wait_for()
        page.wait_for_function("document.querySelector('#run-table').innerText.includes('21 / 30')")
        assert page.evaluate("window.stillTheSamePage") is True


def test_two_versions_of_train_py_show_their_diff(page, run, tmp_path):
    store, transcripts, run_id = run
    with serving(dashboard_app(store, None, transcripts=transcripts)) as url:
        page.goto(f"{url}#run={run_id}")
        page.locator("#diff-form").wait_for()
        page.select_option("#diff-form select[name=a]", "1")
        page.select_option("#diff-form select[name=b]", "3")
        page.click("#diff-form button")
        added = page.locator("#diff pre.diff span.add")
        added.first.wait_for()
        assert "sample_weight=weights" in " ".join(added.all_inner_texts())
        shot = Path(os.environ.get("DASHBOARD_SCREENSHOT") or tmp_path / "dashboard.png")
        shot.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 10_000


def test_with_a_token_the_page_asks_once_and_the_cookie_keeps_it(page, run):
    store, transcripts, run_id = run
    with serving(dashboard_app(store, "hunter2", transcripts=transcripts)) as url:
        page.goto(url)
        page.fill("input[name=token]", "wrong")
        page.click("button[type=submit]")
        page.locator(".error").wait_for()
        page.fill("input[name=token]", "hunter2")
        page.click("button[type=submit]")
        page.locator(f'#run-table tr[data-run="{run_id}"]').wait_for()
        [cookie] = page.context.cookies()
        assert (cookie["httpOnly"], cookie["sameSite"]) == (True, "Strict")
        assert page.evaluate("document.cookie") == ""  # out of reach of scripts
        page.reload()
        page.locator(f'#run-table tr[data-run="{run_id}"]').wait_for()
        assert page.locator("input[name=token]").count() == 0


def report_page(page, run, tmp_path) -> None:
    """The run's static report, written as `autoresearch-mcp report` writes it, opened from disk."""
    from autoresearch_mcp.server.dashboard import render_report

    store, transcripts, run_id = run
    out = tmp_path / "report.html"
    out.write_text(render_report(store, run_id, transcripts), encoding="utf-8")
    page.goto(out.as_uri())


def test_the_report_shows_each_diff_whole(page, run, tmp_path):
    report_page(page, run, tmp_path)
    diff = page.locator("details.diff-box[open] pre.diff")
    diff.wait_for()
    longest = max(page.locator("details.diff-box[open] pre.diff span").all_inner_texts(), key=len)
    assert len(longest) > 60  # wider than the rule that used to clip it
    assert (
        page.evaluate("getComputedStyle(document.querySelector('details.diff-box pre.diff')).maxWidth")
        == "none"
    )
    box = diff.bounding_box()
    assert box is not None and box["width"] > 1000  # the page's width, not 60 characters
    clipped = (
        "(e => e.scrollWidth > e.clientWidth)(document.querySelector('details.diff-box[open] pre.diff'))"
    )
    assert page.evaluate(clipped) is False


def test_the_experiments_table_highlights_what_changed_from_the_best(page, run, tmp_path):
    store, _, run_id = run
    best = store.get_run(run_id).best
    assert best is not None
    report_page(page, run, tmp_path)
    best_row = page.locator(f'#experiments tr.best[data-iteration="{best.iteration}"]')
    assert all(f"{key}=" in best_row.locator("td.best-params").inner_text() for key in best.params)
    other = page.locator('#experiments tr.exp:not(.best)[data-iteration="1"] td.params').first
    changed = other.locator(".changed").all_inner_texts()
    first = store.experiments(run_id)[0][0].params
    assert changed and {text.split("=")[0] for text in changed} == {
        k for k in first if first[k] != best.params[k]
    }
    color = page.evaluate("getComputedStyle(document.querySelector('#experiments .changed')).backgroundColor")
    assert color not in ("rgba(0, 0, 0, 0)", "transparent")  # highlighted
