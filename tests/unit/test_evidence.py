"""Tests for faithjudge.scoring.evidence: tolerance arithmetic and quote location."""

from __future__ import annotations

import re

import pytest
from faithjudge.scoring import evidence
from faithjudge.scoring.evidence import DEFAULT_TOLERANCE, QuoteMatch, locate_quote, max_edits
from faithjudge.scoring.normalize import normalize, normalize_text
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from rapidfuzz.distance import Levenshtein

# --- max_edits --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("length", "tolerance", "expected"),
    [
        (0, DEFAULT_TOLERANCE, 0),
        (49, DEFAULT_TOLERANCE, 0),
        (50, DEFAULT_TOLERANCE, 1),
        (99, DEFAULT_TOLERANCE, 1),
        (100, DEFAULT_TOLERANCE, 2),
        (150, DEFAULT_TOLERANCE, 3),
        (350, DEFAULT_TOLERANCE, 7),
        (100, 0.29, 29),  # 0.29 * 100 == 28.999999999999996 in floats
        (100, 0.07, 7),
        (10, 0, 0),
        (3, 1, 3),
    ],
)
def test_max_edits(length: int, tolerance: float, expected: int) -> None:
    assert max_edits(length, tolerance) == expected


@pytest.mark.parametrize(
    ("length", "tolerance"), [(-1, 0.02), (10, -0.01), (10, float("nan")), (10, float("inf"))]
)
def test_max_edits_rejects_bad_input(length: int, tolerance: float) -> None:
    with pytest.raises(ValueError):
        max_edits(length, tolerance)


# --- spec examples ----------------------------------------------------------------------------

SENTENCE_50 = "The left costophrenic angle is blunted and hazy.ab"
SENTENCE_100 = (
    "There is increased opacity at the right lung base with loss of the hemidiaphragm outline."
    " Effusion!!"
)


def _cot(*parts: str) -> str:
    return "<think>\n  <step> Intro words here. </step>\n  <step> " + " ".join(parts) + " </step>"


def test_sentence_lengths() -> None:
    assert len(SENTENCE_50) == 50
    assert len(SENTENCE_100) == 100


def test_exact_quote_is_found_at_its_original_span() -> None:
    raw = _cot(SENTENCE_50)
    match = locate_quote(SENTENCE_50, normalize(raw))
    start = raw.index(SENTENCE_50)
    assert match == QuoteMatch(start, start + 50, 0)


def test_short_quote_needs_an_exact_match() -> None:
    quote = SENTENCE_50[:49]
    cot = normalize(_cot(SENTENCE_50))
    assert locate_quote(quote, cot) is not None
    one_off = quote[:10] + "X" + quote[11:]
    assert locate_quote(one_off, cot) is None


def test_fifty_characters_allow_one_edit() -> None:
    raw = _cot(SENTENCE_50)
    cot = normalize(raw)
    start = raw.index(SENTENCE_50)
    substituted = SENTENCE_50[:10] + "X" + SENTENCE_50[11:]
    assert locate_quote(substituted, cot) == QuoteMatch(start, start + 50, 1)
    two_off = substituted[:20] + "Y" + substituted[21:]
    assert locate_quote(two_off, cot) is None


def test_hundred_characters_allow_two_edits() -> None:
    raw = _cot(SENTENCE_100)
    cot = normalize(raw)
    two_off = SENTENCE_100[:5] + "X" + SENTENCE_100[6:40] + "Y" + SENTENCE_100[41:]
    match = locate_quote(two_off, cot)
    assert match is not None
    assert match.edits == 2
    assert raw[match.start : match.end] == SENTENCE_100
    three_off = two_off[:70] + "Z" + two_off[71:]
    assert locate_quote(three_off, cot) is None
    # The allowance follows the quote's own length: 99 characters allow only one edit.
    assert locate_quote(SENTENCE_100[:5] + SENTENCE_100[6:40] + SENTENCE_100[41:], cot) is None


def test_curly_and_straight_quotes_match() -> None:
    raw = _cot("The report says “no effusion” and ‘stable’ findings.")
    match = locate_quote("says \"no effusion\" and 'stable'", normalize(raw))
    assert match is not None
    assert match.edits == 0
    assert raw[match.start : match.end] == "says “no effusion” and ‘stable’"
    assert locate_quote("“no effusion”", normalize('It says "no effusion".')) is not None


