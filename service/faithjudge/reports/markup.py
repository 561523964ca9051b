"""Markdown and HTML pieces that the reports and the audits both render with.

Every string shown comes from result or record lines and is untrusted: Markdown cells go
through ``md_escape``, HTML text through ``html.escape``. Numbers are percentages already
(0-100); a missing one shows as an en dash.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from faithjudge.reports.palette import scope_colour

__all__ = ["bar_chart_svg", "fmt_ci", "fmt_pct", "html_table", "md_escape"]


# C0 controls and DEL (a terminal escape sequence in a model's name), shown as \uXXXX; the
# tabs and line breaks become spaces
_CONTROLS = {c: f"\\u{c:04x}" for c in (*range(0x20), 0x7F)} | {0x09: " ", 0x0A: " ", 0x0D: " "}


def md_escape(text: Any) -> str:
    """Make untrusted text safe inside a Markdown table cell (and on a terminal or CI log)."""
    value = str(text)
    for char in "\\`*_[]<>|":
        value = value.replace(char, "\\" + char)
    return value.translate(_CONTROLS)


def fmt_pct(value: Any, digits: int = 1) -> str:
    """A percentage, or an en dash when it is missing."""
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return "–"
    return f"{float(value):.{digits}f}"


def fmt_ci(value: Any, low: Any, high: Any) -> str:
    """``value [low, high]`` in %."""
    if value is None or pd.isna(value):
        return "–"
    return f"{fmt_pct(value)} [{fmt_pct(low)}, {fmt_pct(high)}]"


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def html_table(header: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1) -> str:
    """A table; header cells are escaped here, body cells come as HTML, `left` columns left."""
    head = "".join(
        f'<th class="{"l" if i < left else ""}">{_e(h)}</th>' for i, h in enumerate(header)
    )
    body = "".join(
        "<tr>"
        + "".join(f'<td class="{"l" if i < left else ""}">{c}</td>' for i, c in enumerate(row))
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _interval(
    bounds: Sequence[tuple[float | None, float | None]] | None, index: int
) -> tuple[float, float] | None:
    """The (low, high) of one bar, or None when either bound is missing."""
    if bounds is None or index >= len(bounds):
        return None
    low, high = bounds[index]
    if low is None or high is None or pd.isna(low) or pd.isna(high):
        return None
    return float(low), float(high)


def bar_chart_svg(
    groups: Sequence[str],
    series: Mapping[str, Sequence[float | None]],
    intervals: Mapping[str, Sequence[tuple[float | None, float | None]]] | None = None,
) -> str:
    """Grouped vertical bars (0–100%) with one colour per series; None draws no bar.

    ``intervals`` gives a series' (low, high) per group, drawn as a whisker over its bar and
    named in its tooltip; a missing bound draws none.
    """
    width_group, bar = 18 * max(1, len(series)) + 14, 16
    left, top, height = 40, 20, 180
    width = left + width_group * max(1, len(groups)) + 20
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" width="{width}" '
        f'height="{top + height + 62}" class="plot bars">'
    ]
    for tick in (0, 25, 50, 75, 100):
        y = top + height - height * tick / 100
        parts.append(
            f'<line x1="{left}" x2="{width - 10}" y1="{y:.1f}" y2="{y:.1f}" '
            f'stroke="#e3e3e3"/><text x="{left - 4}" y="{y + 4:.1f}" font-size="10" '
            f'text-anchor="end">{tick}</text>'
        )
    for g, group in enumerate(groups):
        x0 = left + g * width_group + 7
        for s, (name, values) in enumerate(series.items()):
            value = values[g]
            if value is None or pd.isna(value):
                continue
            h = height * max(0.0, min(100.0, float(value))) / 100
            whisker = _interval((intervals or {}).get(name), g)
            ci = "" if whisker is None else f" [{whisker[0]:.1f}, {whisker[1]:.1f}]"
            parts.append(
                f'<rect x="{x0 + s * 18}" y="{top + height - h:.1f}" width="{bar}" '
                f'height="{h:.1f}" fill="{scope_colour(name)}">'
                f"<title>{_e(group)} {_e(name)}: {float(value):.1f}%{ci}</title></rect>"
            )
            if whisker is not None:
                y_low, y_high = (
                    top + height - height * max(0.0, min(100.0, b)) / 100 for b in whisker
                )
                mid = x0 + s * 18 + bar / 2
                parts.append(
                    f'<path class="ci" d="M{mid:.1f} {y_low:.1f}V{y_high:.1f}'
                    f"M{mid - 4:.1f} {y_low:.1f}H{mid + 4:.1f}M{mid - 4:.1f} {y_high:.1f}"
                    f'H{mid + 4:.1f}" stroke="#222" stroke-width="1.2" fill="none"/>'
                )
        cx = x0 + width_group / 2 - 7
        parts.append(
            f'<text x="{cx:.1f}" y="{top + height + 12}" font-size="10" '
            f'text-anchor="end" transform="rotate(-45 {cx:.1f} {top + height + 12})">'
            f"{_e(group)}</text>"
        )
    for s, name in enumerate(series):
        parts.append(
            f'<rect x="{left + s * 60}" y="2" width="10" height="10" '
            f'fill="{scope_colour(name)}"/><text x="{left + s * 60 + 14}" y="11" '
            f'font-size="11">{_e(name)}</text>'
        )
    return "".join(parts) + "</svg>"
