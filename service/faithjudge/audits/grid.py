"""One row per item (model × case), one column per condition: the audits' working layout.

Answers become integer codes so that "answer under condition A equals the answer under B" is
one vectorised comparison: codes ≥ 0 are normalised answers (shared with the golds), ``UNPARSED``
marks a record whose output could not be parsed, ``ABSENT`` an item without that record.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from faithjudge.audits.conditions import ORIGINAL

__all__ = ["ABSENT", "UNPARSED", "ItemGrid", "item_grid"]

UNPARSED = -1
ABSENT = -2
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class ItemGrid:
    """``items``: the original record of every item (model, item_id, gold, p_yes, metadata ...),
    in a fixed order; ``codes``: answer code per condition, aligned with ``items``;
    ``gold``: the original's gold code; ``vocabulary``: code -> normalised text."""

    items: pd.DataFrame
    codes: dict[str, IntArray]
    gold: IntArray
    vocabulary: np.ndarray
    rows: pd.DataFrame
    position: IntArray
    """Row in ``items`` of each record key (-1 for keys with no original record)."""

    def answer(self, condition: str) -> IntArray:
        return self.codes.get(condition, np.full(len(self.items), ABSENT, dtype=np.int64))

    def code_of(self, text: str) -> int:
        hits = np.flatnonzero(self.vocabulary == text)
        return int(hits[0]) if hits.size else -3  # matches no answer

    def column(self, condition: str, name: str) -> np.ndarray:
        """Any column of the ``condition`` records, aligned with ``items`` (None if absent)."""
        out = np.full(len(self.items), None, dtype=object)
        sel = self.rows["condition"].to_numpy() == condition
        out[self.position[self.rows["key"].to_numpy()[sel]]] = self.rows[name].to_numpy()[sel]
        return out


def item_grid(rows: pd.DataFrame, conditions: frozenset[str] | set[str]) -> ItemGrid:
    """The grid of the single-probe ``conditions`` of ``rows`` (prepared records of one audit)."""
    values, vocabulary = pd.factorize(
        np.concatenate([rows["ans"].to_numpy(dtype=object), rows["gold_n"].to_numpy(dtype=object)]),
        use_na_sentinel=True,
    )
    ans_code, gold_code = values[: len(rows)], values[len(rows) :]
    cond = rows["condition"].to_numpy(dtype=object)
    key = rows["key"].to_numpy()
    is_orig = cond == ORIGINAL
    items = rows[is_orig].reset_index(drop=True)
    pos = np.full(int(key.max()) + 1 if key.size else 0, -1, dtype=np.int64)
    pos[items["key"].to_numpy()] = np.arange(len(items))
    codes: dict[str, IntArray] = {}
    for name in conditions:
        sel = cond == name
        arr = np.full(len(items), ABSENT, dtype=np.int64)
        if sel.any():
            where = pos[key[sel]]
            ok = where >= 0
            arr[where[ok]] = ans_code[sel][ok]
        codes[name] = arr
    return ItemGrid(
        items=items,
        codes=codes,
        gold=gold_code[is_orig].astype(np.int64),
        vocabulary=np.asarray(vocabulary, dtype=object),
        rows=rows,
        position=pos,
    )