def test_quote_across_newline_and_indentation() -> None:
    raw = "<step> The heart is\n        enlarged. </step>"
    match = locate_quote("The heart is enlarged.", normalize(raw))
    assert match is not None
    assert raw[match.start : match.end] == "The heart is\n        enlarged."
    # ... and the other way round: the quote's own line breaks do not matter either.
    assert locate_quote("heart\n is\tenlarged", normalize("The heart is enlarged.")) is not None


def test_unicode_in_the_cot_maps_back_to_whole_characters() -> None:
    raw = "A small ﬁnding…\u00a0noted\u200b here."
    match = locate_quote("finding... noted here", normalize(raw))
    assert match is not None
    assert raw[match.start : match.end] == "ﬁnding…\u00a0noted\u200b here"


@pytest.mark.parametrize("quote", ["", "   ", "\u200b", "\n\t"])
def test_empty_quote_is_not_evidence(quote: str) -> None:
    assert locate_quote(quote, normalize("some text")) is None


def test_quote_longer_than_the_cot_is_not_found() -> None:
    assert locate_quote("x" * 200, normalize("x" * 100)) is None
    assert locate_quote("anything at all", normalize("")) is None


def test_first_exact_occurrence_wins() -> None:
    raw = "opacity here. opacity there."
    assert locate_quote("opacity", normalize(raw)) == QuoteMatch(0, 7, 0)


def test_tolerance_is_a_parameter() -> None:
    cot = normalize("the quick brown fox jumps")
    assert locate_quote("the quick brwn fox", cot) is None
    match = locate_quote("the quick brwn fox", cot, tolerance=0.1)
    assert match == QuoteMatch(0, 19, 1)


# --- large alphabets (edlib takes at most 256 distinct symbols) -------------------------------

CJK = [chr(0x4E00 + i) for i in range(400)]


def test_large_text_alphabet_uses_a_stand_in_character() -> None:
    quote = "".join(CJK[100:160])  # 60 distinct characters, so 1 edit allowed
    raw = "".join(CJK[:100]) + " " + quote + " " + "".join(CJK[160:])
    edited = quote[:30] + "X" + quote[31:]
    match = locate_quote(edited, normalize(raw))
    assert match == QuoteMatch(101, 161, 1)


def test_large_quote_alphabet_uses_the_window_search() -> None:
    quote = "".join(CJK[:300])  # 300 distinct characters: 6 edits allowed
    raw = "abc " + quote + " def"
    edited = quote[:10] + quote[12:150] + "ZZ" + quote[150:]
    match = locate_quote(edited, normalize(raw))
    assert match is not None
    assert match.edits == 4
    assert (match.start, match.end) == (4, 304)


@settings(max_examples=60)
@given(
    st.text(alphabet="abcde", min_size=1, max_size=20),
    st.text(alphabet="abcdef", min_size=1, max_size=40),
    st.integers(min_value=0, max_value=3),
)
def test_window_search_agrees_with_edlib(query: str, target: str, k: int) -> None:
    assume(k < len(query))  # locate_quote never allows as many edits as the quote is long
    fast = evidence._edlib_search(query, target, k)
    slow = evidence._window_search(query, target, k)
    assert (fast is None) == (slow is None)
    if fast is not None and slow is not None:
        assert fast[0] == slow[0]
        assert Levenshtein.distance(query, target[fast[1] : fast[2]]) == fast[0]


# --- property tests ---------------------------------------------------------------------------

# Separators start with an ASCII character, so nothing in them composes with the word before.
SEPARATORS = [
    " ",
    "  ",
    "\n",
    "\n    ",
    ", ",
    ". ",
    "; ",
    " – ",
    " “",
    "” ",
    " ‘",
    "’ ",
    " \u00a0",
    " \u200b",
    "\t",
    " … ",
    " ① ",
    " Ａ ",
    " (\u00e9) ",
    " e\u0301 ",
    " \ufb01 ",
    "\r\n\r\n",
]
LETTERS = "abcdefghijklmnopqrstuvwxyz"
word = st.text(alphabet=LETTERS, min_size=6, max_size=10)


@st.composite
def cot_and_quote(draw: st.DrawFn) -> tuple[str, int, int]:
    """A CoT-like text and the original span of a run of whole words in it."""
    words = draw(st.lists(word, min_size=8, max_size=40))
    seps = draw(st.lists(st.sampled_from(SEPARATORS), min_size=len(words), max_size=len(words)))
    lead = draw(st.sampled_from(["", "  ", "\n", "<think> "]))
    pieces = [lead]
    spans = []
    pos = len(lead)
    for w, sep in zip(words, seps, strict=True):
        spans.append((pos, pos + len(w)))
        pieces += (w, sep)
        pos += len(w) + len(sep)
    first = draw(st.integers(min_value=0, max_value=len(words) - 1))
    last = draw(st.integers(min_value=first, max_value=len(words) - 1))
    return "".join(pieces), spans[first][0], spans[last][1]


