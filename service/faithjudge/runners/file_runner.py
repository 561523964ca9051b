"""Score a JSONL file into a JSONL file: streaming, bounded memory, resumable, in line order.

Each input line becomes exactly one result line carrying its ``line`` number. A line that is
not a valid ScoreRequest becomes an ``input`` error result naming the line and the field. A run
that stops part-way resumes: lines whose results are already in the output are skipped.

``retry_failed`` scores again the lines whose result is an ``input`` error or holds a grade that
failed at the ``transport`` stage, reading them from the (fixed) input; every other result line
is copied byte for byte, and the output is replaced at once (a temporary file, then a rename),
so a run stopped part-way leaves it as it was. ``lines`` restricts a run to those line numbers
(``faithjudge.runners.selection``: the first N, or a seeded sample).

An output keeps its judge. Each result line names the judge that graded it (its provenance:
the judge, the hash of its settings, the prompt set, the knowledge base and ``judge_sha256``
over all of them and the scoring settings); a run whose judge differs from a judge that
answered lines of the output stops before scoring (``JudgeChanged``) unless ``judge_change``
says to mix them. A line no judge answered (every grade failed at transport, or before any
call) belongs to no judge. ``output_judge`` reads the judge of an output's judge, so a
resume that names none keeps it.

An output the run creates is 0600 like every file FaithJudge writes (an existing output keeps
its mode), and one that ends the run empty, no line written, is removed again.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import anyio
import anyio.abc
import orjson
from faithjudge_client.lines import OLDER_PROVENANCE_KEYS, ItemResult, Metric, ScoreRequest
from faithjudge_client.metric_catalogue import metric_names

from faithjudge.errors import FaithJudgeError, UserInputError
from faithjudge.jsonl import BOM, numbered_lines
from faithjudge.pipeline.request_lines import parse_line, readable_text
from faithjudge.pipeline.scorer import Scorer
from faithjudge.private_files import private_dir
from faithjudge.scoring.outcomes import (
    JUDGED,
    NOT_JUDGED,
    count_outcomes,
    metric_outcome,
    rates_from_counts,
)

__all__ = [
    "JudgeChanged",
    "LineJudge",
    "ScoreFileSummary",
    "check_output_judge",
    "output_judge",
    "score_file",
]

ProgressFn = Callable[[int], None]


@dataclass(slots=True)
class ScoreFileSummary:
    """What a run did: lines, and per metric the outcome counts of ``metric_outcome`` (the same
    classification the reports, the gate and judge validation count coverage with)."""

    total_lines: int = 0
    skipped: int = 0
    scored: int = 0
    retried: int = 0
    """Lines scored again (``retry_failed``): their earlier result had failed."""
    left_out: int = 0
    """Request lines outside the run's selection (``--limit``, ``--sample``)."""
    input_errors: int = 0
    answers_off_options: int = 0
    outcomes: dict[Metric, dict[str, int]] = field(
        default_factory=lambda: {metric: count_outcomes(()) for metric in metric_names()}
    )
    response_formats: dict[str, int] = field(default_factory=dict)
    """Result lines by the response format(s) their judge calls were asked in."""
    transport_failed: int = 0
    """Lines of the output, after the run, holding a grade that failed at the ``transport``
    stage (the judge never answered it): what ``retry_failed`` would score again."""
    judge_changed_from: tuple[LineJudge, ...] = ()
    """With ``judge_change``: the other judges that answered lines of the output, whose lines
    keep their grades beside this run's."""

    def add(self, result: ItemResult) -> None:
        self.scored += 1
        if any(
            graded.failure is not None and graded.failure.stage == "transport"
            for graded in result.metrics.values()
        ):
            self.transport_failed += 1
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
_OLDER_KEY = {new: old for old, new in OLDER_PROVENANCE_KEYS.items()}


@dataclass(frozen=True, slots=True)
class _Done:
    """A result line the output already holds: where it is, and whether it is worth retrying."""

    item_id: str | None
    offset: int
    length: int
    failed: bool
    """An ``input`` error, or a grade that failed at the ``transport`` stage: the line never
    reached the judge, or the judge never answered it."""
    transport: bool = False
    """A grade of it failed at the ``transport`` stage."""


def _transport_failed(record: Mapping[str, object]) -> bool:
    metrics = record.get("metrics")
    if not isinstance(metrics, dict):
        return False
    for graded in metrics.values():
        failure = graded.get("failure") if isinstance(graded, dict) else None
        if isinstance(failure, dict) and failure.get("stage") == "transport":
            return True
    return False


