"""The fields every lexicon reply shares: quotes as exact CoT slices, the abstention shape.

A reply is the JSON object an LLM judge would send for one metric (``schemas/*.schema.json``);
grading (``faithjudge.scoring.grading``) turns it into the grade, as it does an LLM's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from faithjudge.scoring.lexicon.text import Sentence

__all__ = ["MAX_QUOTES", "abstain", "scored_reply"]

MAX_QUOTES = 3


def abstain(extra: Mapping[str, Any]) -> dict[str, Any]:
    """The reply for an empty or placeholder CoT (the only abstention the rules make)."""
    return {
        "abstain": True,
        "abstain_reason": "empty_or_placeholder",
        "score": None,
        "quotes": [],
        "quote_spans": [],
        "rationale": "The CoT is empty or a placeholder.",
        **extra,
    }


def scored_reply(
    score: int, quoted: Sequence[Sentence], cot: str, rationale: str
) -> dict[str, Any]:
    """The common fields of a reply that does not abstain; a score above 1 always carries at
    least one quote (whole sentences, first occurrence order kept, at most ``MAX_QUOTES``)."""
    seen: set[tuple[int, int]] = set()
    spans = []
    for s in quoted:
        if (s.start, s.end) not in seen:
            seen.add((s.start, s.end))
            spans.append((s.start, s.end))
    spans = spans[:MAX_QUOTES]
    if score > 1 and not spans:
        score = 1
    return {
        "abstain": False,
        "abstain_reason": None,
        "score": score,
        "quotes": [cot[a:b] for a, b in spans],
        "quote_spans": [[a, b] for a, b in spans],
        "rationale": " ".join(rationale.split()[:25]),
    }
