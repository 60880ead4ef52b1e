"""The status page in a real browser (Debian's Chromium, driven by playwright): the overview shows which jobs need a
person, a click leads to a job's charts, datasets and quarantined commit, another to a run's tasks and bad records,
and a line appended to the job's event log shows on its page without a reload. A screenshot of each page is kept
under tests/output/status-page/ (ignored by git; docs/images/status-*.png are copies of them, for docs/operating.md)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from operating.conftest import STREAM, UNREAD, Served

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SHOTS = Path(__file__).resolve().parents[1] / "output" / "status-page"

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is missing (apt-get install chromium)")


def test_an_operator_finds_what_needs_a_person_and_follows_it_down_to_a_run(served: Served, jobs_dir: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1366, "height": 900})
            page.goto(served.url + "/")
            rows = page.locator("#jobs tbody tr")
            assert rows.count() == 5
            ok, stuck = page.locator('tr[data-job="ok"]'), page.locator('tr[data-job="stuck"]')
            assert "✔ ok" in ok.inner_text() and "succeeded" in ok.inner_text() and "0 0/15 * * * ?" in ok.inner_text()
            assert "✖ needs a person" in stuck.inner_text() and "1 quarantined" in stuck.inner_text()
            assert "failing: 1 run(s) in a row" in page.locator('tr[data-job="broken"]').inner_text()
            assert "⚠ 2 pending" in page.locator('tr[data-job="waiting"]').inner_text()
            assert "3 of 5 need a person" in page.inner_text("main")
            stream = page.locator('tr[data-job="stream"]').inner_text()
            assert "✔ ok" in stream and f"{STREAM.topic}: {sum(STREAM.waiting.values())} records" in stream
            assert f"orders: 1 file, {UNREAD.size:,} bytes" in ok.inner_text()  # ok's lag: a file no run has read
            page.screenshot(path=str(SHOTS / "overview.png"), full_page=True)

            stuck.get_by_role("link", name="stuck").click()
            page.wait_for_url("**/jobs/stuck")
            assert page.locator("svg.chart").count() == 4
            assert page.locator("svg.chart g.bar.failed").count() >= 3  # the three failed commit attempts' runs
            pending = page.locator('section.pending[data-dataset="clicks"]')
            assert "✖ quarantined" in pending.inner_text() and "3 failed attempt(s)" in pending.inner_text()
            assert "lost" in pending.locator("table.steps").inner_text()
            assert "quarantined commits: clicks" in page.inner_text("#reasons")
            page.wait_for_function("document.querySelectorAll('#events li').length > 0")  # the event log's tail
            log = jobs_dir / "stuck" / "work" / "events" / "stuck.jsonl"
            with open(log, "ab") as f:  # a running job's next event, as the run appends it
                f.write(json.dumps({"name": "TaskFinished", "namespace": "gobblin_py.runtime", "timestamp": int(time.time() * 1000),
                                    "metadata": {"job": "stuck", "run_id": "r", "dataset": "orders", "status": "live-marker"}}).encode() + b"\n")
            page.wait_for_function("document.getElementById('events').innerText.includes('status=live-marker')", timeout=10000)
            page.screenshot(path=str(SHOTS / "job.png"), full_page=True)

            page.goto(served.url + "/jobs/ok")
            assert "✔ ok" in page.inner_text("h1")
            assert f"1 file, {UNREAD.size:,} bytes" in page.inner_text("main")  # the datasets table's lag column
            page.locator("#runs a").last.click()  # the first run, which had bad records
            page.wait_for_url("**/jobs/ok/runs/**")
            assert "succeeded" in page.inner_text("h1")
            assert {"recovery", "planning", "tasks", "commit"} <= set(page.locator("#phases td:first-child").all_inner_texts())
            assert page.locator("#tasks tbody tr").count() == 4  # the example's ten files, JSON lines packed: 4 tasks
            bad = page.locator("section.error-file")
            assert bad.count() == 3 and "by extractor" in page.inner_text("main") and '"reason"' in bad.first.locator("pre").inner_text()
            page.screenshot(path=str(SHOTS / "run.png"), full_page=True)
        finally:
            browser.close()
