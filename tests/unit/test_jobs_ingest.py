"""Splitting a streamed upload into numbered lines, whatever the chunk boundaries."""

from __future__ import annotations

from faithjudge.jobs.ingest import _Lines
from hypothesis import given
from hypothesis import strategies as st


def _split(
    chunks: list[bytes], max_line_bytes: int = 1000
) -> tuple[list[tuple[int, bytes]], list[int]]:
    splitter = _Lines(max_line_bytes=max_line_bytes)
    out: list[tuple[int, bytes]] = []
    for chunk in chunks:
        out += splitter.feed(chunk)
    out += splitter.close()
    return out, splitter.too_long


def test_numbers_lines_skips_blank_ones_and_keeps_a_last_line_without_newline() -> None:
    lines, too_long = _split([b'{"a":1}\n\n  \n{"b"', b":2}\r\n", b'{"c":3}'])
    assert lines == [(1, b'{"a":1}'), (4, b'{"b":2}\r'), (5, b'{"c":3}')]
    assert too_long == []


def test_an_over_long_line_is_cut_off_without_buffering_it() -> None:
    splitter = _Lines(max_line_bytes=10)
    assert splitter.feed(b"short\n" + b"x" * 8) == [(1, b"short")]
    assert splitter.feed(b"y" * 1000) == []
    assert len(splitter.buffer) == 0  # the long line is being skipped, not kept
    assert splitter.feed(b"zz\nok\n") == [(3, b"ok")]
    assert splitter.too_long == [2]
    lines, too_long = _split([b"a" * 20], max_line_bytes=10)
    assert lines == [] and too_long == [1]


@given(
    st.lists(st.binary(min_size=0, max_size=30).filter(lambda b: b"\n" not in b), max_size=20),
    st.lists(st.integers(min_value=1, max_value=40), max_size=10),
)
def test_chunk_boundaries_never_change_the_lines(rows: list[bytes], cuts: list[int]) -> None:
    data = b"\n".join(rows)
    chunks, start = [], 0
    for cut in cuts:
        chunks.append(data[start : start + cut])
        start += cut
    chunks.append(data[start:])
    expected = [(n, r) for n, r in enumerate(rows, start=1) if r.strip()]
    assert _split(chunks) == (expected, [])