def _input_error(record: Mapping[str, object]) -> bool:
    error = record.get("error")
    return isinstance(error, dict) and error.get("stage") == "input"


@dataclass(frozen=True, slots=True)
class LineJudge:
    """The judge a result line names, by what decides its grades (the model the server said it
    answered as is shown, not compared: a server may answer one model name as a dated one)."""

    judge: str
    settings_sha256: str | None
    prompt_set: str | None
    prompt_sha256: str | None
    kb_id: str | None
    kb_sha256: str | None
    judge_sha256: str | None
    """None in lines written before results kept it: then the other fields are compared."""
    model: str | None = field(default=None, compare=False)

    @classmethod
    def of_scorer(cls, scorer: Scorer) -> LineJudge:
        kb = scorer.knowledge_base
        return cls(
            judge=scorer.judge_id,
            settings_sha256=scorer.judge_config["evaluator_settings_sha256"],
            prompt_set=scorer.prompts.id,
            prompt_sha256=scorer.prompts.sha256,
            kb_id=kb.id if kb is not None else None,
            kb_sha256=kb.sha256 if kb is not None else None,
            judge_sha256=scorer.judge_sha256,
        )

    def describe(self) -> str:
        parts = [self.judge]
        if self.model and self.model != self.judge:
            parts.append(f"model {self.model}")
        parts.append(f"prompts {self.prompt_set}")
        if self.kb_id:
            parts.append(f"KB {self.kb_id}")
        return ", ".join(parts)

    def differences(self, other: LineJudge) -> list[str]:
        """What ``other`` changes of this judge, named as a user would set it; empty when it
        is the same judge."""
        changed = []
        named = (
            ("judge", "judge"),
            ("prompt_set", "prompt set"),
            ("kb_id", "knowledge base"),
        )
        for name, label in named:
            mine, theirs = getattr(self, name), getattr(other, name)
            if mine != theirs:
                changed.append(f"{label} {theirs or 'none'}, not {mine or 'none'}")
        hashed = (
            ("settings_sha256", "judge settings"),
            ("prompt_sha256", "prompt text"),
            ("kb_sha256", "knowledge base content"),
        )
        for name, label in hashed:
            mine, theirs = getattr(self, name), getattr(other, name)
            if mine is not None and theirs is not None and mine != theirs:
                changed.append(label)
        both = self.judge_sha256 is not None and other.judge_sha256 is not None
        if not changed and both and self.judge_sha256 != other.judge_sha256:
            changed.append("scoring settings")
        return changed


def _line_judge(record: Mapping[str, object]) -> LineJudge | None:
    """The judge a result line (as parsed JSON) names, or None for a line without provenance."""
    provenance = record.get("provenance")
    if not isinstance(provenance, dict):
        return None

    def text(name: str) -> str | None:
        # a line written before the rename names the judge by its older keys
        value = provenance.get(name, provenance.get(_OLDER_KEY.get(name, "")))
        return value if isinstance(value, str) else None

    judge = text("judge")
    if judge is None:
        return None
    return LineJudge(
        judge=judge,
        settings_sha256=text("judge_settings_sha256"),
        prompt_set=text("prompt_set"),
        prompt_sha256=text("prompt_sha256"),
        kb_id=text("kb_id"),
        kb_sha256=text("kb_sha256"),
        judge_sha256=text("judge_sha256"),
        model=text("judge_model"),
    )


def _answered(record: Mapping[str, object]) -> bool:
    """Whether the judge answered at least one grade of a result line (``metric_outcome``'s
    judged outcomes: valid, or the judge's own failure)."""
    metrics = record.get("metrics")
    if not isinstance(metrics, dict):
        return False
    for graded in metrics.values():
        if not isinstance(graded, dict):
            continue
        failure = graded.get("failure")
        stage = failure.get("stage") if isinstance(failure, dict) else None
        if graded.get("status") == "valid" or stage not in NOT_JUDGED:
            return True
    return False


