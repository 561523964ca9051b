"""JSONL lines: numbered as an editor numbers them, blanks passed over, byte order marks ignored."""

from __future__ import annotations

from faithjudge.jsonl import BOM, numbered_lines


def test_lines_keep_their_numbers_without_blanks_or_byte_order_marks() -> None:
    lines = [BOM + b'{"a": 1}\n', b"\n", b"  \r\n", b'{"b": 2}\r\n', BOM + b"\n", BOM + b"{}"]
    assert list(numbered_lines(lines)) == [(1, b'{"a": 1}\n'), (4, b'{"b": 2}\r\n'), (6, b"{}")]


def test_a_byte_order_mark_inside_a_line_is_data() -> None:
    assert list(numbered_lines([b'{"a": "' + BOM + b'"}'])) == [(1, b'{"a": "' + BOM + b'"}')]
