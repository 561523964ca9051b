"""Colours of the report scopes: every catalogue metric has one, CC its own grey.

A metric's colour follows its place in the catalogue, so a metric added to the catalogue is
drawn and highlighted like the others without a table to extend; the first three places keep
the colours the reports have always used (CF blue, CA orange, CT green). Past the palette the
colours repeat.
"""

from __future__ import annotations

from faithjudge_client.metric_catalogue import CC_LABEL, labels

__all__ = ["OTHER_COLOUR", "scope_colour", "scope_tint"]

# (line or bar colour, highlight background), in catalogue order
_PALETTE: tuple[tuple[str, str], ...] = (
    ("#2f6db5", "#cfe0f7"),
    ("#d9822b", "#fbd9b5"),
    ("#5a9e4b", "#d4ecce"),
    ("#8e5bb5", "#e6d7f2"),
    ("#c0392b", "#f5d0cc"),
    ("#1f9e9e", "#c9ecec"),
    ("#8c6d31", "#eadfc8"),
    ("#d35f9e", "#f7d3e6"),
)
_CC = ("#8a8a8a", "#e4e4e4")
OTHER_COLOUR = "#666"
"""A series that is no scope (an audit's conditions)."""


def _pair(scope: str) -> tuple[str, str] | None:
    if scope == CC_LABEL:
        return _CC
    order = labels()
    if scope not in order:
        return None
    return _PALETTE[order.index(scope) % len(_PALETTE)]


def scope_colour(scope: str) -> str:
    """The bar or line colour of a metric label or CC; ``OTHER_COLOUR`` for anything else."""
    pair = _pair(scope)
    return pair[0] if pair else OTHER_COLOUR


def scope_tint(scope: str) -> str:
    """The light background that highlights a metric's quotes (white for anything else)."""
    pair = _pair(scope)
    return pair[1] if pair else "#ffffff"