@dataclass(slots=True)
class _OutputJudges:
    """The judges of an output's lines: those that answered lines, and the judge the first
    unanswered line was sent to."""

    answered: Counter[LineJudge] = field(default_factory=Counter)
    sent_to: LineJudge | None = None

    def add(self, record: Mapping[str, object]) -> None:
        judge = _line_judge(record)
        if judge is None:
            return
        if _answered(record):
            self.answered[judge] += 1
        elif self.sent_to is None:
            self.sent_to = judge

    def main(self) -> LineJudge | None:
        """The judge of the most answered lines, else the one unanswered lines were sent to."""
        if self.answered:
            return self.answered.most_common(1)[0][0]
        return self.sent_to


class JudgeChanged(UserInputError):
    """The run's judge is not the judge that answered the output's lines."""


def _check_judge(
    output: Path, judges: _OutputJudges, scorer: Scorer, *, judge_change: bool
) -> tuple[LineJudge, ...]:
    """The output's other judges when ``judge_change`` allows them; without it, a judge other
    than the one that answered the output's lines stops the run before anything is scored."""
    mine = LineJudge.of_scorer(scorer)
    others = [judge for judge in judges.answered if judge.differences(mine)]
    if not others:
        return ()
    if judge_change:
        return tuple(others)
    theirs = max(others, key=lambda judge: judges.answered[judge])
    lines = sum(judges.answered[judge] for judge in others)
    raise JudgeChanged(
        f"{output} was graded by {theirs.describe()} ({lines} line(s)); this run's judge is "
        f"{mine.describe()}, which differs in {'; '.join(theirs.differences(mine))}. Grades of "
        "two judges are not comparable: rerun without --judge to keep the output's judge "
        "(and the prompt set, knowledge base and settings it was scored with), choose another "
        "output, or pass --judge-change to score these lines with the new judge, each line's "
        "provenance naming its judge",
        field="judge",
    )


def _read_judges(output: Path) -> _OutputJudges:
    """The judges of an existing output's lines, read without changing it (a missing or
    unreadable output, or lines of other data, name none: the run itself says what is
    wrong)."""
    judges = _OutputJudges()
    with contextlib.suppress(OSError), output.open("rb") as handle:
        for raw in handle:
            try:
                record = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue
            if isinstance(record, dict):
                judges.add(record)
    return judges


def output_judge(output: Path) -> LineJudge | None:
    """The judge of an existing output: the one that answered most of its lines, else the one
    its unanswered lines were sent to; None when no line names one."""
    return _read_judges(output).main()


def check_output_judge(output: Path, scorer: Scorer, *, judge_change: bool = False) -> None:
    """``score_file``'s judge check on its own, for a run that pays for work before it scores
    (the Batch API phase).

    Raises:
        JudgeChanged: as ``score_file``.
    """
    _check_judge(output, _read_judges(output), scorer, judge_change=judge_change)


def _done_lines(output: Path, judges: _OutputJudges | None = None) -> dict[int, _Done]:
    """The lines ``output`` already holds results for, with their item ids; the judges of its
    lines are added to ``judges``.

    A torn last line (a crash mid-write) is cut off. Anything else that is not a result line
    stops the run: appending to a file that holds other data would bury it, and cutting it off
    would destroy it.
    """
    done: dict[int, _Done] = {}
    if not output.exists():
        return done
    with output.open("rb+") as handle:
        good_end = 0
        for number, raw in enumerate(handle, start=1):
            if not raw.endswith(b"\n") and raw.startswith(_RESULT_START):
                handle.truncate(good_end)
                break
            offset = good_end
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
            assert isinstance(record, dict)
            item_id = record.get("item_id")
            if not raw.endswith(b"\n"):  # a whole last line without its newline: add one
                raw += b"\n"
            transport = _transport_failed(record)
            done[line] = _Done(
                item_id if isinstance(item_id, str) else None,
                offset,
                len(raw),
                failed=transport or _input_error(record),
                transport=transport,
            )
            if judges is not None:
                judges.add(record)
    return done


def _readable_item_id(raw: bytes) -> str | None:
    """The item_id a result line records for this request line (``readable_text``'s rule)."""
    try:
        return readable_text(orjson.loads(raw.removeprefix(BOM)).get("item_id"))
    except (orjson.JSONDecodeError, AttributeError):
        return None


