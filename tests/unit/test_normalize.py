"""Tests for faithjudge.scoring.normalize: the §1.10 pipeline and the offset map."""

from __future__ import annotations

import sys
import unicodedata
from itertools import pairwise

import pytest
from faithjudge.scoring.normalize import NormalizedText, normalize, normalize_text
from hypothesis import example, given, settings
from hypothesis import strategies as st

# The METHODS §1.10 steps written out literally (whole-text NFKC), as an independent reference.
_REFERENCE_TABLE = {
    **dict.fromkeys(map(ord, "‘’‚‛"), "'"),
    **dict.fromkeys(map(ord, "“”„‟"), '"'),
    **dict.fromkeys(map(ord, "\u00a0\u202f\u2007"), " "),
    **dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff"), None),
}


def reference(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).translate(_REFERENCE_TABLE).split())


# Characters that stress the map: NFKC expansions and compositions, combining marks (incl. ones
# that reorder), halfwidth voiced marks, conjoining jamo, Indic two-part vowels, compatibility
# characters whose NFKC holds a space, every kind of whitespace, and '?' (the run finder uses it).
TRICKY = [
    *"abcdefxyz019.,;:!?()-'\"",
    " ",
    "  ",
    "\n",
    "\r\n",
    "\t",
    "\x0b",
    "\x1c",
    "\x00",
    "\u00a0",
    "\u202f",
    "\u2007",
    "\u3000",
    "\u2028",
    "\u0085",
    "\u1680",
    "\u2003",
    "\u200b",
    "\u200c",
    "\u200d",
    "\u2060",
    "\ufeff",
    "‘",
    "’",
    "“",
    "”",
    "„",
    "‛",
    "ﬁ",
    "ﬂ",
    "…",
    "①",
    "Ａ",
    "ｚ",
    "㎒",
    "½",
    "é",
    "e\u0301",
    "\u0301",
    "\u0327",
    "\u0344",
    "\u0323",
    "ｶ",
    "ﾞ",
    "\u309b",
    "\u1100",
    "\u1161",
    "\u11a8",
    "\u0b47",
    "\u0b3e",
    "¨",
    "´",
    "ǆ",
    "中",
    "ß",
    "Å",
    "\u212b",
]
tricky_text = st.lists(st.sampled_from(TRICKY), max_size=40).map("".join)
any_text = st.text(max_size=60)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("", ""),
        ("   \n\t ", ""),
        ("plain text", "plain text"),
        ("  lead and trail  ", "lead and trail"),
        ("a\n\n   b\tc\r\nd", "a b c d"),
        ("ﬁne", "fine"),
        ("wait…", "wait..."),
        ("Ａｂｃ", "Abc"),
        ("‘single’ “double” „low‟", '\'single\' "double" "low"'),
        ("no\u00a0break\u202fnarrow\u2007figure", "no break narrow figure"),
        ("zero\u200bwidth\u200c\u200d\u2060\ufeffgone", "zerowidthgone"),
        ("a \u200b b", "a b"),
        ("cafe\u0301", "café"),
        ("line\u2028sep\u0085nel", "line sep nel"),
        ("①", "1"),
    ],
)
def test_examples(raw: str, expected: str) -> None:
    assert normalize_text(raw) == expected
    assert normalize(raw).text == expected


def test_offsets_of_an_expansion_map_to_the_whole_original_character() -> None:
    nt = normalize("a ﬁx")
    assert nt.text == "a fix"
    assert nt.to_original(2, 3) == (2, 3)  # 'f' alone: the whole ligature
    assert nt.to_original(3, 4) == (2, 3)  # 'i' alone: the whole ligature
    assert nt.to_original(2, 5) == (2, 4)
    assert nt.to_original(4, 5) == (3, 4)


def test_offsets_of_a_collapsed_run_cover_the_whole_run() -> None:
    original = "one\n\n    two  three"
    nt = normalize(original)
    assert nt.text == "one two three"
    assert nt.to_original(3, 4) == (3, 9)
    assert original[slice(*nt.to_original(0, 7))] == "one\n\n    two"
    assert original[slice(*nt.to_original(4, 13))] == "two  three"


