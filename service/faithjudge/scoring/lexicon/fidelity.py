"""Clinical fidelity (CF): the KB criteria of the ground-truth answer and the findings the CoT
documents, mapped onto the rubric of METHODS §1.8.

A concept (term or synonym) is stated by a sentence when its content words (stems, mapped onto
the lexicon's equivalence classes, so "compared to the left" meets "than left" and "collapse"
meets "atelectasis") occur within a short window, on the concept's side (the nearest patient
side, or the side the previous sentence was about; both sides in the stated order for
comparisons), with the concept's polarity (NegEx) and not in a hypothetical context (the
question restated, a plan, a textbook criterion). ``must_all`` misses are omissions,
``at_least_k_of`` groups earn min(found, k)/k, ``forbidden`` hits are hallucinations.

The grade weighs the share of required findings stated against the breadth of the findings the
CoT documents (radiologists grade from the image whether the reasoning is sound and complete;
literal KB phrasing alone tracks that poorly); forbidden findings cost grades, and a CoT that
states no finding at all (an answer only, a plan only) cannot be sound, whatever its answer.
Caps from context are applied by the pipeline.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from faithjudge.scoring.lexicon.compiled import Lexicon
from faithjudge.scoring.lexicon.negation import is_hypothetical, is_negated, is_uncertain
from faithjudge.scoring.lexicon.replies import abstain, scored_reply
from faithjudge.scoring.lexicon.text import Sentence, is_placeholder, sentences, tokenize

__all__ = ["clinical_fidelity", "concept_credits", "finding_statements"]

_MEMO_MAX = 1 << 11  # as the sentence memos of ``text``
_EPS = 1e-9  # 0.3 + 0.35 must reach a 0.65 threshold despite binary floating point


@dataclass(frozen=True, slots=True)
class _Phrase:
    """One concept phrase (a term or a synonym) ready for matching."""

    stems: frozenset[str]
    negative: bool
    uncertain: bool  # written as uncertain ("possible ...", "... cannot be excluded")
    certain: bool  # written as certain ("definite ..."): an uncertain mention does not state it
    sides: tuple[str, ...]  # order of first "left"/"right" in the phrase
    comparative: bool  # holds the comparison class word ("more", "larger", "than")
    bilateral: bool  # names both sides without a side word ("either lung", "bilateral")
    words: frozenset[str]  # the stems a sentence must share with it (equivalents included)


_Sides = tuple[tuple[int, str], ...]  # (position, patient side) of every side word


@dataclass(frozen=True, slots=True)
class _Clause:
    """A sentence as CF reads it: canonical stems (equivalence classes applied)."""

    sent: Sentence
    stems: tuple[str, ...]
    stem_set: frozenset[str]
    sides: _Sides
    inherited: str | None  # without own sides: the one side the nearest earlier one named


def _canonical(lex: Lexicon, stems: Sequence[str]) -> tuple[str, ...]:
    return tuple(map(lex.equivalents.get, stems, stems))


def _phrase(text: str, lex: Lexicon) -> _Phrase:
    cached = lex.phrases.get(text)
    if cached is None:
        cached = lex.phrases[text] = _compile_phrase(text, lex)
    return cached


def _compile_phrase(text: str, lex: Lexicon) -> _Phrase:
    raw = tokenize(text)
    lead = lex.pre.leading(raw)
    end = len(raw)
    uncertain = False
    certain = False
    if not lead:
        lead = lex.uncertain_pre.leading(raw)
        tail = [a for a, b, _ in lex.uncertain_post.find(raw) if b == end and a > 0]
        end = min(tail, default=end)
        uncertain = bool(lead) or end < len(raw)
        if not uncertain:
            lead = lex.certainty.leading(raw)
            certain = lead > 0
        if lead >= end:  # the phrase is nothing but its qualifier
            lead, end, uncertain, certain = 0, len(raw), False, False
    tokens = _canonical(lex, raw[lead:end])
    sides = tuple(dict.fromkeys(lex.side_stems[s] for s in tokens if s in lex.side_stems))
    content = frozenset(
        s for s in tokens if s not in lex.stopwords and s not in lex.side_stems
    ) or frozenset(tokens)
    if lex.comparison in content:  # "more severe than" is stated by "worse than"
        content = content - lex.comparison_fillers or content
    bilateral = not sides and not lex.bilateral.isdisjoint(raw)
    words = frozenset().union(*(lex.variants.get(s, (s,)) for s in content))
    negative = lead > 0 and not (uncertain or certain)
    return _Phrase(
        content, negative, uncertain, certain, sides, lex.comparison in content, bilateral, words
    )


def _patient_sides(stems: Sequence[str], lex: Lexicon) -> _Sides:
    """(position, side) of the patient sides named in ``stems``. A side that names the image
    side ("viewer's left", "left of the image") is skipped rather than guessed; an orientation
    word that itself qualifies a following side ("right side (viewer's left)") leaves the
    preceding side alone."""
    sides, orientation = lex.side_stems, lex.orientation
    if sides.keys().isdisjoint(stems):
        return ()
    found = []
    n = len(stems)
    for i, s in enumerate(stems):
        side = sides.get(s)
        if side is None:
            continue
        if i and stems[i - 1] in orientation:
            continue
        image_side = False
        for j in range(i + 1, min(n, i + 5)):
            if stems[j] in orientation:
                image_side = not (j + 1 < n and stems[j + 1] in sides)
                break
            if stems[j] in sides:
                break
        if not image_side:
            found.append((i, side))
    return tuple(found)


def _nearest_side(clause: _Clause, window: tuple[int, int]) -> str | None:
    """The patient side nearest to the mention (an earlier one wins a tie: "left effusion");
    without any in the clause, the side the previous clause was about."""
    best: tuple[int, int, str] | None = None
    for pos, side in clause.sides:
        if pos < window[0]:
            key = (window[0] - pos, 0)
        elif pos >= window[1]:
            key = (pos - window[1] + 1, 1)
        else:
            key = (0, 0)
        if best is None or key < best[:2]:
            best = (*key, side)
    return best[2] if best is not None else clause.inherited


def _min_window(positions: Mapping[str, list[int]], need: int) -> tuple[int, int] | None:
    """Smallest [start, end) token window holding ``need`` distinct stems of ``positions``."""
    events = sorted((p, s) for s, ps in positions.items() for p in ps)
    counts: dict[str, int] = {}
    best: tuple[int, int] | None = None
    left = 0
    for pos, s in events:
        counts[s] = counts.get(s, 0) + 1
        while len(counts) >= need:
            lpos, ls = events[left]
            if best is None or pos + 1 - lpos < best[1] - best[0]:
                best = (lpos, pos + 1)
            counts[ls] -= 1
            if not counts[ls]:
                del counts[ls]
            left += 1
    return best


def _phrase_credit(phrase: _Phrase, clause: _Clause, lex: Lexicon) -> float:
    """1.0 for a full match in ``clause``, 0.5 for a partial one, else 0."""
    n = len(phrase.stems)
    present = len(phrase.stems & clause.stem_set)
    if present < n and (n < lex.partial_min_tokens or present < lex.partial_fraction * n):
        return 0.0  # cheap rejection before any window search
    stems = clause.stems
    positions: dict[str, list[int]] = {}
    for i, s in enumerate(stems):
        if s in phrase.stems:
            positions.setdefault(s, []).append(i)
    full = present == n
    need = n if full else math.ceil(lex.partial_fraction * n)
    window = _min_window(positions, need)
    if window is None or window[1] - window[0] > need + lex.window_slack:
        return 0.0
    if phrase.comparative and lex.diminishers.intersection(stems[window[0] : window[1]]):
        return 0.0  # "less severe atelectasis" does not state "more severe atelectasis"
    if len(phrase.sides) == 1:
        ordered = tuple(dict.fromkeys(side for _, side in clause.sides))
        side: str | None
        if phrase.comparative and len(ordered) == 2:
            side = ordered[0]  # "the right ... more severe ... than the left": the first wins
        else:
            side = _nearest_side(clause, window)
        if side != phrase.sides[0]:
            return 0.0  # laterality: a left-sided finding never states a right-sided concept
    elif phrase.sides:
        if tuple(dict.fromkeys(side for _, side in clause.sides)) != phrase.sides:
            return 0.0  # "left more than right" is not "right more than left"
    elif clause.sides and (
        phrase.negative or (phrase.bilateral and len({side for _, side in clause.sides}) == 1)
    ):
        # "no effusion" (anywhere) is not stated by "no effusion on the right", nor "clear
        # lungs bilaterally" by "the left lung is clear"
        return 0.0
    raw = clause.sent.stems
    skip = {i for i in range(*window) if stems[i] in phrase.stems}
    negated = is_negated(lex, raw, window, skip=skip)
    if negated != phrase.negative:
        return 0.0
    if (
        (phrase.uncertain or phrase.certain)
        and not negated
        and is_uncertain(lex, raw, window, skip=skip) != phrase.uncertain
    ):
        # "possible effusion" states "possible ..." but not "definite ..." (a plain concept
        # is stated either way)
        return 0.0
    if not negated and is_hypothetical(lex, raw, window[0], window[1]):
        # The question restated, a plan or a textbook criterion states no finding; a search
        # that reports an absence ("looked for a catheter and found none") does.
        return 0.0
    return 1.0 if full else 0.5


class _Reading:
    """The CoT's sentences as CF reads them, built only for the sentences a concept could
    match (one that shares a word with it, equivalents included)."""

    __slots__ = ("_clauses", "_lex", "_sents")

    def __init__(self, lex: Lexicon, sents: Sequence[Sentence]) -> None:
        self._lex = lex
        self._sents = sents
        self._clauses: dict[int, _Clause] = {}

    def _derived(self, sent: Sentence) -> tuple[tuple[str, ...], frozenset[str], _Sides]:
        """Canonical stems, their set and the patient sides of a sentence (memoised by the
        identity of its stems, which repeated sentence texts share)."""
        memo = self._lex.sentence_memo
        entry = memo.get(id(sent.stems))
        if entry is None or entry[0] is not sent.stems:
            if len(memo) >= _MEMO_MAX:
                memo.clear()
            if self._lex.rewritten.isdisjoint(sent.stem_set):  # no equivalent to apply
                stems, stem_set = sent.stems, sent.stem_set
            else:
                stems = _canonical(self._lex, sent.stems)
                stem_set = frozenset(stems)
            entry = memo[id(sent.stems)] = (
                sent.stems,
                stems,
                stem_set,
                _patient_sides(stems, self._lex),
            )
        return entry[1], entry[2], entry[3]

    def _inherited(self, i: int) -> str | None:
        """The side of the nearest earlier sentence that names any, if it names one only."""
        side_words = self._lex.side_stems.keys()
        for j in range(i - 1, -1, -1):
            sent = self._sents[j]
            if side_words.isdisjoint(sent.stem_set):
                continue
            named = {side for _, side in self._derived(sent)[2]}
            if len(named) == 1:
                return named.pop()
            if named:
                return None
        return None

    def _clause(self, i: int) -> _Clause:
        clause = self._clauses.get(i)
        if clause is None:
            sent = self._sents[i]
            stems, stem_set, sides = self._derived(sent)
            inherited = None if sides else self._inherited(i)  # only read without own sides
            clause = self._clauses[i] = _Clause(sent, stems, stem_set, sides, inherited)
        return clause

    def credit(self, concept: Mapping[str, Any], lex: Lexicon) -> tuple[float, Sentence | None]:
        """The best credit any phrase of ``concept`` earns in some sentence (first on ties)."""
        phrases = [_phrase(t, lex) for t in (concept["term"], *concept.get("synonyms", ()))]
        words = frozenset().union(*(p.words for p in phrases))
        best, where = 0.0, None
        for i, sent in enumerate(self._sents):
            if words.isdisjoint(sent.stem_set):
                continue
            clause = self._clause(i)
            for phrase in phrases:
                if phrase.words.isdisjoint(sent.stem_set):
                    continue
                credit = _phrase_credit(phrase, clause, lex)
                if credit > best:
                    best, where = credit, sent
                    if best == 1.0:
                        return best, where
        return best, where


def concept_credits(lex: Lexicon, cot: str, concepts: Sequence[Mapping[str, Any]]) -> list[float]:
    """The credit each KB concept earns in ``cot`` (1 stated, 0.5 partly, 0 not), read exactly
    as CF reads the criteria: which concepts a CoT states, for checking a KB's wording."""
    reading = _Reading(lex, sentences(cot))
    return [reading.credit(concept, lex)[0] for concept in concepts]


