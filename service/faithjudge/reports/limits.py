"""Sizes shared by the CLI, the service and the renderers (import-light on purpose)."""

from __future__ import annotations

__all__ = ["LISTED_ITEMS", "LISTED_PROBLEMS"]

# Rows the HTML report lists (with their quotes); the item table keeps quote texts only for them.
LISTED_ITEMS = 300

# Lines not judged (input errors, KB misses) the Markdown and HTML reports list by line number;
# the JSON report lists them all, but for a batch's rejected lines past this many (only counted).
LISTED_PROBLEMS = 200
