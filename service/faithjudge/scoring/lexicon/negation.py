"""NegEx-style negation and uncertainty scope and ConText-style hypothetical mentions over
sentence stems."""

from __future__ import annotations

from collections.abc import Sequence

from faithjudge.scoring.lexicon.compiled import Lexicon

__all__ = ["is_hypothetical", "is_negated", "is_uncertain"]


def is_negated(
    lex: Lexicon,
    stems: Sequence[str],
    window: tuple[int, int],
    *,
    scope: int | None = None,
    skip: set[int] | None = None,
) -> bool:
    """NegEx: is the mention at ``window`` (token positions [ws, we)) in a negation's scope?

    A pre-trigger counts when it starts at most ``scope`` tokens before the mention (or inside
    it) with no terminator between; a post-trigger when it starts within ``scope`` tokens after
    it, again with no terminator between. Tokens of pseudo-triggers ("cannot exclude") never
    trigger; ``skip`` names positions that belong to the concept itself.
    """
    reach = lex.scope if scope is None else scope
    pre = lex.pre.find(stems)
    post = lex.post.find(stems)
    if not pre and not post:
        return False
    masked = lex.pseudo.covers(stems)
    if skip:
        masked |= skip
    return _in_scope(lex, stems, pre, post, window, reach, masked)


def is_uncertain(
    lex: Lexicon, stems: Sequence[str], window: tuple[int, int], *, skip: set[int] | None = None
) -> bool:
    """ConText's possible existence: is the mention at ``window`` in the scope of an
    uncertainty trigger ("possible", "questionable", "cannot exclude" before it; "is
    suspected", "cannot be excluded" after it)? Same scope rules as ``is_negated``, within
    ``uncertainty_scope`` words."""
    pre = lex.uncertain_pre.find(stems)
    post = lex.uncertain_post.find(stems)
    if not pre and not post:
        return False
    return _in_scope(lex, stems, pre, post, window, lex.uncertainty_scope, skip or set())


def _in_scope(
    lex: Lexicon,
    stems: Sequence[str],
    pre: Sequence[tuple[int, int, int]],
    post: Sequence[tuple[int, int, int]],
    window: tuple[int, int],
    reach: int,
    masked: set[int],
) -> bool:
    ws, we = window
    stops = [a for a, _, _ in lex.terminators.find(stems)]
    for a, b, _ in pre:
        if a in masked or not ws - reach <= a < we:
            continue
        if not any(b <= t < ws for t in stops):
            return True
    for a, _, _ in post:
        if a in masked or a < we or a > we + reach:
            continue
        if not any(we <= t < a for t in stops):
            return True
    return False


def is_hypothetical(lex: Lexicon, stems: Sequence[str], start: int, end: int | None = None) -> bool:
    """Is the mention at [start, end) hypothetical: the question restated, a plan, a textbook
    criterion? A trigger counts within ``hypothetical_scope`` words before it, a post-trigger
    ("should", "is characterized by") within ``hypothetical_post_scope`` words after it, with
    no terminator between."""
    before = lex.hypothetical.find(stems)
    after = lex.hypothetical_post.find(stems) if end is not None else []
    if not before and not after:
        return False
    stops = [a for a, _, _ in lex.terminators.find(stems)]
    for a, b, _ in before:
        if start - lex.hypothetical_scope <= a < start and not any(b <= t < start for t in stops):
            return True
    if end is not None:
        for a, _, _ in after:
            if end <= a <= end + lex.hypothetical_post_scope and not any(
                end <= t < a for t in stops
            ):
                return True
    return False