def _same_item(
    output: Path, number: int, done: _Done, raw: bytes, *, retrying: bool = False
) -> None:
    """A skipped line must be the line the output holds a result for: resuming into the output
    of another input would skip its lines and report results it never had. A failed result
    that could not read the item id (a torn line) matches any line being retried at its
    number."""
    here = _readable_item_id(raw)
    if done.item_id == here or (retrying and done.failed and done.item_id is None):
        return
    fixed = (
        "; if you fixed that line, rerun with --retry-failed"
        if done.failed and done.item_id is None and not retrying
        else ""
    )

    def item(item_id: str | None) -> str:
        return "a line with no item id" if item_id is None else f"item {item_id!r}"

    raise UserInputError(
        f"{output} holds results of another input: its line {number} is "
        f"{item(done.item_id)}, the input's is {item(here)}; choose another output "
        f"file{fixed}",
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
    retry_failed: bool = False,
    lines: Collection[int] | None = None,
    judge_change: bool = False,
) -> ScoreFileSummary:
    """Score every line of ``source`` into ``output`` (appending; skips lines already there).

    At most ``concurrency`` items are scored at once (one for a judge in the process:
    ``Scorer.items_at_once``) and at most ``4 × concurrency`` results wait for an earlier line,
    so memory stays bounded whatever the file size. ``retry_failed`` scores the failed lines
    again and rewrites the output (see the module's docstring); ``lines`` limits the run to
    those line numbers. The caller holds the output's lock (``faithjudge.output_lock``).

    Raises:
        JudgeChanged: the scorer's judge is not the one that answered the output's lines, and
            ``judge_change`` is not given.
    """
    concurrency = scorer.items_at_once(concurrency)
    if not source.is_file():  # noqa: ASYNC240 - a stat before any work starts
        raise UserInputError(f"input file not found: {source}", field="input")
    _check_output(source, output)
    judges = _OutputJudges()
    done = _done_lines(output, judges)
    changed_from = _check_judge(output, judges, scorer, judge_change=judge_change)
    retrying = retry_failed and any(d.failed for d in done.values())
    if retrying or _fills_gaps(source, done, lines):
        summary = await _rewrite(
            scorer, source, output, done, concurrency, progress, lines, retry=retrying
        )
    else:
        summary = await _append(scorer, source, output, done, concurrency, progress, lines)
    summary.judge_changed_from = changed_from if summary.scored else ()
    return summary


async def _append(
    scorer: Scorer,
    source: Path,
    output: Path,
    done: dict[int, _Done],
    concurrency: int,
    progress: ProgressFn | None,
    lines: Collection[int] | None,
) -> ScoreFileSummary:
    """Results of the lines ``output`` lacks, appended to it in line order."""
    summary = ScoreFileSummary(skipped=0)
    summary.transport_failed = sum(1 for entry in done.values() if entry.transport)

    async def feed(score: _Queue, _keep: _Queue) -> None:
        with source.open("rb") as handle:
            for number, raw in numbered_lines(handle):
                if lines is not None and number not in lines:
                    summary.left_out += 1
                    continue
                summary.total_lines += 1
                if number in done:
                    _same_item(output, number, done[number], raw)
                    summary.skipped += 1
                    if progress is not None:
                        progress(1)
                    continue
                await score(number, raw)

    sink, created = _open_to_append(output)
    try:
        with sink:
            await _write_in_order(scorer, sink, feed, concurrency, summary, progress)
    finally:
        # a run that wrote nothing (the judge was dead from the start, an empty input) leaves
        # no empty file it made: an empty output is no result, and looks like one
        if created:
            with contextlib.suppress(FileNotFoundError):
                if os.stat(output).st_size == 0:
                    os.unlink(output)
    return summary


