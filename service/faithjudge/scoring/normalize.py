"""Text normalisation for CoTs and quotes, with a map back to the original offsets.

METHODS §1.10, in order: NFKC; smart quotes to ASCII; no-break spaces to a space; zero-width
characters dropped; whitespace runs (``str.isspace``) collapsed to one space; trim.
:func:`normalize` keeps a piecewise offset map; :func:`normalize_text` (for quotes) computes the
same string without it, through the same code.

Nothing walks the whole text per character in Python (a 3 KB CoT must take well under a
millisecond): ASCII text is NFKC-invariant, whitespace runs that change are found with
``str.find``, and only the non-ASCII runs are NFKC-normalised, each with the ASCII character
before it. That equals NFKC of the whole text, since ASCII characters are starters that never
compose with what precedes them; the property tests check it against the literal pipeline.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from dataclasses import dataclass, field
from functools import lru_cache

__all__ = ["NormalizedText", "normalize", "normalize_text"]

# Every whitespace character (str.isspace) lies below U+3001; a unit test re-checks the whole
# code space so a future Unicode version cannot slip one past the table below.
_NON_ASCII_SPACES = "".join(c for c in map(chr, range(0x80, 0x3001)) if c.isspace())

# Applied after NFKC (which already turns U+00A0/U+202F/U+2007 into a plain space; they stay in
# the table so the step does not depend on that detail of the Unicode data). Other non-ASCII
# whitespace becomes "\n": the collapse step turns it into a space anyway, and afterwards the
# only whitespace left to look for is ASCII.
_REPLACEMENTS: dict[str, str] = {
    **dict.fromkeys(_NON_ASCII_SPACES, "\n"),
    **dict.fromkeys("\u2018\u2019\u201a\u201b", "'"),
    **dict.fromkeys("\u201c\u201d\u201e\u201f", '"'),
    **dict.fromkeys("\u00a0\u202f\u2007", " "),
}
_DROPPED = "\u200b\u200c\u200d\u2060\ufeff"
_TABLE: dict[int, str | None] = {
    **{ord(k): v for k, v in _REPLACEMENTS.items()},
    **dict.fromkeys(map(ord, _DROPPED), None),
}
# ``str.translate`` with a dict is slow on long non-ASCII strings; one ``str.replace`` per
# character that is actually present is much faster there.
_LONG = 64

_QUESTION_RUN = re.compile(rb"\?+")
_WHITESPACE_RUN = re.compile(r"\s+")
# ASCII whitespace other than " ": any occurrence starts or lies in a run the collapse changes.
_ASCII_BREAKS = "\n\t\r\x0b\x0c\x1c\x1d\x1e\x1f"

# Segment kind marker: a segment whose characters map one-to-one onto the original.
_ONE_TO_ONE = -1


def _translate(text: str) -> str:
    if len(text) < _LONG:
        return text.translate(_TABLE)
    for ch, rep in _REPLACEMENTS.items():
        if ch in text:
            text = text.replace(ch, rep)
    for ch in _DROPPED:
        if ch in text:
            text = text.replace(ch, "")
    return text


def _nfkc(text: str) -> str:
    # Called per character cluster of changed chunks, where the same few clusters recur.
    return _nfkc_short(text) if len(text) <= 8 else _translate(unicodedata.normalize("NFKC", text))


@lru_cache(maxsize=4096)
def _nfkc_short(text: str) -> str:
    return _translate(unicodedata.normalize("NFKC", text))


@dataclass(frozen=True, slots=True)
class NormalizedText:
    """A normalised text together with a map from its offsets to those of ``original``.

    Construct it with :func:`normalize`. The map is piecewise: segment ``i`` starts at
    normalised offset ``_seg_norm[i]``; if ``_seg_end[i]`` is ``-1`` its characters map one to
    one onto the original from ``_seg_orig[i]`` on, otherwise every character of the segment
    came from the whole original span ``[_seg_orig[i], _seg_end[i])`` (an NFKC expansion or
    composition, or a collapsed whitespace run).
    """

    original: str
    text: str
    _seg_norm: tuple[int, ...] = field(default=(), repr=False, compare=False)
    _seg_orig: tuple[int, ...] = field(default=(), repr=False, compare=False)
    _seg_end: tuple[int, ...] = field(default=(), repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self._seg_norm:
            # Only a text that normalisation leaves untouched can go without a map.
            if self.text and self.text != self.original:
                raise ValueError("NormalizedText needs an offset map; build it with normalize()")
            object.__setattr__(self, "_seg_norm", (0,))
            object.__setattr__(self, "_seg_orig", (0,))
            object.__setattr__(self, "_seg_end", (_ONE_TO_ONE,))

    def _char_span(self, index: int) -> tuple[int, int]:
        """Original span of normalised character ``index`` (0 <= index < len(text))."""
        i = bisect_right(self._seg_norm, index) - 1
        end = self._seg_end[i]
        if end == _ONE_TO_ONE:
            start = self._seg_orig[i] + index - self._seg_norm[i]
            return start, start + 1
        return self._seg_orig[i], end

    def to_original(self, start: int, end: int) -> tuple[int, int]:
        """Map the half-open span ``[start, end)`` of ``text`` to the original span it came from.

        ``start`` maps to where normalised character ``start`` begins in the original and
        ``end`` to where normalised character ``end - 1`` ends there, so a span that covers part
        of an NFKC expansion (``'ﬁ'`` -> ``'fi'``) or of a collapsed whitespace run maps to the
        whole original character or run. An empty span maps to an empty span at the original
        position of character ``start`` (just after the last character when
        ``start == len(text)``; 0 when the text is empty).

        Raises:
            ValueError: unless ``0 <= start <= end <= len(text)``.
        """
        n = len(self.text)
        if not 0 <= start <= end <= n:
            raise ValueError(f"span [{start}, {end}) is outside the normalised text (0..{n})")
        if start == end:
            if start < n:
                pos = self._char_span(start)[0]
            elif n:
                pos = self._char_span(n - 1)[1]
            else:
                pos = 0
            return pos, pos
        return self._char_span(start)[0], self._char_span(end - 1)[1]


def normalize_text(text: str) -> str:
    """Return the normalised form of ``text`` (METHODS §1.10), without an offset map.

    Equal to ``normalize(text).text`` for every input; use it for quotes and other strings
    whose original offsets are not needed.
    """
    if not text.isascii():
        text = _unicode_pass(text, with_map=False)[0]
    return " ".join(text.split())


class _Segments:
    """Accumulates map segments, merging consecutive one-to-one segments that line up."""

    __slots__ = ("ends", "norm", "orig")

    def __init__(self) -> None:
        self.norm: list[int] = []
        self.orig: list[int] = []
        self.ends: list[int] = []

    def one_to_one(self, norm_pos: int, orig_pos: int) -> None:
        if (
            self.ends
            and self.ends[-1] == _ONE_TO_ONE
            and self.orig[-1] + norm_pos - self.norm[-1] == orig_pos
        ):
            return
        self.norm.append(norm_pos)
        self.orig.append(orig_pos)
        self.ends.append(_ONE_TO_ONE)


# --- step 1: NFKC and character replacements -------------------------------------------------


def _clusters(chunk: str) -> list[str]:
    """Split ``chunk`` before every character with canonical combining class 0."""
    out: list[str] = []
    combining = unicodedata.combining
    for ch in chunk:
        if out and combining(ch):
            out[-1] += ch
        else:
            out.append(ch)
    return out


def _split_safely(clusters: list[str]) -> list[str]:
    """Group clusters, cutting only where NFKC of the rest does not depend on what precedes.

    For the rare clusters that interact under NFKC (conjoining jamo, halfwidth voiced sound
    marks, Indic two-part vowels, stacks of reordered marks). Exact by construction: NFKC of
    the chunk is the concatenation of NFKC of the groups. Quadratic, hence the length limit.
    """
    nfkc = unicodedata.normalize
    groups: list[str] = []
    current = clusters[0]
    rest = "".join(clusters[1:])
    for cl in clusters[1:]:
        if nfkc("NFKC", current + rest) == nfkc("NFKC", current) + nfkc("NFKC", rest):
            groups.append(current)
            current = cl
        else:
            current += cl
        rest = rest[len(cl) :]
    groups.append(current)
    return groups


_SAFE_SPLIT_LIMIT = 256


def _map_chunk(chunk: str, chunk_out: str, orig_pos: int, norm_pos: int, segs: _Segments) -> None:
    """Add map segments for one changed chunk whose whole-chunk output is ``chunk_out``."""
    if len(chunk) == 2 and chunk[0].isascii():
        # The common case, one non-ASCII character after an ASCII one (a ligature, an ellipsis,
        # a zero-width space): settled without splitting into clusters when they do not interact.
        tail = _nfkc(chunk[1])
        if chunk_out == chunk[0] + tail:
            segs.one_to_one(norm_pos, orig_pos)
            if len(tail) == 1:
                segs.one_to_one(norm_pos + 1, orig_pos + 1)
            elif tail:
                segs.norm.append(norm_pos + 1)
                segs.orig.append(orig_pos + 1)
                segs.ends.append(orig_pos + 2)
            return
    clusters = _clusters(chunk)
    groups = clusters
    outs = [g if g.isascii() else _nfkc(g) for g in groups]
    if "".join(outs) != chunk_out:
        groups = _split_safely(clusters) if len(chunk) <= _SAFE_SPLIT_LIMIT else [chunk]
        outs = [_nfkc(g) for g in groups]
    if "".join(outs) != chunk_out:  # cannot happen; one block is coarse but still exact
        groups, outs = [chunk], [chunk_out]
    for group, out in zip(groups, outs, strict=True):
        if out:
            if out == group or (len(group) == 1 and len(out) == 1):
                segs.one_to_one(norm_pos, orig_pos)
            else:  # every output character stands for the whole group
                segs.norm.append(norm_pos)
                segs.orig.append(orig_pos)
                segs.ends.append(orig_pos + len(group))
        orig_pos += len(group)
        norm_pos += len(out)


def _non_ascii_chunks(text: str) -> list[tuple[int, int]]:
    """Spans that hold every non-ASCII character of ``text``, each with the character before.

    A chunk is a maximal run of non-ASCII characters (possibly padded with literal '?') plus
    the ASCII character just before it, which may compose with combining marks in the run.
    Chunks do not overlap and, but for one at offset 0, start with an ASCII character.
    """
    # One replacement byte per unencodable character keeps offsets aligned, and bytes.find is
    # far faster than scanning the str with a character-class regex.
    data = text.encode("ascii", "replace")
    find = data.find
    match = _QUESTION_RUN.match
    chunks: list[tuple[int, int]] = []
    consumed = 0
    i = find(b"?")
    while i != -1:
        m = match(data, i)
        end = m.end() if m else i + 1
        if not text[i:end].isascii():
            chunks.append((i - 1 if i > consumed else i, end))
            consumed = end
        i = find(b"?", end)
    return chunks


def _nfkc_chunks(text: str, chunks: list[tuple[int, int]]) -> tuple[list[str], list[str]]:
    """NFKC of each chunk, before and after the character replacements."""
    parts = [text[a:b] for a, b in chunks]
    if "\x00" in text:
        composed = [unicodedata.normalize("NFKC", p) for p in parts]
        return composed, [_translate(c) for c in composed]
    # One call for all chunks: NUL is ASCII, so NFKC neither reaches across it nor makes one.
    whole = unicodedata.normalize("NFKC", "\x00".join(parts))
    return whole.split("\x00"), _translate(whole).split("\x00")


def _unicode_pass(text: str, with_map: bool) -> tuple[str, _Segments]:
    """Step 1 (NFKC and replacements) of a non-ASCII ``text``, with its map if asked for.

    NFKC is applied to the chunks only: cutting before an ASCII character never changes NFKC,
    so this equals NFKC of the whole text.
    """
    chunks = _non_ascii_chunks(text)
    composed, outs = _nfkc_chunks(text, chunks)
    pieces: list[str] = []
    segs = _Segments()
    consumed = 0  # original offset up to which output has been produced
    mapped = 0  # original offset up to which map segments have been added
    shift = 0  # normalised minus original offset after ``mapped``
    for (start, end), comp, out in zip(chunks, composed, outs, strict=True):
        chunk = text[start:end]
        if out == chunk:
            continue
        pieces += (text[consumed:start], out)
        consumed = end
        if comp == chunk and len(out) == len(chunk):
            # Only one-for-one replacements (smart quotes, no-break spaces): same map.
            continue
        if with_map:
            if start > mapped:
                segs.one_to_one(mapped + shift, mapped)
            _map_chunk(chunk, out, start, start + shift, segs)
        mapped = end
        shift += len(out) - len(chunk)
    pieces.append(text[consumed:])
    if with_map and mapped < len(text):
        segs.one_to_one(mapped + shift, mapped)
    return "".join(pieces), segs


# --- step 2: whitespace collapse and trim ----------------------------------------------------


def _changed_runs(text: str, lo: int, hi: int) -> list[tuple[int, int]]:
    """Maximal whitespace runs in ``text[lo:hi]`` other than a lone space, in order.

    ``text[lo:hi]`` must start and end with non-whitespace and hold no non-ASCII whitespace
    (step 1 turned it into "\\n"). A changed run either holds an ASCII break character or is
    two or more spaces, so ``str.find`` locates them all without a per-character loop.
    """
    find = text.find
    match = _WHITESPACE_RUN.match
    runs: list[tuple[int, int]] = []
    breaks = [ch for ch in _ASCII_BREAKS if ch in text]
    for ch in breaks:
        i = find(ch, lo, hi)
        while i != -1:
            start = i
            while text[start - 1].isspace():  # stops above lo: text[lo] is not whitespace
                start -= 1
            m = match(text, i, hi)
            end = m.end() if m else i + 1  # i is whitespace, so m is never None
            runs.append((start, end))
            i = find(ch, end, hi)
    if len(breaks) > 1:
        # Runs are maximal, so one found through two break characters is the same tuple.
        runs = sorted(set(runs))
    # Runs made of spaces only lie in the gaps between the runs found so far.
    spaces: list[tuple[int, int]] = []
    gap_start = lo
    for run_start, run_end in [*runs, (hi, hi)]:
        i = find("  ", gap_start, run_start)
        while i != -1:
            m = match(text, i, run_start)
            end = m.end() if m else i + 2
            spaces.append((i, end))
            i = find("  ", end, run_start)
        gap_start = run_end
    if spaces:
        runs = sorted(runs + spaces)
    return runs


def _collapse_map(text: str) -> tuple[str, list[int], list[int], list[int]]:
    """Step 2 of ``text``: the collapsed, trimmed string and its map back into ``text``.

    The map has the segment layout of :class:`NormalizedText`. ``text`` must hold no non-ASCII
    whitespace.
    """
    lo = len(text) - len(text.lstrip())
    hi = len(text.rstrip())
    if lo >= hi:
        return "", [], [], []
    norm: list[int] = []
    orig: list[int] = []
    ends: list[int] = []
    pieces: list[str] = []
    out_pos = 0
    prev = lo
    for ws_start, ws_end in _changed_runs(text, lo, hi):
        norm += (out_pos, out_pos + ws_start - prev)
        orig += (prev, ws_start)
        ends += (_ONE_TO_ONE, ws_end)
        pieces.append(text[prev:ws_start])
        out_pos += ws_start - prev + 1
        prev = ws_end
    norm.append(out_pos)
    orig.append(prev)
    ends.append(_ONE_TO_ONE)
    pieces.append(text[prev:hi])
    # Each changed run becomes exactly one space.
    return " ".join(pieces), norm, orig, ends


def _compose(
    outer: tuple[list[int], list[int], list[int]], out_len: int, inner: _Segments
) -> tuple[list[int], list[int], list[int]]:
    """Chain a map output -> intermediate (``outer``) with ``inner``: intermediate -> original.

    Outer one-to-one segments alternate with collapsed-run blocks, so the pieces appended
    here never need merging.
    """
    out_norm, out_src, out_ends = outer
    in_norm, in_orig, in_ends = inner.norm, inner.orig, inner.ends
    n_in, n_out = len(in_norm), len(out_norm)
    norm: list[int] = []
    orig: list[int] = []
    ends: list[int] = []
    for k in range(n_out):
        ns, src, end = out_norm[k], out_src[k], out_ends[k]
        j = bisect_right(in_norm, src) - 1
        if end != _ONE_TO_ONE:
            # A collapsed run [src, end): from the start of its first character to the end of
            # its last one.
            jl = bisect_right(in_norm, end - 1) - 1
            norm.append(ns)
            orig.append(in_orig[j] + src - in_norm[j] if in_ends[j] == _ONE_TO_ONE else in_orig[j])
            ends.append(
                in_orig[jl] + end - in_norm[jl] if in_ends[jl] == _ONE_TO_ONE else in_ends[jl]
            )
            continue
        hi = src + (out_norm[k + 1] if k + 1 < n_out else out_len) - ns
        pos = src
        while True:
            norm.append(ns + pos - src)
            if in_ends[j] == _ONE_TO_ONE:
                orig.append(in_orig[j] + pos - in_norm[j])
            else:
                orig.append(in_orig[j])
            ends.append(in_ends[j])
            j += 1
            if j == n_in or in_norm[j] >= hi:
                break
            pos = in_norm[j]
    return norm, orig, ends


def normalize(text: str) -> NormalizedText:
    """Normalise ``text`` (METHODS §1.10) and keep a map from normalised to original offsets.

    ``normalize(text).text == normalize_text(text)`` always holds.
    """
    first = None
    if text.isascii():
        inter = text
    else:
        inter, first = _unicode_pass(text, with_map=True)
    out, norm, orig, ends = _collapse_map(inter)
    if not out:
        return NormalizedText(text, "", (0,), (0,), (0,))
    if first is not None:  # the map so far points into the intermediate text
        norm, orig, ends = _compose((norm, orig, ends), len(out), first)
    return NormalizedText(text, out, tuple(norm), tuple(orig), tuple(ends))
