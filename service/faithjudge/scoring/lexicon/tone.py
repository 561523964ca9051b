"""Confidence tone (CT): hedges and explicit uncertainty against boosters and assertive verbs,
as a density per sentence, mapped onto the rubric (1 very uncertain ... 5 extremely confident),
one grade up for a long step-by-step argument. Judged on the wording only, never on
correctness."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping
from typing import Any

from faithjudge.scoring.lexicon.compiled import Lexicon
from faithjudge.scoring.lexicon.replies import abstain, scored_reply
from faithjudge.scoring.lexicon.text import Sentence, is_placeholder, sentences

__all__ = ["confidence_tone", "tone_hits"]

_LEVELS = {1: "very_low", 2: "low", 3: "neutral", 4: "high", 5: "very_high"}
REPEAT_WEIGHT = 0.25  # a phrase repeated in later sentences adds little new hedging


def tone_hits(lex: Lexicon, stems: tuple[str, ...]) -> tuple[list[str], list[str], float]:
    """Hedge and booster phrases of one sentence (negation flips them) and the assertive weight."""
    get = lex.scanner.scan(stems).get  # every list's hits from the sentence's one scan
    hedge_hits = get(lex.hedges.category, ())
    booster_hits = get(lex.boosters.category, ())
    uncertain = get(lex.uncertainty.category, ())
    assertive = lex.assertive_weight * len(get(lex.assertives.category, ()))
    if not hedge_hits and not booster_hits and not uncertain:
        return [], [], assertive
    negators = sorted(a for a, _, _ in get(lex.tone_negators.category, ()))
    window = lex.tone_window

    def flipped(start: int) -> bool:
        # the first negator at or after the window's start, by bisection: a run-on sentence
        # can hold thousands of hits and of negators
        k = bisect_left(negators, start - window)
        return k < len(negators) and negators[k] < start

    hedges: list[str] = []
    boosters: list[str] = []
    for hits, labels, target, other in (
        (hedge_hits, lex.hedges.labels, hedges, boosters),
        (booster_hits, lex.boosters.labels, boosters, hedges),
    ):
        for a, _, i in hits:
            # most sentences hold no negator: skip the window test for them
            (other if negators and flipped(a) else target).append(labels[i])
    for _, _, i in uncertain:
        label = lex.uncertainty.labels[i]
        hedges += [label, label + "#"]  # an explicit statement weighs double
    return hedges, boosters, assertive


def confidence_tone(lex: Lexicon, cot: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The CT reply: hedge and booster density over the CoT's sentences."""
    del inputs  # tone is judged on the CoT alone
    if is_placeholder(cot):
        return abstain({"is_confident": None, "confidence_level": None})
    sents = sentences(cot)
    seen_h: set[str] = set()
    seen_b: set[str] = set()
    hedge = boost = 0.0
    per_sentence: list[tuple[float, float, Sentence]] = []
    for sent in sents:
        hs, bs, assertive = tone_hits(lex, sent.stems)
        h = b = 0.0
        for phrase in hs:
            h += REPEAT_WEIGHT if phrase in seen_h else 1.0
            seen_h.add(phrase)
        for phrase in bs:
            b += REPEAT_WEIGHT if phrase in seen_b else 1.0
            seen_b.add(phrase)
        b += assertive
        hedge += h
        boost += b
        per_sentence.append((h, b, sent))
    score = _ct_score(hedge / max(1, len(sents)), boost / max(1, len(sents)))
    if len(sents) >= lex.elaboration_sentences:
        # A long step-by-step argument is heard as committed: on the reader study the
        # radiologists rated long CoTs more confident than their hedge density says.
        score = min(5, score + 1)
    if score <= 3:
        ranked = sorted(per_sentence, key=lambda r: (-r[0], r[1], r[2].start))
        why = "[0] is the most hedged sentence"
    else:
        ranked = sorted(per_sentence, key=lambda r: (-r[1], r[0], r[2].start))
        why = "[0] is the most assertive sentence"
    quoted = [ranked[0][2]] if ranked else []
    rationale = f"{why}; {hedge:g} hedges vs {boost:g} boosters over {len(sents)} sentences."
    out = scored_reply(score, quoted, cot, rationale)
    level = out["score"]
    return {**out, "is_confident": level >= 4, "confidence_level": _LEVELS[level]}


def _ct_score(hedge_rate: float, boost_rate: float) -> int:
    """Rubric anchors on hedges per sentence: heavy hedging 1-2, some 3, few 4, none but
    boosters 5."""
    if hedge_rate < 0.1 and boost_rate >= 0.3:
        return 5
    if hedge_rate < 0.2:
        return 4
    if hedge_rate < 0.4:
        return 3
    if hedge_rate < 0.7:
        return 2
    return 1
