"""Sizes shared by the CLI, the service and the renderers (import-light on purpose)."""

from __future__ import annotations

__all__ = ["LISTED_ITEMS"]

# Rows the HTML report lists (with their quotes); the item table keeps quote texts only for them.
LISTED_ITEMS = 300