def test_offsets_skip_leading_whitespace_and_dropped_characters() -> None:
    original = "\n  \u200bab\u200bcd "
    nt = normalize(original)
    assert nt.text == "abcd"
    assert nt.to_original(0, 4) == (4, 9)
    assert nt.to_original(1, 3) == (5, 8)  # "bc" includes the zero-width space between


def test_composition_maps_to_both_original_characters() -> None:
    nt = normalize("xe\u0301y")
    assert nt.text == "xéy"
    assert nt.to_original(1, 2) == (1, 3)
    assert nt.to_original(2, 3) == (3, 4)


def test_empty_spans() -> None:
    nt = normalize("  ab  cd  ")
    assert nt.to_original(0, 0) == (2, 2)
    assert nt.to_original(2, 2) == (4, 4)
    assert nt.to_original(5, 5) == (8, 8)
    assert normalize("").to_original(0, 0) == (0, 0)
    assert normalize(" \u200b ").to_original(0, 0) == (0, 0)


@pytest.mark.parametrize(("start", "end"), [(-1, 1), (2, 1), (0, 6), (6, 6)])
def test_spans_outside_the_text_are_rejected(start: int, end: int) -> None:
    with pytest.raises(ValueError, match="outside"):
        normalize("a b c").to_original(start, end)


def test_direct_construction_only_for_unchanged_text() -> None:
    assert NormalizedText("a b", "a b").to_original(2, 3) == (2, 3)
    with pytest.raises(ValueError, match="normalize"):
        NormalizedText("a  b", "a b")


def test_all_whitespace_characters_are_known() -> None:
    # normalize.py lists non-ASCII whitespace from below U+3001 only.
    assert all(c < 0x3001 for c in range(sys.maxunicode + 1) if chr(c).isspace())


@settings(max_examples=400)
@given(any_text)
@example("e\u0301\u0327")
@example("ｶﾞ")
@example("\u1100\u1161\u11a8")
@example("\u0b47\u0b3e")
@example("a\u0344b")
def test_mapped_and_fast_paths_agree_with_the_literal_pipeline(text: str) -> None:
    fast = normalize_text(text)
    assert normalize(text).text == fast
    assert fast == reference(text)


@settings(max_examples=400)
@given(tricky_text)
def test_tricky_text_agrees_with_the_literal_pipeline(text: str) -> None:
    assert normalize(text).text == normalize_text(text) == reference(text)


def _check_map(text: str, *, exact: bool = True) -> None:
    nt = normalize(text)
    norm = nt.text
    if not norm:
        return
    spans = [nt.to_original(k, k + 1) for k in range(len(norm))]
    assert all(0 <= a < b <= len(text) for a, b in spans)
    for (a, b), (c, d) in pairwise(spans):
        assert c >= a
        assert d >= b
    # Whole words (maximal runs without a space) round-trip through the original. A character
    # whose NFKC holds an inner space (U+FDFA, '㏂') yields several words that all map to it,
    # so on arbitrary text a word is only contained in the normalised original span.
    k = 0
    for word in norm.split(" "):
        start, end = nt.to_original(k, k + len(word))
        back = normalize_text(text[start:end])
        assert back == word if exact else word in back
        k += len(word) + 1


@settings(max_examples=400)
@given(tricky_text)
@example("a¨b")
@example("ab\u309b c")
@example("ﬁ\u3000\u3000ﬁ")
def test_map_is_monotone_and_words_round_trip(text: str) -> None:
    _check_map(text)


@settings(max_examples=200)
@given(any_text)
@example("\ufdfa")
def test_map_round_trips_on_arbitrary_text(text: str) -> None:
    _check_map(text, exact=False)


@settings(max_examples=200)
@given(st.text(alphabet="ab \n\t\r", max_size=60))
def test_ascii_map_is_exact_per_character(text: str) -> None:
    nt = normalize(text)
    for k, ch in enumerate(nt.text):
        a, b = nt.to_original(k, k + 1)
        if ch == " ":
            assert text[a:b].isspace()
        else:
            assert (a, b) == (a, a + 1)
            assert text[a] == ch
