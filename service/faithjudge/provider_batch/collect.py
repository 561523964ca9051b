"""The judge requests of an input, as Batch API lines: what the file route stages, what
``judge-requests export`` writes and what a job's provider phase keys its ledger by.

Each request is built exactly as the live route would build it (``Scorer.judge_requests``, the
backend's ``request_body``) under the live route's cache key, so an answer that comes back
through a batch is read where the live route would have stored it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from faithjudge_client.lines import ScoreRequest

from faithjudge.jsonl import numbered_lines
from faithjudge.judges.base import JudgeRequest
from faithjudge.pipeline.request_lines import parse_line
from faithjudge.pipeline.scorer import Scorer
from faithjudge.provider_batch.wire import request_line
from faithjudge.transport.cache import cache_key

__all__ = ["BadLineFn", "CollectStats", "collect_requests", "keyed_requests", "read_requests"]


@dataclass(slots=True)
class CollectStats:
    requests: int = 0
    cached: int = 0
    in_ledger: int = 0
    kept_failures: int = 0  # failed for good earlier in the same run: not asked again
    staged: int = 0
    items: int = 0  # readable request lines of the input
    bad_lines: int = 0  # non-blank input lines that are not a readable request


BadLineFn = Callable[[int, str], None]
"""Called with (line number, reason naming the line) for each unreadable input line."""


def read_requests(
    source: Path, stats: CollectStats | None = None, on_bad_line: BadLineFn | None = None
) -> Iterator[ScoreRequest]:
    """The readable requests of ``source``, read line by line as ``faithjudge score`` reads them;
    a bad line is passed to ``on_bad_line`` with the reason ``score`` would give."""
    with source.open("rb") as handle:
        for number, raw in numbered_lines(handle):
            parsed = parse_line(raw, number)
            if isinstance(parsed, ScoreRequest):
                if stats is not None:
                    stats.items += 1
                yield parsed
                continue
            if stats is not None:
                stats.bad_lines += 1
            if on_bad_line is not None:
                detail = parsed.error.detail if parsed.error else None
                on_bad_line(number, detail or f"line {number}: unreadable")


def keyed_requests(
    scorer: Scorer, requests: Iterable[ScoreRequest]
) -> Iterator[tuple[str, JudgeRequest]]:
    """(cache key, judge request) of every cacheable judge request of ``requests``."""
    judge = scorer.caller.judge
    for item in requests:
        for request in scorer.judge_requests(item):
            material = judge.cache_key_material(request)
            if material is not None:
                yield cache_key(material), request


def collect_requests(
    scorer: Scorer,
    body_of: Callable[[JudgeRequest], Mapping[str, Any]],
    requests: Iterable[ScoreRequest],
    *,
    skip: Callable[[str], str | None],
    stats: CollectStats,
) -> Iterator[tuple[str, bytes]]:
    """(key, Batch API line) of each judge request of ``requests`` that ``skip(key)`` keeps.

    ``skip`` answers ``"cached"``, ``"failed"`` (a failure for good kept), another reason, or
    None to keep; it is asked lazily, so it may look at what the caller staged so far.
    """
    for key, request in keyed_requests(scorer, requests):
        stats.requests += 1
        reason = skip(key)
        if reason == "cached":
            stats.cached += 1
        elif reason == "failed":
            stats.kept_failures += 1
        elif reason:
            stats.in_ledger += 1
        else:
            stats.staged += 1
            yield key, request_line(key, body_of(request))
