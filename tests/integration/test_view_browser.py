"""``faithjudge view DIR`` in headless Chromium: the folder's runs listed (and a broken file with
its reason), a word found that only a CoT holds, a filtered view and an opened item reached from
their URL, 2,000 items drawn to the last one, and two runs compared item by item; nothing is
requested from anywhere but the viewer itself.

Reuses the browser of ``test_report_browser`` (Debian's chromium through Playwright's Python
package) and skips, as it does, with the reason when either is missing.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from faithjudge.cli.main import app
from faithjudge.cli.view import make_server
from typer.testing import CliRunner

from tests.integration.test_report_browser import (
    DEMO,
    DEMO_JUDGE,
    _rows,
    browser,  # noqa: F401 - the fixture, shared
    pytestmark,  # noqa: F401 - the same reasons to skip
)

BIG = 2_000
# in a CoT of the demo requests, and in no result line: only the CoT search can find it
COT_ONLY_WORD = "Kerley"


def _score(requests: Path, judge: Path, output: Path, data: Path) -> None:
    scored = CliRunner().invoke(
        app,
        ["score", str(requests), "-o", str(output), "--judge", f"replay:{judge}",
         "--data-dir", str(data), "--no-progress"],
    )  # fmt: skip
    assert output.is_file(), scored.output


def _candidate_judge(tmp: Path) -> Path:
    """The demo judge with one grade lowered (demo-001 CF 5 -> 2) and one answer whose quote is
    in no CoT (demo-002 CA: an evidence failure)."""
    records = [json.loads(x) for x in DEMO_JUDGE.read_text().splitlines() if x.strip()]
    for record in records:
        key = (record["item_id"], record["metric"])
        if key == ("demo-001", "clinical_fidelity"):
            record["response"] = {**record["response"], "score": 2}
        if key == ("demo-002", "causal_attribution"):
            record["response"] = {**record["response"], "quotes": ["a sentence no CoT holds"]}
    judge = tmp / "candidate_judge.jsonl"
    judge.write_text("".join(json.dumps(r) + "\n" for r in records))
    return judge


def _big_run(source: Path, output: Path) -> None:
    """``BIG`` result lines: the demo's, over and over, each its own item and line; the last
    one records cached prompt tokens."""
    lines = [json.loads(x) for x in source.read_text().splitlines() if x.strip()]
    out = []
    for n in range(1, BIG + 1):
        line = {**lines[(n - 1) % len(lines)], "line": n, "item_id": f"big-{n:04d}"}
        if n == BIG:
            tokens = {"prompt": 4321, "completion": 210, "cached": 4096}
            line["provenance"] = {**line["provenance"], "tokens": tokens}
        out.append(json.dumps(line) + "\n")
    output.write_text("".join(out))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("view")
    folder = tmp / "runs"
    folder.mkdir()
    requests = folder / "requests.jsonl"
    requests.write_bytes(DEMO.read_bytes())
    _score(requests, DEMO_JUDGE, folder / "a.jsonl", tmp / "data")
    _score(requests, _candidate_judge(tmp), folder / "b.jsonl", tmp / "data")
    _big_run(folder / "a.jsonl", folder / "big.jsonl")
    (folder / "notes.txt").write_text("not a run\n")
    (folder / "broken.jsonl").write_text('{"item_id": "x", "metrics": [], "provenance": 1}\n')
    assert COT_ONLY_WORD in DEMO.read_text()
    assert COT_ONLY_WORD.lower() not in (folder / "a.jsonl").read_text().lower()
    return folder


@pytest.fixture(scope="module")
def base(runs: Path) -> Iterator[str]:
    server = make_server(runs, [], port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def page(browser: Any, base: str) -> Iterator[Any]:  # noqa: F811 - the shared fixture
    """A page that records its errors and every URL it requests, checked on the way out."""
    tab = browser.new_page(viewport={"width": 1300, "height": 900})
    problems: list[str] = []
    requested: list[str] = []
    tab.on("console", lambda msg: problems.append(msg.text) if msg.type == "error" else None)
    tab.on("pageerror", lambda exc: problems.append(str(exc)))
    tab.on("request", lambda req: requested.append(req.url))
    yield tab
    tab.close()
    assert problems == []
    assert requested and all(url.startswith(base) for url in requested), requested


def _fragment(tab: Any) -> dict[str, list[str]]:
    return parse_qs(urlsplit(tab.url).fragment)


def test_view_lists_every_results_file_of_the_folder(page: Any, base: str) -> None:
    page.goto(f"{base}/", wait_until="load")
    names = page.locator("#runs a.run").all_inner_texts()
    assert names == ["a.jsonl", "b.jsonl", "big.jsonl"]  # not the requests, not the notes
    row = page.locator("#runs tbody tr", has_text="a.jsonl").first.inner_text()
    assert "replay:demo_judge.jsonl" in row and "\t6\t" in row
    assert "requests.jsonl" in row  # where its CoTs come from
    big = page.locator("#runs tbody tr", has_text="big.jsonl").first.inner_text()
    assert f"\t{BIG}\t" in big
    unreadable = page.locator("#unreadable").inner_text()
    assert "broken.jsonl" in unreadable and "line 1 is not a result line: metrics" in unreadable
    assert "notes.txt" not in page.locator("body").inner_text()


def test_search_reaches_the_cot_and_every_view_has_its_url(page: Any, base: str) -> None:
    page.goto(f"{base}/run?file=a.jsonl", wait_until="load")
    assert len(_rows(page)) == 6
    page.fill("#filter-text", COT_ONLY_WORD)
    assert _rows(page) == ["demo-004"]
    assert _fragment(page) == {"q": [COT_ONLY_WORD]}
    # and the judge's words: a rationale, a failure's detail
    page.fill("#filter-text", "cue handling")
    assert _rows(page) == ["demo-002", "demo-003"]
    page.fill("#filter-text", "not found in the CoT")
    assert _rows(page) == ["demo-005"]

    # a filtered view, from its URL alone
    page.goto(f"{base}/run?file=a.jsonl#flip=flip&model=demo-vlm", wait_until="load")
    assert _rows(page) == ["demo-002", "demo-003"]
    assert page.locator("#filter-flip").input_value() == "flip"

    # filters, order and the opened item all reach the URL, and come back from it
    page.select_option("#filter-flip", "")
    page.click("button.sort[data-key='metric:CA']")
    page.locator("#items-table tr.item", has_text="demo-005").click()
    wanted = {"model": ["demo-vlm"], "sort": ["metric:CA"], "dir": ["asc"], "open": ["5"]}
    assert _fragment(page) == wanted
    shown = _rows(page)
    page.goto("about:blank")
    page.goto(f"{base}/run?file=a.jsonl#" + "&".join(f"{k}={v[0]}" for k, v in wanted.items()))
    assert _rows(page) == shown
    detail = page.locator("#items-table tr.item-detail .detail")
    assert detail.count() == 1
    text = detail.inner_text()
    assert "Failure (evidence): quotes[0] not found in the CoT" in text
    assert re.search(r"Judge cost\s+\d[\d,]* prompt tokens", text)
    assert re.search(r"\d+ attempt\(s\)", text)


def test_two_thousand_items_are_drawn_to_the_last(page: Any, base: str) -> None:
    page.goto(f"{base}/run?file=big.jsonl", wait_until="load")
    assert f"{BIG} of {BIG} listed items shown" in page.locator("#explorer-count").inner_text()
    drawn = len(_rows(page))
    assert 0 < drawn < BIG  # drawn as they come into view, not all at once
    for _ in range(BIG):
        if drawn == BIG:
            break
        page.locator("#items-table tr.more").scroll_into_view_if_needed()
        page.locator("#items-table tr.item").nth(drawn).wait_for(state="attached")
        drawn = len(_rows(page))
    rows = _rows(page)
    assert len(rows) == BIG and rows[-1] == f"big-{BIG:04d}"
    assert page.locator("#items-table tr.more").is_hidden()
    # the search, over all of them: no cap
    page.fill("#filter-text", "big-19")
    assert len(_rows(page)) == 100

    # the last item, opened from its URL: drawn and scrolled to without any scrolling
    page.goto("about:blank")
    page.goto(f"{base}/run?file=big.jsonl#open={BIG}", wait_until="load")
    last = page.locator("#items-table tr.item", has_text=f"big-{BIG:04d}")
    assert last.get_attribute("aria-expanded") == "true" and last.is_visible()
    cost = page.locator("#items-table tr.item-detail .detail").inner_text()
    assert "4,321 prompt tokens (4,096 cached by the provider), 210 completion tokens" in cost


def test_two_runs_compare_item_by_item(page: Any, base: str) -> None:
    page.goto(f"{base}/", wait_until="load")
    page.check("input[name=base][value='a.jsonl']")
    page.check("input[name=cand][value='b.jsonl']")
    page.click("#pick button[type=submit]")
    page.wait_for_selector("#changed")
    assert urlsplit(page.url).path == "/compare"
    assert parse_qs(urlsplit(page.url).query) == {"base": ["a.jsonl"], "cand": ["b.jsonl"]}
    assert "6 items in both runs" in page.locator("#pairs").inner_text()

    changed = {
        row.split("\t")[0]: row for row in page.locator("#changed tbody tr").all_inner_texts()
    }
    assert set(changed) == {"demo-001", "demo-002"}
    assert "grade" in changed["demo-001"] and "CF 5 → 2" in changed["demo-001"]
    assert "new failure" in changed["demo-002"] and "CA 5 → evidence" in changed["demo-002"]
    per_metric = {
        row.split("\t")[0]: row.split("\t")
        for row in page.locator("#per-metric tbody tr").all_inner_texts()
    }
    assert per_metric["CF"][6] == "1"  # one grade down
    assert per_metric["CA"][7] == "1"  # one new failure
    assert per_metric["CF"][4] == "-15.0"  # (2 - 5) / 4 over 5 pairs, in % points

    # one kind of change, by its link (and so by its URL)
    page.click("#changes a:has-text('new failure')")
    page.wait_for_url(re.compile(r"change=new\+failure"))
    assert page.locator("#changed tbody tr").all_inner_texts()[0].startswith("demo-002")
    assert page.locator("#changed tbody tr").count() == 1

    # the candidate's line of a changed item opens that item in its run
    page.click("#changed a:has-text('candidate line 2')")
    page.wait_for_selector("#items-table tr.item-detail")
    opened = page.locator("#items-table tr.item[aria-expanded=true]")
    assert opened.count() == 1 and "demo-002" in opened.inner_text()
