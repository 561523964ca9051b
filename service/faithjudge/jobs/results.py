"""Reading results back: NDJSON in line order, and the report of the lines done so far.

Every line of the upload has a result: an accepted line its scored result, a rejected line the
error result ``faithjudge score`` writes for it (``rejection_result``), at its line number. So a
batch's results and a ``score`` run over the same file are interchangeable, and a client that
lost the 202 answer loses nothing.
"""

from __future__ import annotations

import bisect
import json
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

import anyio
import anyio.from_thread
import orjson
from faithjudge_client.bodies import LineRejection
from faithjudge_client.lines import ItemResult

from faithjudge.jobs.interface import DONE, JobReader, JobRow
from faithjudge.pipeline.request_lines import input_error_result
from faithjudge.reports.limits import LISTED_PROBLEMS

__all__ = ["JobRejections", "rejection_result", "render_report", "result_lines"]

_PAGE = 500
_REJECTIONS_PAGE = 1000


def rejection_result(rejection: LineRejection) -> bytes:
    """The result line of a rejected line, as ``faithjudge score`` writes it (newline ended)."""
    readable = {"item_id": rejection.item_id, "model": rejection.model,
                "question": rejection.question}  # fmt: skip
    result = input_error_result(
        rejection.line, f"line {rejection.line}: {rejection.reason}", readable=readable
    )
    return orjson.dumps(result.model_dump(mode="json"), option=orjson.OPT_APPEND_NEWLINE)


@dataclass(frozen=True, slots=True)
class JobRejections:
    """A batch's rejected lines, read a page at a time: from the store, or from the batch row
    where it lists them all (a batch uploaded before the store kept them apart has no others).
    """

    store: JobReader
    job_id: str
    total: int
    listed: Sequence[LineRejection] | None = None

    @classmethod
    def of(cls, store: JobReader, row: JobRow) -> JobRejections:
        listed = orjson.loads(row.rejections)
        if row.rejected_count > len(listed):
            return cls(store, row.id, row.rejected_count)
        rows = [LineRejection.model_validate(r) for r in listed]
        return cls(store, row.id, len(rows), sorted(rows, key=lambda r: r.line))

    async def count(self, before: int) -> int:
        """How many are numbered below ``before``."""
        if not self.total:
            return 0
        if self.listed is not None:
            return bisect.bisect_left(self.listed, before, key=lambda r: r.line)
        return await self.store.count_rejections(self.job_id, before=before)

    async def page(self, *, after: int, limit: int, skip: int = 0) -> list[LineRejection]:
        """Those numbered above ``after`` in line order, at most ``limit``, ``skip`` passed over."""
        if not self.total:
            return []
        if self.listed is not None:
            first = bisect.bisect_right(self.listed, after, key=lambda r: r.line) + skip
            return list(self.listed[first : first + limit])
        rows = await self.store.rejections_page(self.job_id, after=after, limit=limit, skip=skip)
        return [LineRejection.model_validate_json(text) for _line, text in rows]


class _Pending:
    """The rejections still to merge, fetched a page at a time as the merge reaches them."""

    def __init__(self, rejections: JobRejections, after: int, skip: int) -> None:
        self._rejections, self._after, self._skip = rejections, after, skip
        self._buffer: deque[LineRejection] = deque()
        self._exhausted = False

    async def next_before(self, line: int | None) -> LineRejection | None:
        """The next rejection if it is numbered below ``line`` (None: any), else None."""
        if not self._buffer and not self._exhausted:
            page = await self._rejections.page(
                after=self._after, limit=_REJECTIONS_PAGE, skip=self._skip
            )
            self._skip = 0
            self._exhausted = len(page) < _REJECTIONS_PAGE
            if page:
                self._after = page[-1].line
            self._buffer.extend(page)
        if self._buffer and (line is None or self._buffer[0].line < line):
            return self._buffer.popleft()
        return None


class _Tally:
    """The report's view of the rejections: the first ones as result lines (the listings show
    them), the rest only counted, so a batch of any size reports in bounded memory."""

    def __init__(self, rows: int) -> None:
        self.rows = rows
        self.counted = 0
        self.models: set[str] = set()

    def as_row(self, rejection: LineRejection) -> bool:
        """True while rows are left to give; past them the rejection is counted instead."""
        if self.rows > 0:
            self.rows -= 1
            return True
        self.counted += 1
        if rejection.model is not None:
            self.models.add(rejection.model)
        return False


async def _resume_point(
    store: JobReader, job_id: str, start: int, total: int, rejections: JobRejections
) -> tuple[int, int, int]:
    """Where stream position ``start`` falls: the first accepted seq at or after it, and where
    the rejections resume (those numbered above a line, how many of them to pass over).

    Position of accepted line ``s`` = s + rejections before its line; that grows with ``s``, so
    the first ``s`` at or after ``start`` is found by bisection (two lookups per step). The
    rejections between accepted line ``s - 1`` and it come just before it in the stream.
    """
    if not rejections.total or start == 0:
        return start, 0, 0

    async def before(seq: int) -> tuple[int, int]:
        """(line number of accepted line ``seq``, rejections before it); (0, 0) before any."""
        if seq < 0:
            return 0, 0
        line = await store.line_number(job_id, seq)
        return line, await rejections.count(line)

    low, high = 0, total
    while low < high:
        middle = (low + high) // 2
        if middle + (await before(middle))[1] >= start:
            high = middle
        else:
            low = middle + 1
    # the rejections after accepted line low - 1 start at stream position low + those before it
    after, earlier = await before(low - 1)
    return low, after, start - (low + earlier)


