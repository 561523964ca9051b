"""Aggregates of the item table: accuracy, flip rate and mean CF, CA, CC in % (METHODS §1.7).

The score statistics are the headline scopes of the metric catalogue.

Every statistic is computed per model and per group of one dimension (modification,
aligned vs misleading hint, text vs image channel, question type, or all items), and per
subset: all items, the flip subset and the non-flip subset (items whose flip is undecided belong
to neither). Each value carries a 95% percentile bootstrap CI over items, seeded per cell so
that adding a cell never changes the others. Means leave out the items a metric could not
grade (they are counted by the coverage diagnostics instead).

``table1`` follows the paper's Table 1: per model, the per-modification values averaged across
modifications, with the standard deviation across modifications as the ± dispersion.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from faithjudge_client.metric_catalogue import headline_scopes

from faithjudge.stats.bootstrap import rng_for
from faithjudge.stats.resample import bootstrap_means, pattern_ids

__all__ = [
    "DIMENSIONS",
    "FLIP_RATES",
    "SPLITS",
    "aggregate",
    "stat_columns",
    "stats",
    "table1",
    "table1_columns",
]

FLIP_RATES: dict[str, str] = {"pairs": "flipped", "decided": "flip"}


def stats() -> dict[str, str]:
    """The item-table column of each reported statistic (percentages of 0/1 flags or scores).

    The flip rate is the paper's: flipped pairs over all pairs (an undecided pair counts, as not
    flipped), with the share of undecided pairs beside it; ``flip_rate="decided"`` gives the
    conditional form, flipped pairs over the pairs whose flip could be decided. Then the mean
    of every headline scope of the metric catalogue (CF, CA, CC).
    """
    return {
        "accuracy": "correct",
        "flip_rate": "flipped",
        "flip_undecided": "flip_undecided",
        **{scope: scope for scope in headline_scopes()},
    }


def stat_columns(flip_rate: str = "pairs") -> dict[str, str]:
    """The item-table column of every statistic, with the flip rate of ``flip_rate``."""
    if flip_rate not in FLIP_RATES:
        raise ValueError(f"flip_rate must be one of {sorted(FLIP_RATES)}, got {flip_rate!r}")
    return {**stats(), "flip_rate": FLIP_RATES[flip_rate]}


def table1_columns() -> list[tuple[str, str, str]]:
    """Table 1's columns as (column, statistic, split): Acc, Flip rate, then every headline
    scope on the flip subset and on the non-flip subset (CF F, ..., CC NF)."""
    scopes = headline_scopes()
    return [
        ("Acc", "accuracy", "all"),
        ("Flip rate", "flip_rate", "all"),
        *((f"{scope} F", scope, "flip") for scope in scopes),
        *((f"{scope} NF", scope, "non-flip") for scope in scopes),
    ]


DIMENSIONS: tuple[str, ...] = ("all", "modification", "alignment", "channel", "question_type")
SPLITS: tuple[str, ...] = ("all", "flip", "non-flip")
_COLUMNS = ["dimension", "model", "group", "split", "stat", "n", "n_eval", "value", "low", "high"]


def _split_masks(flip: np.ndarray) -> dict[str, np.ndarray]:
    return {"all": np.ones(flip.size, bool), "flip": flip == 1.0, "non-flip": flip == 0.0}


def aggregate(
    items: pd.DataFrame, *, B: int = 1000, seed: int = 0, flip_rate: str = "pairs"
) -> pd.DataFrame:
    """Long table of every statistic per (dimension, model, group, split), values in %.

    Columns: dimension, model, group, split, stat, n (items in the cell), n_eval (items the
    statistic could use), value, low, high (the 95% percentile bootstrap CI), all in %.
    """
    stat_cols = stat_columns(flip_rate)
    values = items[list(stat_cols.values())].to_numpy(dtype=np.float64)
    # each statistic is bootstrapped on its own column: a column has a handful of distinct
    # values, so a cell costs (resamples x values) whatever its number of items
    columns = [pattern_ids(values[:, j : j + 1]) for j in range(values.shape[1])]
    evaluable = ~np.isnan(values)
    flip = items["flip"].to_numpy(dtype=np.float64)
    splits = _split_masks(flip)
    rows: list[list[object]] = []
    for dimension in DIMENSIONS:
        keys = ["model"] if dimension == "all" else ["model", dimension]
        for key, index in items.groupby(keys, sort=True, dropna=False).indices.items():
            model = key[0] if isinstance(key, tuple) else key
            if pd.isna(model):
                continue  # a line of no model counts in the run's coverage, not a model's row
            group = "all" if dimension == "all" else str(key[1])
            for split in SPLITS:
                rows_in = index[splits[split][index]]
                if rows_in.size == 0:
                    continue
                label = f"agg:{dimension}:{model}:{group}:{split}"
                rng = rng_for(seed, label)
                estimates = [
                    bootstrap_means(ids[rows_in], patterns, B=B, rng=rng)[0]
                    for ids, patterns in columns
                ]
                n_eval = evaluable[rows_in].sum(axis=0)
                for j, stat in enumerate(stat_cols):
                    point, low, high = estimates[j]
                    rows.append(
                        [dimension, model, group, split, stat, int(rows_in.size), int(n_eval[j]),
                         *(None if v is None else 100.0 * v for v in (point, low, high))]
                    )  # fmt: skip
    return pd.DataFrame(rows, columns=_COLUMNS)


def table1(aggregates: pd.DataFrame, *, skip: frozenset[str] = frozenset()) -> pd.DataFrame:
    """The paper's Table 1: per model, mean ± SD across modifications (values in %).

    ``skip`` names modification groups that are not modifications (unmodified baseline runs).

    Columns: model, n_modifications, then ``<column>`` and ``<column>_sd`` for Acc, Flip rate,
    CF F, CA F, CC F, CF NF, CA NF, CC NF. The SD is the sample SD across modifications
    (NaN with a single modification).
    """
    per_mod = aggregates[
        (aggregates["dimension"] == "modification") & ~aggregates["group"].isin(skip)
    ]
    wanted = table1_columns()
    out: list[dict[str, object]] = []
    for model, frame in per_mod.groupby("model", sort=True):
        row: dict[str, object] = {"model": model, "n_modifications": frame["group"].nunique()}
        for column, stat, split in wanted:
            cell = frame[(frame["stat"] == stat) & (frame["split"] == split)]["value"]
            cell = cell.dropna().astype("float64")
            row[column] = float(cell.mean()) if len(cell) else None
            row[f"{column}_sd"] = float(cell.std(ddof=1)) if len(cell) > 1 else None
        out.append(row)
    return pd.DataFrame(out)
