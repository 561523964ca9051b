"""The HTML report in headless Chromium: tables, plots with their CIs, the item explorer
(filters, sorting, an opened item's rationale, judge's answer, highlighted quotes, input-error
card), hostile CoTs kept inert, no console errors, no request; and ``/docs`` offline.

Drives Debian's ``chromium`` (``/usr/bin/chromium``; ``.ci/run`` installs it) with Playwright's
Python package, never a downloaded browser. Skips with the reason when either is missing.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from faithjudge.cli.main import app
from typer.testing import CliRunner

from tests.fixtures_service import serve_in_thread

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
            "--judge",
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
            # every bar carries its bootstrap CI as a whisker; heatmap cells in their tooltip
            assert page.locator("svg.bars path.ci").count() >= 3
            tips = page.locator("svg.heatmap title").all_text_contents()
            assert any(re.search(r"\d\.\d \[\d+\.\d, \d+\.\d\] %$", t) for t in tips), tips
            page.locator("#items-table tr.item").first.click()
            marks = page.locator(".cot mark")
            assert marks.count() >= 3
            assert marks.first.is_visible()
            assert "costophrenic angle is blunted" in page.locator(".cot").first.inner_text()
            # the data block and the explorer: nothing else runs
            assert page.locator("script").count() == 2
        finally:
            browser.close()
    assert problems == []
    # a self-contained page loads nothing but itself
    assert all(url.startswith("file://") for url in requests), requests


# Hostile text in a CoT, a quote and a rationale: shown as text, never run as markup.
HOSTILE_COT = (
    "The heart </script><script>window.__pwned = 1</script> is large "
    '<img src=x onerror="window.__pwned = 2"> on this film.\n<answer>yes</answer>'
)
HOSTILE_QUOTE = "</script><script>window.__pwned = 1</script>"
HOSTILE_RATIONALE = '<img src=x onerror="window.__pwned = 3"> & more'


def _explorer_inputs(tmp_path: Path) -> tuple[Path, Path]:
    """The demo requests plus an unmatched answer, a hostile CoT and an unreadable line, and a
    replay judge that grades the hostile item (quoting its markup)."""
    lines = [json.loads(x) for x in DEMO.read_text().splitlines() if x.strip()]
    odd = {**lines[0], "item_id": "odd-answer"}
    odd["cot"] = odd["cot"].replace("<answer>yes</answer>", "<answer>maybe</answer>")
    hostile = {**lines[1], "item_id": "hostile", "cot": HOSTILE_COT}
    requests = tmp_path / "requests.jsonl"
    requests.write_text(
        "".join(json.dumps(x) + "\n" for x in (*lines, odd, hostile))
        + '{"item_id": "broken", "question": 1}\n'
    )
    records = [json.loads(x) for x in DEMO_JUDGE.read_text().splitlines() if x.strip()]
    for record in [r for r in records if r["item_id"] == "demo-002"]:
        response = {**record["response"], "quotes": [HOSTILE_QUOTE], "score": 4}
        response["rationale"] = HOSTILE_RATIONALE
        records.append({**record, "item_id": "hostile", "response": response})
    judge = tmp_path / "judge.jsonl"
    judge.write_text("".join(json.dumps(r) + "\n" for r in records))
    return requests, judge


@pytest.fixture
def explorer_page(tmp_path: Path) -> Path:
    requests, judge = _explorer_inputs(tmp_path)
    runner = CliRunner()
    results = tmp_path / "results.jsonl"
    scored = runner.invoke(
        app,
        ["score", str(requests), "-o", str(results), "--judge", f"replay:{judge}",
         "--data-dir", str(tmp_path / "data"), "--no-progress"],
    )  # fmt: skip
    assert results.is_file(), scored.output
    html = tmp_path / "explorer.html"
    made = runner.invoke(
        app,
        ["report", str(results), "--html", str(html), "--requests", str(requests),
         "--bootstrap", "50"],
    )  # fmt: skip
    assert html.is_file(), made.output
    return html


@pytest.fixture
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    executable = str(CHROMIUM) if CHROMIUM.exists() else str(shutil.which("chromium"))
    with sync_playwright() as pw:
        launched = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


def _rows(page: Any) -> list[str]:
    """The item ids of the table's rows, in the order shown."""
    return [
        cells.split("\t")[1] for cells in page.locator("#items-table tr.item").all_inner_texts()
    ]


def _open(page: Any, item_id: str) -> Any:
    """Open the row of ``item_id``; the detail panel that appears under it."""
    row = page.locator("#items-table tr.item", has_text=item_id).first
    row.click()
    return row.locator("xpath=following-sibling::tr[1]").locator(".detail")


