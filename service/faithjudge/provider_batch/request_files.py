"""Batch API files for an engine of the user's own (``faithjudge judge-requests``).

``export_requests`` writes the request lines of every uncached judge request of an input (the
lines the file route would stage); ``import_responses`` caches the answers of the engine's
output file, and only answers that carry message content, so a later run reads them as it
would the live route's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from faithjudge.errors import ConfigError
from faithjudge.jsonl import numbered_lines
from faithjudge.pipeline.scorer import Scorer
from faithjudge.provider_batch.collect import (
    BadLineFn,
    CollectStats,
    collect_requests,
    read_requests,
)
from faithjudge.provider_batch.wire import outcome_of_line
from faithjudge.transport.cache import ResponseCache

__all__ = ["ImportStats", "export_requests", "import_responses"]


def export_requests(
    scorer: Scorer, source: Path, sink: IO[bytes], *, on_bad_line: BadLineFn | None = None
) -> CollectStats:
    """Write the Batch API line of every uncached request of ``source`` to ``sink``.

    Each unreadable input line is passed to ``on_bad_line``; ``items`` and ``bad_lines`` of the
    stats count the readable and the unreadable lines.
    """
    judge = scorer.caller.judge
    body_of = getattr(judge, "request_body", None)
    if body_of is None:
        raise ConfigError(
            f"judge {judge.id} has no chat-completions body to export: "
            "use openai:MODEL or openai-batch:MODEL"
        )
    cache = scorer.caller.cache
    seen: set[str] = set()
    stats = CollectStats()

    def skip(key: str) -> str | None:
        if cache is not None and cache.get(key) is not None:
            return "cached"
        if key in seen:
            return "duplicate"
        seen.add(key)
        return None

    requests = read_requests(source, stats, on_bad_line)
    for _key, line in collect_requests(scorer, body_of, requests, skip=skip, stats=stats):
        sink.write(line)
    return stats


_MAX_NOTES = 20  # messages kept per kind; every line is counted


@dataclass(slots=True)
class ImportStats:
    """What ``import_responses`` did with a Batch API output file."""

    lines: int = 0  # non-blank lines
    stored: int = 0  # answers with message content, cached
    failed: int = 0  # requests that failed, or answered without content: not cached
    bad_lines: int = 0  # lines that are not an output line
    problems: list[str] = field(default_factory=list)  # bad lines (the first few)
    failures: list[str] = field(default_factory=list)  # failed requests (the first few)


def _note(notes: list[str], message: str) -> None:
    if len(notes) < _MAX_NOTES:
        notes.append(message)


def import_responses(lines: Iterable[bytes], cache: ResponseCache) -> ImportStats:
    """Load a Batch API output file into the cache.

    Only an answer is cached: a line whose request failed, or whose completion carries no
    message content (``outcome_of_line``), stays uncached, so a later run asks again.
    """
    stats = ImportStats()
    for number, raw in numbered_lines(lines):
        stats.lines += 1
        try:
            outcome = outcome_of_line(raw)
        except ValueError as exc:
            stats.bad_lines += 1
            _note(stats.problems, f"line {number}: {exc}")
            continue
        if outcome.response is not None:
            cache.put(outcome.key, outcome.response)
            stats.stored += 1
            continue
        stats.failed += 1
        reason = outcome.error or "the request failed"
        if outcome.status is not None and not reason.startswith("HTTP"):
            reason = f"HTTP {outcome.status}: {reason}"
        _note(stats.failures, f"line {number}: {reason}")
    cache.flush()
    return stats
