"""Evidence check: find a quoted string in a CoT within a small edit distance (METHODS §1.10).

A quote ``q`` counts as evidence when some substring of the normalised CoT is within
Levenshtein distance ``floor(tolerance * len(q))`` of the normalised quote (semi-global
alignment: the quote is aligned whole, the CoT may be entered and left anywhere). With the
default 2 % a quote shorter than 50 characters needs an exact match.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import edlib
from rapidfuzz.distance import Levenshtein

from faithjudge.scoring.normalize import NormalizedText, normalize_text

__all__ = ["DEFAULT_TOLERANCE", "QuoteMatch", "locate_quote", "max_edits"]

DEFAULT_TOLERANCE = 0.02

# edlib encodes each distinct character of query and target as one byte.
_EDLIB_ALPHABET = 256


@lru_cache(maxsize=64)
def _exact_fraction(tolerance: float) -> Fraction:
    # The shortest repr of a float is the decimal the caller wrote (0.02 -> "0.02"), so the
    # product is exact: 0.02 * 50 is 1, not 1.0000000000000000208 or 0.9999999999999999.
    return Fraction(repr(tolerance))


def max_edits(quote_len: int, tolerance: float = DEFAULT_TOLERANCE) -> int:
    """Edits allowed for a quote of ``quote_len`` characters: ``floor(tolerance * quote_len)``.

    Computed in exact decimal arithmetic, so ``max_edits(50) == 1`` and
    ``max_edits(100, 0.29) == 29``.

    Raises:
        ValueError: ``quote_len`` is negative or ``tolerance`` is not a finite number >= 0.
    """
    if quote_len < 0:
        raise ValueError(f"quote_len must be >= 0, got {quote_len}")
    if not (isinstance(tolerance, int | float) and math.isfinite(tolerance) and tolerance >= 0):
        raise ValueError(f"tolerance must be a finite number >= 0, got {tolerance!r}")
    return _floor_product(quote_len, float(tolerance))


@lru_cache(maxsize=4096)
def _floor_product(quote_len: int, tolerance: float) -> int:
    # cached: Fraction arithmetic costs more than the exact search it guards
    return math.floor(_exact_fraction(tolerance) * quote_len)


@dataclass(frozen=True, slots=True)
class QuoteMatch:
    """Where a quote was found: the half-open span ``[start, end)`` of the ORIGINAL CoT text
    and the edit distance between the normalised quote and the matched normalised text."""

    start: int
    end: int
    edits: int


def _edlib_search(query: str, target: str, k: int) -> tuple[int, int, int] | None:
    """Best semi-global match of ``query`` in ``target`` with at most ``k`` edits.

    Returns ``(distance, start, end)`` with ``end`` exclusive, for the first best location.
    """
    result = edlib.align(query, target, mode="HW", task="locations", k=k)
    distance = result["editDistance"]
    if not 0 <= distance <= k or not result["locations"]:
        return None
    start, last = result["locations"][0]
    start = 0 if start is None else start
    return distance, start, max(start, last + 1)


def _window_search(query: str, target: str, k: int) -> tuple[int, int, int] | None:
    """Exact fallback for alphabets edlib cannot take: try every window that could match.

    A substring within ``k`` edits of ``query`` has a length within ``k`` of ``len(query)``,
    so checking those windows at every start is complete. Ties go to the smallest end, then
    the largest start, like edlib's first location.
    """
    m, n = len(query), len(target)
    best: tuple[int, int, int] | None = None  # (distance, end, -start)
    for length in range(max(1, m - k), min(n, m + k) + 1):
        for start in range(n - length + 1):
            cutoff = k if best is None else best[0]
            d = Levenshtein.distance(query, target[start : start + length], score_cutoff=cutoff)
            if d > cutoff:
                continue
            key = (d, start + length, -start)
            if best is None or key < best:
                best = key
    if best is None:
        return None
    distance, end, neg_start = best
    return distance, -neg_start, end


def _search(query: str, target: str, k: int) -> tuple[int, int, int] | None:
    """Semi-global search with edlib, reducing the alphabet when it is too large for it."""
    if query.isascii() and target.isascii():
        return _edlib_search(query, target, k)
    query_chars = set(query)
    if len(query_chars | set(target)) <= _EDLIB_ALPHABET:
        return _edlib_search(query, target, k)
    if len(query_chars) < _EDLIB_ALPHABET:
        # Only equality with a query character matters to the edit distance, so every other
        # character of the target can become one stand-in that equals nothing in the query.
        stand_in = next(chr(c) for c in range(len(query_chars) + 1) if chr(c) not in query_chars)
        target = "".join(c if c in query_chars else stand_in for c in target)
        return _edlib_search(query, target, k)
    return _window_search(query, target, k)


def _candidate_windows(query: str, text: str, k: int) -> list[tuple[int, int]]:
    """Disjoint, sorted spans of ``text`` that contain every substring within ``k`` edits.

    Pigeonhole: cut the query into k + 1 pieces; k edits leave at least one piece untouched,
    so it occurs verbatim inside any match. A match holding piece ``j`` (at query offset
    ``o``) found at text offset ``p`` starts in ``[p - o - k, p - o + k]`` and is at most
    ``len(query) + k`` long.
    """
    m, n = len(query), len(text)
    size = m // (k + 1)
    windows: list[tuple[int, int]] = []
    for j in range(k + 1):
        offset = j * size
        piece = query[offset : m if j == k else offset + size]
        p = text.find(piece)
        while p != -1:
            windows.append((max(0, p - offset - k), min(n, p - offset + m + 2 * k)))
            p = text.find(piece, p + 1)
    windows.sort()
    merged: list[tuple[int, int]] = []
    for lo, hi in windows:
        if merged and lo <= merged[-1][1]:
            if hi > merged[-1][1]:
                merged[-1] = (merged[-1][0], hi)
        else:
            merged.append((lo, hi))
    return merged


def _approximate(query: str, text: str, k: int) -> tuple[int, int, int] | None:
    """Best match within ``k`` edits (``(distance, start, end)``), the first of equal ones."""
    best: tuple[int, int, int] | None = None
    for lo, hi in _candidate_windows(query, text, k):
        found = _search(query, text[lo:hi], k if best is None else best[0] - 1)
        if found is not None:
            # Windows are disjoint and in order, so only a strictly better match replaces one
            # found earlier; that keeps the match that ends first among equal ones.
            best = (found[0], found[1] + lo, found[2] + lo)
            if best[0] == 0:
                break
    return best


def locate_quote(
    quote: str, cot: NormalizedText, *, tolerance: float = DEFAULT_TOLERANCE
) -> QuoteMatch | None:
    """Find ``quote`` in the normalised CoT, allowing ``max_edits(len(q), tolerance)`` edits.

    The quote is normalised with :func:`normalize_text` first; its length ``len(q)`` is that of
    the normalised quote. An exact occurrence wins (``edits == 0``, the first one); otherwise
    the best approximate match, the one ending first among equally good ones. The span is
    mapped back to ``cot.original`` with :meth:`NormalizedText.to_original`.

    Returns None for an empty (after normalisation) quote or when no substring is close
    enough.

    Raises:
        ValueError: ``tolerance`` is not in ``[0, 1)`` (at 1 or more any quote would match).
    """
    if not 0 <= tolerance < 1:
        raise ValueError(f"tolerance must be in [0, 1), got {tolerance!r}")
    q = normalize_text(quote)
    if not q:
        return None
    text = cot.text
    i = text.find(q)
    if i >= 0:
        return QuoteMatch(*cot.to_original(i, i + len(q)), 0)
    k = max_edits(len(q), tolerance)
    # Any substring is at least len(q) - len(text) edits away from q.
    if k == 0 or not text or len(q) > len(text) + k:
        return None
    found = _approximate(q, text, k)
    if found is None:
        return None
    distance, start, end = found
    return QuoteMatch(*cot.to_original(start, end), distance)