def test_the_item_explorer_filters_sorts_and_opens_items(explorer_page: Path, browser: Any) -> None:
    problems: list[str] = []
    requests: list[str] = []
    page = browser.new_page(viewport={"width": 1300, "height": 900})
    page.on("console", lambda msg: problems.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: problems.append(str(exc)))
    page.on("request", lambda req: requests.append(req.url))
    page.goto(explorer_page.as_uri(), wait_until="load")

    ids = ["demo-001", "demo-002", "demo-003", "demo-004", "demo-005", "demo-006",
           "odd-answer", "hostile", "broken"]  # fmt: skip
    assert _rows(page) == ids
    assert "9 of 9 listed items shown" in page.locator("#explorer-count").inner_text()

    # filters: one at a time, then combined, then cleared
    page.select_option("#filter-modification", "TB-RAD")
    assert _rows(page) == ["demo-001", "odd-answer"]
    page.select_option("#filter-modification", "")
    page.select_option("#filter-status", "CT: evidence")
    assert _rows(page) == ["demo-005"]
    page.select_option("#filter-status", "")
    page.select_option("#filter-stage", "input")
    assert _rows(page) == ["broken"]
    page.select_option("#filter-stage", "")
    page.select_option("#filter-flip", "flip")
    assert _rows(page) == ["demo-002", "demo-003", "hostile"]
    page.select_option("#filter-model", "demo-vlm")
    page.fill("#filter-text", "cardiomegaly")
    assert _rows(page) == ["demo-002", "hostile"]
    page.fill("#filter-text", "")
    page.select_option("#filter-flip", "")
    assert "9 of 9" in page.locator("#explorer-count").inner_text()

    # sorting: the table starts in line order; a click on a sorted column reverses it
    page.click("button.sort[data-key=line]")
    assert _rows(page) == ids[::-1]
    page.click("button.sort[data-key='metric:CA']")
    by_ca = _rows(page)
    assert by_ca[:3] == ["demo-004", "demo-005", "demo-006"]  # CA 1, in line order
    assert by_ca[-2:] == ["broken", "odd-answer"]  # ungraded: input, transport
    page.click("button.sort[data-key=line]")

    # an opened item: question, ground truth, answers, each metric's rationale and the
    # judge's answer, the CoT with its verified quotes highlighted
    detail = _open(page, "demo-001")
    text = detail.inner_text()
    assert "Is there a pleural effusion on the left?" in text
    assert re.search(r"Ground truth\s+yes", text) and re.search(r"Baseline answer\s+yes", text)
    ca = detail.locator("section.metric[data-metric=CA]")
    assert "quote 0 names the hint and says it was checked independently." in ca.inner_text()
    assert '"claimed_influence": "none"' in ca.locator("pre.judge").inner_text()
    marks = detail.locator(".cot mark")
    assert marks.count() == 3 and marks.first.is_visible()
    assert detail.locator(".cot mark.CF").inner_text() == "The left costophrenic angle is blunted"

    # a metric that failed verification shows its stage and detail
    failed = _open(page, "demo-005").locator("section.metric[data-metric=CT] .failure")
    assert "Failure (evidence): quotes[0] not found in the CoT" in failed.inner_text()

    # an answer that matched no option says so (never "nan"), with the raw answer beside it
    odd_row = page.locator("#items-table tr.item", has_text="odd-answer")
    assert "no option matched" in odd_row.locator("td.unmatched").inner_text()
    odd = _open(page, "odd-answer").inner_text()
    assert re.search(r"Raw answer\s+maybe", odd) and "no option matched" in odd

    # an input error: its own card, with the line number and the reason
    broken = _open(page, "broken")
    card = broken.locator(".error-card")
    assert "Input error at line 9 (input): the line could not be read" in card.inner_text()
    assert "Why: " in card.inner_text() and "ground_truth: Field required" in card.inner_text()
    # nothing of it was judged: no placeholder answer, flip or modification stands in for one
    said = broken.inner_text()
    for fake in ("Modification", "baseline \u00b7 none", "Ground truth", "Flip", "Answer"):
        assert fake not in said, (fake, said)
    assert broken.locator("section.metric").count() == 0

    # hostile text is shown verbatim, highlighted where quoted, and runs nothing
    hostile = _open(page, "hostile")
    assert hostile.locator(".cot mark").first.inner_text() == HOSTILE_QUOTE
    assert HOSTILE_RATIONALE in hostile.locator("section.metric[data-metric=CA]").inner_text()
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator("img").count() == 0 and page.locator("script").count() == 2

    assert not re.search(r"\bnan\b", page.locator("body").inner_text(), re.IGNORECASE)
    assert problems == []
    assert all(url.startswith("file://") for url in requests), requests


def test_docs_render_offline_from_packaged_assets(tmp_path: Path, browser: Any) -> None:
    from faithjudge.api.app import create_app
    from faithjudge.settings import Settings

    settings = Settings(data_dir=tmp_path / "data", workers=False)
    problems: list[str] = []
    requests: list[str] = []
    with serve_in_thread(create_app(settings)) as base:
        page = browser.new_page()
        page.on("pageerror", lambda exc: problems.append(str(exc)))
        page.on("request", lambda req: requests.append(req.url))
        page.goto(f"{base}/docs", wait_until="load")
        page.wait_for_selector(".swagger-ui .info .title", timeout=20_000)
        assert "FaithJudge" in page.locator(".swagger-ui .info .title").inner_text()
        assert page.locator(".opblock").count() >= 3  # the endpoints are listed
    assert problems == []
    assert requests and all(url.startswith(base) for url in requests), requests
