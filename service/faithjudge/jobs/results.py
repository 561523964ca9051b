"""Reading results back: NDJSON in line order, and the report of the lines done so far.

Every line of the upload has a result: an accepted line its scored result, a rejected line the
error result ``faithjudge score`` writes for it (``rejection_result``), at its line number. So a
batch's results and a ``score`` run over the same file are interchangeable, and a client that
lost the 202 answer loses nothing.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Literal

import anyio
import anyio.from_thread
import orjson
from faithjudge_client.bodies import LineRejection
from faithjudge_client.lines import ItemResult

from faithjudge.jobs.interface import DONE, JobStore
from faithjudge.request_lines import input_error_result

__all__ = ["rejection_result", "render_report", "result_lines"]

_PAGE = 500


def rejection_result(rejection: LineRejection) -> bytes:
    """The result line of a rejected line, as ``faithjudge score`` writes it (newline ended)."""
    readable = {"item_id": rejection.item_id, "model": rejection.model,
                "question": rejection.question}  # fmt: skip
    result = input_error_result(
        rejection.line, f"line {rejection.line}: {rejection.reason}", readable=readable
    )
    return orjson.dumps(result.model_dump(mode="json"), option=orjson.OPT_APPEND_NEWLINE)


async def _resume_point(
    store: JobStore, batch_id: str, start: int, total: int, rejected_lines: list[int]
) -> tuple[int, int]:
    """Where stream position ``start`` falls: (first accepted seq, first rejection index).

    Position of accepted line ``s`` = s + rejections before its line; that grows with ``s``, so
    the first ``s`` at or after ``start`` is found by bisection (a lookup per step), and the
    rejections between ``start`` and it are the last ones before that line.
    """
    if not rejected_lines:
        return start, 0

    async def position(seq: int) -> tuple[int, int]:
        before = bisect.bisect_left(rejected_lines, await store.line_number(batch_id, seq))
        return seq + before, before

    low, high = 0, total
    while low < high:
        middle = (low + high) // 2
        if (await position(middle))[0] >= start:
            high = middle
        else:
            low = middle + 1
    if low < total:
        at, before = await position(low)
    else:
        at, before = total + len(rejected_lines), len(rejected_lines)
    return low, before - (at - start)


async def result_lines(
    store: JobStore,
    batch_id: str,
    *,
    start: int,
    contiguous: bool,
    total: int = 0,
    rejections: Sequence[LineRejection] = (),
) -> AsyncIterator[bytes]:
    """Result lines from stream position ``start`` in input order, each ending in a newline.

    ``rejections`` (in line order) are merged in at their line numbers; ``total`` is the count
    of accepted lines. ``contiguous`` (a running batch) stops at the first line not done yet, so
    a client that resumes at the count it has received never misses a line; otherwise lines
    without a result (a cancelled batch) are skipped. Each page is read in its own short
    transaction, so a slow client holds no connection.
    """
    rejected_lines = [r.line for r in rejections]
    seq, next_rejection = await _resume_point(store, batch_id, start, total, rejected_lines)
    while True:
        page = await store.results_page(batch_id, start=seq, limit=_PAGE, with_line=True)
        for _seq, state, result, line in page:
            while next_rejection < len(rejections) and rejected_lines[next_rejection] < line:
                yield rejection_result(rejections[next_rejection])
                next_rejection += 1
            if state != DONE or result is None:
                if contiguous:
                    return
                continue
            yield result.encode() + b"\n"
        if len(page) < _PAGE:
            break
        seq = page[-1][0] + 1
    for rejection in rejections[next_rejection:]:
        yield rejection_result(rejection)


async def _page(
    store: JobStore, batch_id: str, start: int
) -> list[tuple[int, int, str | None, int]]:
    return await store.results_page(batch_id, start=start, limit=_PAGE, with_line=True)


def _results_in_thread(
    store: JobStore, batch_id: str, rejections: Sequence[LineRejection]
) -> Iterator[ItemResult]:
    """Every result so far, rejected lines included, read page by page from a worker thread."""
    position = 0
    pending = list(rejections)
    while True:
        page = anyio.from_thread.run(_page, store, batch_id, position)
        for _seq, state, result, line in page:
            while pending and pending[0].line < line:
                yield ItemResult.model_validate_json(rejection_result(pending.pop(0)))
            if state == DONE and result is not None:
                yield ItemResult.model_validate_json(result)
        if len(page) < _PAGE:
            break
        position = page[-1][0] + 1
    for rejection in pending:
        yield ItemResult.model_validate_json(rejection_result(rejection))


async def render_report(
    store: JobStore,
    batch_id: str,
    *,
    fmt: Literal["json", "md", "html"],
    bootstrap: int,
    seed: int,
    rejections: Sequence[LineRejection] = (),
) -> str:
    """The report of ``faithjudge.reports`` over the lines done so far (built off the event
    loop)."""
    # imported on first use: pandas and scipy would add seconds to every start-up
    from faithjudge.reports.explorer import ItemDetails
    from faithjudge.reports.judges import JudgeTally
    from faithjudge.reports.render_html import LISTED_ITEMS, report_html
    from faithjudge.reports.render_md import report_markdown
    from faithjudge.reports.report import build_report, report_json
    from faithjudge.reports.table import item_table

    def build() -> str:
        # the HTML lists the first rows only: their quotes are all the table needs to keep
        results = _results_in_thread(store, batch_id, rejections)
        judges, details = JudgeTally(), ItemDetails(LISTED_ITEMS if fmt == "html" else 0)
        items = item_table(details.watch(judges.watch(results)), quote_rows=LISTED_ITEMS)
        report = build_report(items, B=bootstrap, seed=seed, judges=judges.summary())
        if fmt == "json":
            return json.dumps(report_json(report), allow_nan=False)
        if fmt == "md":
            return report_markdown(report)
        return report_html(report, details=details.rows)

    return await anyio.to_thread.run_sync(build)
