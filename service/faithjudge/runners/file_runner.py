"""Score a JSONL file into a JSONL file: streaming, bounded memory, resumable, in line order.

Each input line becomes exactly one result line carrying its ``line`` number. A line that is
not a valid ScoreRequest becomes an ``input`` error result naming the line and the field. A run
that stops part-way resumes: lines whose results are already in the output are skipped.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import anyio.abc
import orjson
from faithjudge_client.lines import ItemResult, Metric, ScoreRequest
from faithjudge_client.metric_catalogue import metric_names

from faithjudge.errors import FaithJudgeError, UserInputError
from faithjudge.jsonl import BOM, numbered_lines
from faithjudge.pipeline import Scorer
from faithjudge.request_lines import parse_line, readable_text
from faithjudge.scoring.outcomes import JUDGED, count_outcomes, metric_outcome, rates_from_counts

__all__ = ["ScoreFileSummary", "score_file"]

ProgressFn = Callable[[int], None]


@dataclass(slots=True)
class ScoreFileSummary:
    """What a run did: lines, and per metric the outcome counts of ``metric_outcome`` (the same
    classification the reports, the gate and judge validation count coverage with)."""

    total_lines: int = 0
    skipped: int = 0
    scored: int = 0
    input_errors: int = 0
    answers_off_options: int = 0
    outcomes: dict[Metric, dict[str, int]] = field(
        default_factory=lambda: {metric: count_outcomes(()) for metric in metric_names()}
    )
    response_formats: dict[str, int] = field(default_factory=dict)
    """Result lines by the response format(s) their judge calls were asked in."""

    def add(self, result: ItemResult) -> None:
        self.scored += 1
        error_stage = result.error.stage if result.error is not None else None
        if error_stage is not None:
            self.input_errors += 1
        if result.answer_in_options is False:
            self.answers_off_options += 1
        for metric, counts in self.outcomes.items():
            counts[metric_outcome(result.metrics.get(metric), error_stage)] += 1
        asked_in = result.provenance.response_format if result.provenance is not None else None
        if asked_in is not None:
            self.response_formats[asked_in] = self.response_formats.get(asked_in, 0) + 1

    @property
    def judged(self) -> int:
        """Grades that reached the judge and came back (valid, or the judge's own failure)."""
        return sum(counts[o] for counts in self.outcomes.values() for o in JUDGED)

    @property
    def valid(self) -> int:
        """Grades that passed verification."""
        return sum(counts["valid"] for counts in self.outcomes.values())

    def totals(self) -> dict[str, int]:
        """Outcome counts summed over the metrics (only those that occurred)."""
        summed: dict[str, int] = {}
        for counts in self.outcomes.values():
            for outcome, count in counts.items():
                if count:
                    summed[outcome] = summed.get(outcome, 0) + count
        return summed

    def coverage(self, metric: Metric) -> dict[str, float | None]:
        return rates_from_counts(self.outcomes[metric])


def _first_error(group: BaseExceptionGroup) -> FaithJudgeError | None:
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            found = _first_error(exc)
            if found is not None:
                return found
        elif isinstance(exc, FaithJudgeError):
            return exc
    return None


# Every result line starts so (``ItemResult`` dumps ``line`` first): what a torn write leaves.
_RESULT_START = b'{"line":'


def _done_lines(output: Path) -> dict[int, str | None]:
    """The lines ``output`` already holds results for, with their item ids.

    A torn last line (a crash mid-write) is cut off. Anything else that is not a result line
    stops the run: appending to a file that holds other data would bury it, and cutting it off
    would destroy it.
    """
    done: dict[int, str | None] = {}
    if not output.exists():
        return done
    with output.open("rb+") as handle:
        good_end = 0
        for number, raw in enumerate(handle, start=1):
            if not raw.endswith(b"\n") and raw.startswith(_RESULT_START):
                handle.truncate(good_end)
                break
            good_end += len(raw)
            if not raw.strip():
                continue
            try:
                record = orjson.loads(raw)
            except orjson.JSONDecodeError:
                record = None
            line = record.get("line") if isinstance(record, dict) else None
            if not isinstance(line, int) or isinstance(line, bool):
                raise UserInputError(
                    f"{output} line {number} is not a result line: the output file holds other "
                    "data, and results are appended to it; choose another output file",
                    field="output",
                )
            item_id = record.get("item_id")
            done[line] = item_id if isinstance(item_id, str) else None
    return done


def _readable_item_id(raw: bytes) -> str | None:
    """The item_id a result line records for this request line (``readable_text``'s rule)."""
    try:
        return readable_text(orjson.loads(raw.removeprefix(BOM)).get("item_id"))
    except (orjson.JSONDecodeError, AttributeError):
        return None


def _same_item(output: Path, number: int, recorded: str | None, raw: bytes) -> None:
    """A skipped line must be the line the output holds a result for: resuming into the output
    of another input would skip its lines and report results it never had."""
    here = _readable_item_id(raw)
    if recorded != here:
        raise UserInputError(
            f"{output} holds results of another input: its line {number} is item "
            f"{recorded!r}, the input's is {here!r}; choose another output file",
            field="output",
        )


def _check_output(source: Path, output: Path) -> None:
    """The output must be a regular file (or not exist yet) other than the input."""
    if output.exists() and not output.is_file():
        # a folder, /dev/null, a pipe: nothing to resume from (/dev/full reads zeros for ever)
        raise UserInputError(f"output {output} is not a regular file", field="output")
    if output.exists() and output.samefile(source):
        raise UserInputError(
            f"output {output} is the input file: results are appended to the output, so the "
            "run would read its own results; choose another output file",
            field="output",
        )


async def score_file(
    scorer: Scorer,
    source: Path,
    output: Path,
    *,
    concurrency: int = 100,
    progress: ProgressFn | None = None,
) -> ScoreFileSummary:
    """Score every line of ``source`` into ``output`` (appending; skips lines already there).

    At most ``concurrency`` items are scored at once (one for a judge in the process:
    ``Scorer.items_at_once``) and at most ``4 × concurrency`` results wait for an earlier line,
    so memory stays bounded whatever the file size.
    """
    concurrency = scorer.items_at_once(concurrency)
    if not source.is_file():  # noqa: ASYNC240 - a stat before any work starts
        raise UserInputError(f"input file not found: {source}", field="input")
    _check_output(source, output)
    done = _done_lines(output)
    summary = ScoreFileSummary(skipped=0)
    window = anyio.Semaphore(4 * concurrency)
    pending: dict[int, bytes] = {}
    order: deque[int] = deque()  # line numbers in read order, not yet written
    send, receive = anyio.create_memory_object_stream[tuple[int, bytes]](concurrency)
    output.parent.mkdir(parents=True, exist_ok=True)

    with output.open("ab") as sink:

        def flush_ready() -> None:
            written = 0
            while order and order[0] in pending:
                sink.write(pending.pop(order.popleft()))
                written += 1
            if written:
                sink.flush()
                for _ in range(written):
                    window.release()
                if progress is not None:
                    progress(written)

        async def produce() -> None:
            async with send:
                with source.open("rb") as handle:
                    for number, raw in numbered_lines(handle):
                        summary.total_lines += 1
                        if number in done:
                            _same_item(output, number, done[number], raw)
                            summary.skipped += 1
                            if progress is not None:
                                progress(1)
                            continue
                        await window.acquire()
                        order.append(number)
                        await send.send((number, raw))

        async def work(stream: anyio.abc.ObjectReceiveStream[tuple[int, bytes]]) -> None:
            async with stream:
                async for number, raw in stream:
                    parsed = parse_line(raw, number)
                    if isinstance(parsed, ScoreRequest):
                        result = await scorer.score(parsed, line=number)
                    else:
                        result = parsed
                    summary.add(result)
                    pending[number] = orjson.dumps(
                        result.model_dump(mode="json"), option=orjson.OPT_APPEND_NEWLINE
                    )
                    flush_ready()

        try:
            async with anyio.create_task_group() as group:
                group.start_soon(produce)
                with receive:
                    for _ in range(concurrency):
                        group.start_soon(work, receive.clone())
        except BaseExceptionGroup as group:
            # A run stopped on purpose (the judge is unreachable) says why, not "task group".
            flush_ready()
            reason = _first_error(group)
            if reason is None:
                raise
            raise reason from None
        flush_ready()
        sink.flush()
        os.fsync(sink.fileno())
    return summary
