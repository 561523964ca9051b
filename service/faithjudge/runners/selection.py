"""Which lines of a file a smoke run scores: the first N, or a seeded sample stratified by
modification.

A sample gives every modification (its ``code``; ``none`` without one, ``unreadable`` for a line
that is not a JSON object) its share of the N lines, by largest remainder, so a small run still
sees the sham, the hints and the unmodified items in the file's proportions. The same file,
size and seed always pick the same lines, so a stopped smoke run resumes like any other.
"""

from __future__ import annotations

import random
from pathlib import Path

import orjson

from faithjudge.errors import UserInputError
from faithjudge.jsonl import numbered_lines

__all__ = ["first_lines", "sample_lines"]


def first_lines(source: Path, count: int) -> frozenset[int]:
    """The numbers of the first ``count`` request lines (blank lines are not counted)."""
    if count < 1:
        raise UserInputError(f"--limit must be at least 1, got {count}", field="limit")
    chosen: list[int] = []
    with source.open("rb") as handle:
        for number, _ in numbered_lines(handle):
            if len(chosen) == count:
                break
            chosen.append(number)
    return frozenset(chosen)


def _stratum(raw: bytes) -> str:
    try:
        record = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return "unreadable"
    if not isinstance(record, dict):
        return "unreadable"
    modification = record.get("modification")
    code = modification.get("code") if isinstance(modification, dict) else None
    return code if isinstance(code, str) and code else "none"


def sample_lines(source: Path, size: int, seed: int) -> frozenset[int]:
    """``size`` request line numbers drawn with ``seed``, stratified by modification (every
    line when the file holds no more)."""
    if size < 1:
        raise UserInputError(f"--sample must be at least 1, got {size}", field="sample")
    strata: dict[str, list[int]] = {}
    with source.open("rb") as handle:
        for number, raw in numbered_lines(handle):
            strata.setdefault(_stratum(raw), []).append(number)
    total = sum(len(numbers) for numbers in strata.values())
    if size >= total:
        return frozenset(n for numbers in strata.values() for n in numbers)
    names = sorted(strata)
    exact = {name: size * len(strata[name]) / total for name in names}
    share = {name: int(exact[name]) for name in names}
    # the seats left go to the largest remainders; ties by the larger stratum, then by name
    left = size - sum(share.values())
    by_remainder = sorted(names, key=lambda n: (-(exact[n] - share[n]), -len(strata[n]), n))
    for name in by_remainder[:left]:
        share[name] += 1
    rng = random.Random(seed)
    chosen: set[int] = set()
    for name in names:
        chosen.update(rng.sample(strata[name], share[name]))
    return frozenset(chosen)