def _open_to_append(output: Path) -> tuple[BinaryIO, bool]:
    """``output`` opened for appending, and whether this created it: a new output is 0600
    (``faithjudge.private_files``'s rule, its folders 0700 where made), an existing one keeps
    its mode."""
    private_dir(output.parent)
    try:
        fd = os.open(output, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return output.open("ab"), False
    try:
        os.fchmod(fd, 0o600)  # the umask cut the creation mode; this sets it whatever it is
        return os.fdopen(fd, "ab"), True
    except BaseException:
        os.close(fd)
        raise


_Queue = Callable[[int, bytes], Awaitable[None]]
"""Queues a line: ``score(number, raw)`` to score it, ``keep(number, data)`` to write ``data``."""


async def _write_in_order(
    scorer: Scorer,
    sink: BinaryIO,
    feed: Callable[[_Queue, _Queue], Awaitable[None]],
    concurrency: int,
    summary: ScoreFileSummary,
    progress: ProgressFn | None,
) -> None:
    """Score the lines ``feed`` queues, ``concurrency`` at once, and write each result (or the
    bytes it keeps) to ``sink`` in the order queued, each flushed once the lines before it are.

    At most ``4 × concurrency`` results wait for an earlier line, so memory stays bounded
    whatever the file size. A run stopped on purpose (the judge is unreachable) raises its
    reason, not the task group, after writing what was ready.
    """
    window = anyio.Semaphore(4 * concurrency)
    pending: dict[int, bytes] = {}
    order: deque[int] = deque()  # line numbers in the order queued, not yet written
    send, receive = anyio.create_memory_object_stream[tuple[int, bytes]](concurrency)

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

    async def score(number: int, raw: bytes) -> None:
        await window.acquire()
        order.append(number)
        await send.send((number, raw))

    async def keep(number: int, data: bytes) -> None:
        await window.acquire()
        order.append(number)
        pending[number] = data
        flush_ready()

    async def produce() -> None:
        async with send:
            await feed(score, keep)

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
        flush_ready()
        reason = _first_error(group)
        if reason is None:
            raise
        raise reason from None
    flush_ready()
    sink.flush()
    os.fsync(sink.fileno())


def _fills_gaps(source: Path, done: Mapping[int, _Done], lines: Collection[int] | None) -> bool:
    """Whether a line to score comes before a line the output holds (a smoke run, then the
    full run): appended, its result would break the output's line order."""
    if not done:
        return False
    last = max(done)
    with source.open("rb") as handle:
        for number, _raw in numbered_lines(handle):
            if number >= last:
                return False
            if number not in done and (lines is None or number in lines):
                return True
    return False


async def _rewrite(
    scorer: Scorer,
    source: Path,
    output: Path,
    done: dict[int, _Done],
    concurrency: int,
    progress: ProgressFn | None,
    lines: Collection[int] | None,
    *,
    retry: bool,
) -> ScoreFileSummary:
    """A new output from the old one's results (their bytes untouched) and fresh results for
    its missing lines, in line order, renamed over it; with ``retry`` its failed lines are
    scored again too."""
    summary = ScoreFileSummary(skipped=0)
    # an output that is a symbolic link is rewritten where it points: renaming over the link
    # would replace it with a file and leave the failed results in its target
    target = Path(os.path.realpath(output))  # noqa: ASYNC240 - a stat before any work starts
    # the results keep the mode the output had (the temporary file is created 0600)
    mode = stat.S_IMODE(os.stat(target).st_mode)
    fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as sink, output.open("rb") as old:

            async def keep_old(keep: _Queue, number: int) -> None:
                entry = done[number]
                old.seek(entry.offset)
                data = old.read(entry.length)
                await keep(number, data if data.endswith(b"\n") else data + b"\n")

            async def feed(score: _Queue, keep: _Queue) -> None:
                # results of lines the input no longer holds (now blank) keep their place
                earlier = iter(sorted(done))
                waiting = next(earlier, None)
                seen: set[int] = set()
                with source.open("rb") as handle:
                    for number, raw in numbered_lines(handle):
                        while waiting is not None and waiting < number:
                            if waiting not in seen:
                                summary.transport_failed += done[waiting].transport
                                await keep_old(keep, waiting)
                            waiting = next(earlier, None)
                        seen.add(number)
                        entry = done.get(number)
                        chosen = lines is None or number in lines
                        if entry is not None and not (retry and entry.failed and chosen):
                            # a failed line outside the selection keeps its result
                            _same_item(output, number, entry, raw, retrying=retry and entry.failed)
                            summary.total_lines += 1
                            summary.skipped += 1
                            summary.transport_failed += entry.transport
                            await keep_old(keep, number)
                            continue
                        if entry is None and not chosen:
                            summary.left_out += 1
                            continue
                        summary.total_lines += 1
                        if entry is not None:
                            _same_item(output, number, entry, raw, retrying=True)
                            summary.retried += 1
                        await score(number, raw)
                while waiting is not None:
                    if waiting not in seen:
                        summary.transport_failed += done[waiting].transport
                        await keep_old(keep, waiting)
                    waiting = next(earlier, None)

            await _write_in_order(scorer, sink, feed, concurrency, summary, progress)
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    _sync_folder(target.parent)
    return summary


def _sync_folder(folder: Path) -> None:
    """Make a rename durable: the folder's entry is written with it."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - a folder that cannot be opened (Windows)
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - some file systems refuse fsync on a folder
        pass
    finally:
        os.close(fd)
