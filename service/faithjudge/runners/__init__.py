"""Runners that move a whole file of request lines through the scorer (live or Batch API)."""
