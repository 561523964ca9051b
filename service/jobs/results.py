"""Reading results back: NDJSON in line order, and the report of the lines done so far."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Literal

import anyio
import anyio.from_thread

from service.contracts import ItemResult
from service.jobs.schema import DONE
from service.jobs.store import JobStore

__all__ = ["render_report", "result_lines"]

_PAGE = 500


async def result_lines(
    store: JobStore, batch_id: str, *, start: int, contiguous: bool
) -> AsyncIterator[bytes]:
    """Result lines from index ``start`` in input order, each ending in a newline.

    ``contiguous`` (a running batch) stops at the first line not done yet, so a client that
    resumes at the count it has received never misses a line; otherwise lines without a result
    (a cancelled batch) are skipped. Each page is read in its own short transaction, so a slow
    client holds no connection.
    """
    position = start
    while True:
        page = await store.results_page(batch_id, start=position, limit=_PAGE)
        for _seq, state, result in page:
            if state != DONE or result is None:
                if contiguous:
                    return
                continue
            yield result.encode() + b"\n"
        if len(page) < _PAGE:
            return
        position = page[-1][0] + 1


async def _page(store: JobStore, batch_id: str, start: int) -> list[tuple[int, int, str | None]]:
    return await store.results_page(batch_id, start=start, limit=_PAGE)


def _results_in_thread(store: JobStore, batch_id: str) -> Iterator[ItemResult]:
    position = 0
    while True:
        page = anyio.from_thread.run(_page, store, batch_id, position)
        for _seq, state, result in page:
            if state == DONE and result is not None:
                yield ItemResult.model_validate_json(result)
        if len(page) < _PAGE:
            return
        position = page[-1][0] + 1


async def render_report(
    store: JobStore,
    batch_id: str,
    *,
    fmt: Literal["json", "md", "html"],
    bootstrap: int,
    seed: int,
) -> str:
    """The report of ``service.reports`` over the lines done so far (built off the event loop)."""
    # imported on first use: pandas and scipy would add seconds to every start-up
    from service.reports.render_html import LISTED_ITEMS, report_html
    from service.reports.render_md import report_markdown
    from service.reports.report import build_report, report_json
    from service.reports.table import item_table

    def build() -> str:
        # the HTML lists the first rows only: their quotes are all the table needs to keep
        items = item_table(_results_in_thread(store, batch_id), quote_rows=LISTED_ITEMS)
        report = build_report(items, B=bootstrap, seed=seed)
        if fmt == "json":
            return json.dumps(report_json(report), allow_nan=False)
        if fmt == "md":
            return report_markdown(report)
        return report_html(report)

    return await anyio.to_thread.run_sync(build)