async def _merged(
    store: JobReader,
    job_id: str,
    rejections: JobRejections,
    *,
    start: int,
    contiguous: bool,
    total: int,
    tally: _Tally | None = None,
) -> AsyncGenerator[list[bytes], None]:
    """Result lines from stream position ``start``, a page at a time (see ``result_lines``);
    with ``tally``, the rejections it only counts are left out."""
    seq, after, skip = await _resume_point(store, job_id, start, total, rejections)
    pending = _Pending(rejections, after, skip)
    chunk: list[bytes] = []
    while True:
        page = await store.results_page(job_id, start=seq, limit=_PAGE, with_line=True)
        for _seq, state, result, line in page:
            while (rejection := await pending.next_before(line)) is not None:
                if tally is None or tally.as_row(rejection):
                    chunk.append(rejection_result(rejection))
                if len(chunk) >= _REJECTIONS_PAGE:
                    yield chunk
                    chunk = []
            if state != DONE or result is None:
                if contiguous:
                    if chunk:
                        yield chunk
                    return
                continue
            chunk.append(result.encode() + b"\n")
        if chunk:
            yield chunk
            chunk = []
        if len(page) < _PAGE:
            break
        seq = page[-1][0] + 1
    while (rejection := await pending.next_before(None)) is not None:
        if tally is None or tally.as_row(rejection):
            chunk.append(rejection_result(rejection))
        if len(chunk) >= _REJECTIONS_PAGE:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


async def result_lines(
    store: JobReader,
    job_id: str,
    *,
    start: int,
    contiguous: bool,
    total: int = 0,
    rejections: JobRejections | None = None,
) -> AsyncIterator[bytes]:
    """Result lines from stream position ``start`` in input order, a page of them at a time.

    ``rejections`` are merged in at their line numbers, read a page at a time as the merge
    reaches them; ``total`` is the count of accepted lines. ``contiguous`` (a running batch)
    stops at the first line not done yet, so a client that resumes at the count it has received
    never misses a line; otherwise lines without a result (a cancelled batch) are skipped. Each
    page is read in its own short transaction, so a slow client holds no connection.
    """
    rejections = rejections or JobRejections(store, job_id, 0)
    pages = _merged(store, job_id, rejections, start=start, contiguous=contiguous, total=total)
    async for chunk in pages:
        yield b"".join(chunk)


def _results_in_thread(
    store: JobReader, job_id: str, rejections: JobRejections, tally: _Tally
) -> Iterator[ItemResult]:
    """Every result so far, the rejected lines ``tally`` keeps as rows included, read page by
    page from a worker thread."""
    pages = _merged(store, job_id, rejections, start=0, contiguous=False, total=0, tally=tally)

    async def next_chunk() -> list[bytes] | None:
        return await anext(pages, None)

    try:
        while (chunk := anyio.from_thread.run(next_chunk)) is not None:
            for line in chunk:
                yield ItemResult.model_validate_json(line)
    finally:
        anyio.from_thread.run(pages.aclose)


async def render_report(
    store: JobReader,
    job_id: str,
    *,
    fmt: Literal["json", "md", "html"],
    bootstrap: int,
    seed: int,
    rejections: JobRejections | None = None,
) -> str:
    """The report of ``faithjudge.reports`` over the lines done so far (built off the event
    loop)."""
    # imported on first use: pandas and scipy would add seconds to every start-up
    from faithjudge.reports.explorer import ItemDetails
    from faithjudge.reports.judges import JudgeTally
    from faithjudge.reports.render_html import LISTED_ITEMS, report_html
    from faithjudge.reports.render_md import report_markdown
    from faithjudge.reports.report import CountedInputErrors, build_report, report_json
    from faithjudge.reports.table import item_table

    every_rejection = rejections or JobRejections(store, job_id, 0)

    def build() -> str:
        # the HTML lists the first rows only: their quotes are all the table needs to keep
        tally = _Tally(LISTED_PROBLEMS)
        results = _results_in_thread(store, job_id, every_rejection, tally)
        judges, details = JudgeTally(), ItemDetails(LISTED_ITEMS if fmt == "html" else 0)
        items = item_table(details.watch(judges.watch(results)), quote_rows=LISTED_ITEMS)
        counted = CountedInputErrors(tally.counted, frozenset(tally.models))
        report = build_report(
            items, B=bootstrap, seed=seed, judges=judges.summary(), counted=counted
        )
        if fmt == "json":
            return json.dumps(report_json(report), allow_nan=False)
        if fmt == "md":
            return report_markdown(report)
        return report_html(report, details=details.rows)

    return await anyio.to_thread.run_sync(build)
