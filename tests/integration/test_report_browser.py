"""The HTML report in headless Chromium: tables, plots, highlighted quotes, no console errors.

Drives Debian's ``chromium`` (``/usr/bin/chromium``; ``.ci/run`` installs it) with Playwright's
Python package, never a downloaded browser. Skips with the reason when either is missing.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest
from faithjudge.cli.main import app
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "demo.jsonl"
DEMO_JUDGE = ROOT / "examples" / "demo_judge.jsonl"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

pytestmark = [
    pytest.mark.skipif(
        not (CHROMIUM.exists() or shutil.which("chromium")),
        reason="Debian's chromium is not installed (apt-get install -y chromium; .ci/run does)",
    ),
    pytest.mark.skipif(
        importlib.util.find_spec("playwright") is None,
        reason="the playwright Python package is not installed (pip install -e '.[dev]')",
    ),
]


@pytest.fixture
def report_page(tmp_path: Path) -> Path:
    runner = CliRunner()
    results = tmp_path / "results.jsonl"
    scored = runner.invoke(
        app,
        [
            "score",
            str(DEMO),
            "-o",
            str(results),
            "--evaluator",
            f"replay:{DEMO_JUDGE}",
            "--data-dir",
            str(tmp_path / "data"),
            "--no-progress",
        ],
    )
    assert scored.exit_code == 0, scored.output
    html = tmp_path / "report.html"
    made = runner.invoke(
        app,
        [
            "report",
            str(results),
            "--html",
            str(html),
            "--requests",
            str(DEMO),
            "--compare",
            str(results),
            "--bootstrap",
            "200",
        ],
    )
    assert made.exit_code == 0, made.output
    return html


def test_report_renders_in_headless_chromium(report_page: Path, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    executable = str(CHROMIUM) if CHROMIUM.exists() else str(shutil.which("chromium"))
    problems: list[str] = []
    requests: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 900})
            page.on(
                "console",
                lambda msg: problems.append(msg.text) if msg.type == "error" else None,
            )
            page.on("pageerror", lambda exc: problems.append(str(exc)))
            page.on("request", lambda req: requests.append(req.url))
            page.goto(report_page.as_uri(), wait_until="load")
            shot = tmp_path / "report.png"
            page.screenshot(path=str(shot), full_page=True)
            assert shot.stat().st_size > 10_000
            assert page.title() == "FaithJudge report"
            assert page.locator("table").count() >= 5
            assert page.locator("h2", has_text="Table 1").count() == 1
            assert page.locator("h2", has_text="Coverage diagnostics").count() == 1
            assert page.locator("svg.plot").count() >= 2
            assert page.locator("svg.bars rect").count() >= 3
            assert page.locator("svg.heatmap rect").count() >= 6
            marks = page.locator(".cot mark")
            assert marks.count() >= 3
            assert marks.first.is_visible()
            assert "costophrenic angle is blunted" in page.locator(".cot").first.inner_text()
            assert page.locator("script").count() == 0
        finally:
            browser.close()
    assert problems == []
    # a self-contained page loads nothing but itself
    assert all(url.startswith("file://") for url in requests), requests