def optimal_windows(query: str, text: str, k: int) -> tuple[int, set[tuple[int, int]]]:
    """Brute force: the best distance <= k of ``query`` to a substring, and every best window."""
    best = k + 1
    windows: set[tuple[int, int]] = set()
    for length in range(max(0, len(query) - k), min(len(text), len(query) + k) + 1):
        for start in range(len(text) - length + 1):
            d = Levenshtein.distance(query, text[start : start + length], score_cutoff=best)
            if d < best:
                best, windows = d, set()
            if d == best:
                windows.add((start, start + length))
    return best, windows


@settings(max_examples=150, deadline=None)
@given(cot_and_quote())
def test_exact_quote_between_word_boundaries_is_found_at_its_span(
    case: tuple[str, int, int],
) -> None:
    raw, start, end = case
    cot = normalize(raw)
    quote = raw[start:end]
    match = locate_quote(quote, cot)
    assert match is not None
    assert match.edits == 0
    q = normalize_text(quote)
    # Always true: what was found normalises to the quote.
    assert normalize_text(raw[match.start : match.end]) == q
    # With a single occurrence (overlapping ones counted) it can only be the span the quote was
    # cut from.
    if len(re.findall(f"(?={re.escape(q)})", cot.text)) == 1:
        assert (match.start, match.end) == (start, end)


EDIT_ALPHABET = "0123456789"  # disjoint from the words, so an edit never repairs itself


@st.composite
def edited_quote(draw: st.DrawFn) -> tuple[str, int, int, str, int]:
    """A quote cut from a CoT, edited; also returns its distance to the unedited quote."""
    raw, start, end = draw(cot_and_quote())
    q = normalize_text(raw[start:end])
    assume(len(q) >= 50)
    n_edits = draw(st.integers(min_value=1, max_value=max_edits(len(q))))
    edited = list(q)
    for _ in range(n_edits):
        op = draw(st.sampled_from(["sub", "ins", "del"]))
        i = draw(st.integers(min_value=0, max_value=len(edited) - 1))
        ch = draw(st.sampled_from(EDIT_ALPHABET))
        if op == "sub":
            edited[i] = ch
        elif op == "ins":
            edited.insert(i, ch)
        else:
            del edited[i]
    result = "".join(edited)
    # Measured, not assumed: deleting a whole word also collapses a double space.
    distance = Levenshtein.distance(normalize_text(result), q)
    assume(distance <= max_edits(len(normalize_text(result))))
    return raw, start, end, result, distance


# long enough quotes are a minority of cut quotes: the filtering is expected
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(edited_quote())
def test_edited_quote_is_found_at_a_best_window(case: tuple[str, int, int, str, int]) -> None:
    """Sound for any text: the quote was cut from the CoT and is ``n_edits`` <= allowed edits
    away from it, so a match exists with at most that many edits; the reported match must be
    one of the best windows that a brute-force search finds (its distance and its span).
    Whether it is the window the quote came from can only be asserted when every best window
    overlaps that one (repeated or near-identical words can make another window as good)."""
    raw, start, end, edited, n_edits = case
    cot = normalize(raw)
    q = normalize_text(edited)
    match = locate_quote(edited, cot)
    assert match is not None
    assert match.edits <= n_edits
    best, windows = optimal_windows(q, cot.text, max_edits(len(q)))
    assert match.edits == best
    assert (match.start, match.end) in {cot.to_original(a, b) for a, b in windows}
    mapped = [cot.to_original(a, b) for a, b in windows]
    if all(a < end and start < b for a, b in mapped):
        assert match.start < end
        assert start < match.end


@settings(max_examples=100, deadline=None)
@given(
    st.text(alphabet="abcdefghijklm \n", min_size=0, max_size=300),
    st.text(alphabet="nopqrstuvwxyz", min_size=20, max_size=120),
)
def test_unrelated_text_is_not_found(text: str, quote: str) -> None:
    # Disjoint alphabets: every character of the quote costs an edit, far more than allowed.
    assert locate_quote(quote, normalize(text)) is None