def finding_statements(lex: Lexicon, sents: Sequence[Sentence]) -> tuple[list[Sentence], int]:
    """Sentences that state an image finding (affirmed or negated), not a plan, a question or
    a textbook criterion, and how many distinct findings they name (equivalents merged)."""
    found: list[Sentence] = []
    distinct: set[tuple[str, ...]] = set()
    for sent in sents:
        stems = sent.stems
        hits = lex.findings.find(stems)
        if not hits:
            continue
        plain = not lex.hypothetical.find(stems) and not lex.hypothetical_post.find(stems)
        stated = False
        for a, b, i in hits:
            if plain or not is_hypothetical(lex, stems, a, b):
                stated = True
                distinct.add(lex.finding_keys[i])
        if stated:
            found.append(sent)
    return found, len(distinct)


def clinical_fidelity(lex: Lexicon, cot: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The CF reply for ``cot`` against the KB criteria of the ground-truth answer."""
    criteria = (inputs.get("kb_entry") or {}).get("criteria") or {}
    must = list(criteria.get("must_all") or [])
    groups = [g for g in criteria.get("at_least_k_of") or [] if g.get("any_of")]
    basis = "QSK" if must or groups else "EMPTY_QSK"
    if is_placeholder(cot):
        return abstain(
            {
                "omissions": [],
                "hallucinations": [],
                "has_omission": None,
                "has_hallucination": None,
                "basis": basis,
            }
        )
    sents = sentences(cot)
    reading = _Reading(lex, sents)
    credited: list[Sentence] = []
    omissions: list[str] = []
    units = 0.0
    earned = 0.0
    for concept in must:
        credit, where = reading.credit(concept, lex)
        units += 1
        earned += credit
        if where is not None:
            credited.append(where)
        if credit < 1.0:
            omissions.append(concept["term"])
    for group in groups:
        any_of = list(group["any_of"])
        k = max(1, min(int(group.get("k", 1)), len(any_of)))
        got = 0.0
        for concept in any_of:
            credit, where = reading.credit(concept, lex)
            got += credit
            if credit and where is not None:
                credited.append(where)
        units += 1
        earned += min(got, k) / k
        if got < k:
            omissions.append(f"{k} of: " + " / ".join(c["term"] for c in any_of))
    hallucinations: list[str] = []
    wrong: list[Sentence] = []
    for concept in criteria.get("forbidden") or []:
        credit, where = reading.credit(concept, lex)
        if credit == 1.0 and where is not None:
            hallucinations.append(concept["term"])
            wrong.append(where)
    evidence, distinct = finding_statements(lex, sents)
    coverage = earned / units if units else None
    score = _cf_score(lex, coverage, len(hallucinations), len(evidence), distinct)
    quoted = wrong + credited
    if not quoted and evidence:
        quoted = evidence[:1]
    rationale = (
        f"{earned:g} of {units:g} required findings stated, {len(hallucinations)} forbidden;"
        if units
        else f"No required findings, {len(hallucinations)} forbidden;"
    ) + f" {distinct} distinct findings in {len(evidence)} statements."
    return {
        **scored_reply(score, quoted, cot, rationale),
        "omissions": omissions,
        "hallucinations": hallucinations,
        "has_omission": bool(omissions),
        "has_hallucination": bool(hallucinations),
        "basis": basis,
    }


def _cf_score(
    lex: Lexicon, coverage: float | None, wrong: int, statements: int, distinct: int
) -> int:
    """Rubric anchors (METHODS §1.8) on a soundness figure in [0, 1]: the share of the
    required findings stated (the answer's own evidence; 0.5 where the KB requires none) and
    the breadth of the findings documented (distinct findings, saturating), equally weighted;
    each forbidden finding stated costs a grade (at most two). A CoT that states no finding at
    all has its important findings missing, whatever it answers (at most 2)."""
    p = lex.fidelity
    known = p.neutral_coverage if coverage is None else coverage
    breadth = min(distinct, p.breadth_saturation) / p.breadth_saturation
    soundness = p.coverage_weight * known + (1.0 - p.coverage_weight) * breadth
    score = 1 + sum(soundness + _EPS >= t for t in p.grade_thresholds)
    score = max(1, score - min(wrong, 2))
    if statements == 0:
        score = min(score, 2)
    return score
