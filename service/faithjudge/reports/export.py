"""Exports of the item table: CSV always, Parquet when pyarrow is installed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd

from faithjudge.errors import FaithJudgeError

__all__ = ["ExportError", "export_items", "flat_items"]


class ExportError(FaithJudgeError):
    """An export cannot be written (unknown format, missing optional package, I/O error)."""


def flat_items(items: pd.DataFrame) -> pd.DataFrame:
    """The item table without the quote tuples (their count stays, in ``n_quotes``)."""
    return items.drop(columns=["quotes"])


def export_items(items: pd.DataFrame, path: Path) -> None:
    """Write the item table to ``path``; the suffix picks the format (.csv or .parquet).

    Raises:
        ExportError: the suffix is unknown, pyarrow is missing for Parquet, or writing fails.
    """
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".parquet"):
        raise ExportError(f"{path}: unknown export format {suffix!r}; use .csv or .parquet")
    if suffix == ".parquet" and importlib.util.find_spec("pyarrow") is None:
        raise ExportError(
            "Parquet export needs the optional package 'pyarrow', which is not installed "
            "(pip install pyarrow); CSV export works without it"
        )
    flat = flat_items(items)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if suffix == ".csv":
            # scores and rates to 4 decimals: 0.6667, not 0.6666666666666666
            flat.to_csv(path, index=False, float_format="%.4g")
        else:
            flat.to_parquet(path, index=False)
    except OSError as exc:
        raise ExportError(f"cannot write {path}: {exc.strerror or exc}") from None
