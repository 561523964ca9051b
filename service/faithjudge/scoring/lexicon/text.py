"""Text model of the lexicon judge: sentences with their original spans, word stems, phrase lists.

The CoT is cut into sentences at end punctuation, newlines, tags and JSON string delimiters;
words are lowercased and lightly stemmed (plural, -ed/-ing, final -e) so that morphological,
hyphen and spacing variants meet. Every phrase list of the lexicon registers with one
``Scanner``, so each sentence is scanned once for all of them. Pure and deterministic.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import NamedTuple

__all__ = [
    "Hit",
    "PhraseIndex",
    "Scanner",
    "Sentence",
    "clear_memos",
    "is_placeholder",
    "sentences",
    "stem",
    "tokenize",
]

# Words, keeping in-word apostrophes ("didn't", "radiologist's"); "_" splits JSON keys, so
# ``tokenize`` turns it into a space first: a plain ``\w`` matches twice as fast as ``[^\W_]``.
_TOKEN = re.compile(r"\w+(?:['\u2019]\w+)*")
# Where a sentence ends: tags, newlines (also escaped ones inside JSON strings), JSON string
# delimiters next to structural characters, and end punctuation followed by a space (the
# punctuation stays in the sentence: the cut is at the ``gap`` group). The pattern opens with
# the class of every character a boundary can start with and tells the kinds apart by a
# lookbehind on it: a pattern that starts with a class lets the engine skip to candidates in
# C, where an alternation of branches would be tried at every position.
_BOUNDARY = re.compile(
    r"[<\\\n.!?\"\[\]{},:]"
    r"(?:(?<=<)[^<>\n]{0,40}>"
    r"|(?<=\\)n|(?<=\n)"
    r"|(?<=[.!?])(?P<gap>[\"')\]]*\s+)"
    r"|(?<=\")\s*[:,\]}]|(?<=[\[{,:])\s*\""
    r"|(?<=[{}\[\]]))"
)
_LETTERS = re.compile(r"[^\W\d_]{2,}")

Hit = tuple[int, int, int]  # (start token, end token, phrase number)
_EMPTY: list[Hit] = []


class Sentence(NamedTuple):
    """One sentence of the CoT: its span in the original text and the stems of its words."""

    start: int
    end: int
    stems: tuple[str, ...]
    stem_set: frozenset[str]


def stem(word: str) -> str:
    """A light, deterministic stem: plural, -ed/-ing and a final -e removed (lowercase)."""
    return _STEMS[word]


# Words the suffix rules would turn into another word: "noted" is not "not".
_IRREGULAR = {"noted": "note"}


def _stem(word: str) -> str:
    w = word.lower().replace("\u2019", "'")
    if w in _IRREGULAR:
        return _IRREGULAR[w]
    if w.endswith("'s"):
        w = w[:-2]
    n = len(w)
    if n > 4 and w.endswith("ies"):
        w = w[:-3] + "y"
    elif n > 4 and w.endswith(("sses", "ches", "shes", "xes", "zes")):
        w = w[:-2]
    elif n > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    if len(w) > 5 and w.endswith("ing"):
        w = w[:-3]
    elif len(w) > 4 and w.endswith("ed"):
        w = w[:-2]
    if len(w) > 4 and w.endswith("e"):
        w = w[:-1]
    return w


class _StemMemo(dict[str, str]):
    """word -> stem, filled on first sight; a plain dict lookup is the cheapest memo there is
    for the one call made per word of every CoT."""

    def __missing__(self, word: str) -> str:
        if len(self) >= 1 << 16:
            self.clear()
        value = self[word] = _stem(word)
        return value


_STEMS = _StemMemo()


def tokenize(text: str) -> tuple[str, ...]:
    """The stems of the words of ``text``, in order."""
    if not text.isascii():
        if "_" in text:
            text = text.replace("_", " ")
        return tuple(map(_STEMS.__getitem__, _TOKEN.findall(text)))
    # ASCII (nearly every sentence): one table pass and a split find the same words as
    # ``_TOKEN`` four times as fast; only a chunk holding an apostrophe needs the pattern.
    words = text.translate(_ASCII_WORDS).split()
    if "'" in text:
        words = [w for chunk in words for w in (_TOKEN.findall(chunk) if "'" in chunk else [chunk])]
    return tuple(map(_STEMS.__getitem__, words))


# Letters and digits lowercased (stems are lowercase), apostrophes kept, any other ASCII
# character a space.
_ASCII_WORDS = str.maketrans(
    {
        **{chr(c): " " for c in range(128)},
        **{c: c.lower() for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"},
        "'": "'",
    }
)


@lru_cache(maxsize=64)
def sentences(cot: str) -> tuple[Sentence, ...]:
    """Sentences of ``cot`` that hold at least one word, with their original spans (trimmed).

    Memoised: the three metrics of one item cut the same CoT.
    """
    out: list[Sentence] = []
    pos = 0
    for m in _BOUNDARY.finditer(cot):
        gap = m.start("gap")
        _add(cot, pos, gap if gap >= 0 else m.start(), out)
        pos = m.end()
    _add(cot, pos, len(cot), out)
    return tuple(out)


def _add(cot: str, start: int, end: int, out: list[Sentence]) -> None:
    piece = cot[start:end]
    stripped = piece.strip(_TRIM)
    if not stripped:
        return
    words: tuple[tuple[str, ...], frozenset[str]] | None
    if stripped in _WORDS:
        words = _WORDS[stripped]
    else:
        if len(_WORDS) >= _WORDS_MAX:
            _WORDS.clear()
        if _LETTERS.search(stripped) is None:
            words = None  # punctuation or digits only: not a sentence
        else:
            stems = tokenize(stripped)
            words = (stems, frozenset(stems))
        _WORDS[stripped] = words
    if words is not None:
        start += piece.index(stripped)
        out.append(Sentence(start, start + len(stripped), words[0], words[1]))


_TRIM = " \t\r\n\"'`*#-\u00a0"
# Stems of recent sentence texts: a sentence repeated across CoTs (boilerplate such as "I will
# examine the chest X-ray") gets the same stems tuple, so every per-sentence memo keyed by
# that tuple's identity (the scanner's, the fidelity rules') answers it without new work.
_WORDS: dict[str, tuple[tuple[str, ...], frozenset[str]] | None] = {}
# Memo sizes: enough for every sentence of an item and the boilerplate of recent ones; a
# larger memo found few more repeats, and every entry is one more object that each full
# garbage collection walks.
_WORDS_MAX = 1 << 12
_SCAN_MEMO_MAX = 1 << 11


_PLACEHOLDERS = frozenset({"n/a", "na", "none", "null", "todo", "tbd", "...", "placeholder"})
_TAG = re.compile(r"<[^<>]{0,40}>")
_JSON_NOISE = re.compile(r"[\s{}\[\]\":,.…]+")
# A word of two or more letters outside any tag: a long CoT with one is never a placeholder.
_WORD_OUTSIDE_TAGS = re.compile(r"(?:\A|>)[^<]*?[^\W\d_]{2,}")


@lru_cache(maxsize=64)
def is_placeholder(cot: str) -> bool:
    """Empty, tags only, JSON punctuation only or a placeholder word such as "N/A"."""
    if len(cot) > 64:
        return _WORD_OUTSIDE_TAGS.search(cot) is None
    bare = _JSON_NOISE.sub(" ", _TAG.sub(" ", cot)).strip().lower()
    return not bare or bare in _PLACEHOLDERS or _LETTERS.search(bare) is None


class Scanner:
    """Finds the phrases of many lists in one pass over a sentence.

    Every list of the lexicon registers here under its own category, so each sentence is
    scanned once for all of them, and the answer (a pure function of the stems) is kept in a
    bounded memo: every concept and metric of an item asks about the same sentences.
    """

    __slots__ = ("_index", "_memo", "_multi", "_single")

    def __init__(self) -> None:
        # Single-word phrases by their stem; longer phrases by their first two stems (so a
        # common first word such as "no" or "the" does not send every position through a
        # long list), longest first. ``_index`` joins both under the first stem, so a position
        # costs one lookup.
        self._single: dict[str, list[tuple[int, int]]] = {}
        self._multi: dict[str, dict[str, list[tuple[tuple[str, ...], int, int, int]]]] = {}
        self._index: dict[
            str,
            tuple[
                tuple[tuple[int, int], ...],
                dict[str, list[tuple[tuple[str, ...], int, int, int]]] | None,
            ],
        ] = {}
        # Keyed by the identity of the stems tuple (hashing a tuple of stems on every lookup
        # would cost more than the lookup): the entry keeps the tuple alive, so its id cannot
        # be reused while it is in the memo. An equal tuple of another identity is scanned
        # again, with the same result.
        self._memo: dict[int, tuple[tuple[str, ...], dict[int, list[Hit]]]] = {}

    def add(self, category: int, phrases: Sequence[str]) -> None:
        for i, phrase in enumerate(phrases):
            key = tokenize(phrase)
            if len(key) == 1:
                entries = self._single.setdefault(key[0], [])
                if all(c != category for c, _ in entries):  # one hit per list and position
                    entries.append((category, i))
            elif key:
                by_next = self._multi.setdefault(key[0], {})
                by_next.setdefault(key[1], []).append((key, len(key), category, i))
        for by_next in self._multi.values():
            for candidates in by_next.values():
                candidates.sort(key=lambda e: -e[1])
        self._index = {
            stem: (tuple(self._single.get(stem, ())), self._multi.get(stem))
            for stem in self._single.keys() | self._multi.keys()
        }
        self._memo.clear()

    def scan(self, key: tuple[str, ...]) -> dict[int, list[Hit]]:
        entry = self._memo.get(id(key))
        if entry is not None and entry[0] is key:
            return entry[1]
        hits: dict[int, list[Hit]] = {}
        index = self._index
        last = len(key) - 1
        for i, s in enumerate(key):
            found = index.get(s)
            if found is None:
                continue
            single, by_next = found
            done: set[int] | None = None
            if by_next is not None and i < last:
                entries = by_next.get(key[i + 1])
                if entries is not None:
                    done = set()
                    for phrase, k, category, number in entries:
                        if category not in done and (k == 2 or key[i : i + k] == phrase):
                            hits.setdefault(category, []).append((i, i + k, number))
                            done.add(category)
            for category, number in single:
                if done is None or category not in done:
                    hits.setdefault(category, []).append((i, i + 1, number))
        if len(self._memo) >= _SCAN_MEMO_MAX:
            self._memo.clear()
        self._memo[id(key)] = (key, hits)
        return hits


class PhraseIndex:
    """Multi-word phrases looked up by their first stem; phrases are stemmed like the text.

    Indexes built with a shared ``scanner`` are searched together with the other lists of
    that scanner (one pass per sentence).
    """

    __slots__ = ("_scanner", "category", "labels")

    def __init__(
        self,
        phrases: Iterable[str],
        labels: Sequence[str] | None = None,
        *,
        scanner: Scanner | None = None,
    ) -> None:
        items = list(phrases)
        self.labels = list(labels) if labels is not None else items
        self._scanner = scanner if scanner is not None else Scanner()
        self.category = id(self)  # the key of this list in ``Scanner.scan``'s answer
        self._scanner.add(self.category, items)

    def find(self, stems: Sequence[str]) -> list[Hit]:
        """(start, end, phrase number) of every match; the longest wins at each position."""
        entry = self._scanner._memo.get(id(stems))  # the memo hit of ``scan``, inlined
        if entry is not None and entry[0] is stems:
            return entry[1].get(self.category, _EMPTY)
        key = stems if isinstance(stems, tuple) else tuple(stems)
        return self._scanner.scan(key).get(self.category, _EMPTY)

    def covers(self, stems: Sequence[str]) -> set[int]:
        """Token positions that belong to some match."""
        return {p for a, b, _ in self.find(stems) for p in range(a, b)}

    def leading(self, stems: Sequence[str]) -> int:
        """Length of a match that starts at position 0, or 0."""
        for a, b, _ in self.find(stems):
            if a == 0:
                return b
        return 0


def clear_memos() -> None:
    """Forget the module-level memos (sentences, stems of sentence texts, placeholders), so a
    benchmark repeat starts cold; the output never depends on them."""
    sentences.cache_clear()
    is_placeholder.cache_clear()
    _WORDS.clear()
