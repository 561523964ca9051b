"""Checks that need several records at once, and the derived columns the audits share.

Every problem names the line it was found on and the field to fix:

* two records for the same (model, item, condition[, variant]);
* a perturbed record (a swap, a mask, a trap ...) whose item has no original record;
* a MedVIGIL probe without a gold letter A–E, or a trap / ROI-masked probe whose gold is not E;
* Lotfinia answers or golds that are not Yes/No, a perturbed Lotfinia record whose gold
  differs from the original's (a same-label swap and a mask keep the label);
* a Zafar original without a gold;
* a blur level that is not a number.

Pure: a table in, a table (or the list of problems) out; vectorised over rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from faithjudge.audits.conditions import (
    FRAMEWORKS,
    LOTFINIA_CONDITIONS,
    MEDVIGIL_CONDITIONS,
    MULTI_PROBE_CONDITIONS,
    ORIGINAL,
    REFUSAL_LETTER,
    REFUSAL_PROBES,
    ZAFAR_CONDITIONS,
    markers_of,
)
from faithjudge.audits.load import AuditInputError, LineProblem
from faithjudge.audits.records import normalize_answer

__all__ = ["AuditTable", "prepare"]

_LETTERS = frozenset("abcde")
_YES_NO = frozenset({"yes", "no"})
_CONDITIONS_OF = {
    "lotfinia": LOTFINIA_CONDITIONS,
    "zafar": ZAFAR_CONDITIONS,
    "medvigil": MEDVIGIL_CONDITIONS,
}


@dataclass(frozen=True)
class AuditTable:
    """The validated records plus derived columns.

    ``frame`` adds ``key`` (one integer per (model, item)), ``ans`` and ``gold_n`` (normalised
    answer and gold; None when absent) and ``in_<framework>`` (the row belongs to that audit:
    its item holds a marker condition of the audit and its condition is one the audit reads).
    """

    frame: pd.DataFrame
    n_items: int

    def rows(self, framework: str) -> pd.DataFrame:
        return self.frame[self.frame[f"in_{framework}"].to_numpy()]

    def unused(self) -> int:
        """Records that no audit reads."""
        used = np.zeros(len(self.frame), dtype=bool)
        for name in FRAMEWORKS:
            used |= self.frame[f"in_{name}"].to_numpy()
        return int((~used).sum())


def _normalized(values: pd.Series) -> np.ndarray:
    codes, uniques = pd.factorize(values, use_na_sentinel=True)
    mapped = np.array([normalize_answer(u) for u in uniques] + [None], dtype=object)
    return mapped[np.where(codes < 0, len(uniques), codes)]


def _problems(
    frame: pd.DataFrame, mask: np.ndarray, field: str, template: str, **extra: object
) -> list[LineProblem]:
    """One problem per masked row; the message is formatted for those rows only."""
    if not mask.any():
        return []
    columns = {
        "model": frame["model"].to_numpy()[mask],
        "item": frame["item_id"].to_numpy()[mask],
        # messages speak of "original", the spelling users write, not the catalogue id
        "cond": np.where(
            frame["condition"].to_numpy(dtype=object)[mask] == ORIGINAL,
            "original",
            frame["condition"].to_numpy(dtype=object)[mask],
        ),
        "line": frame["line"].to_numpy()[mask],
    }
    columns.update({k: np.asarray(v, dtype=object)[mask] for k, v in extra.items()})
    names = list(columns)
    return [
        LineProblem(int(values[3]), field, template.format(**dict(zip(names, values, strict=True))))
        for values in zip(*columns.values(), strict=True)
    ]


def prepare(table: pd.DataFrame, *, source: str = "<records>") -> AuditTable:
    """Check the records against each other and add the derived columns.

    Raises:
        AuditInputError: every inconsistent record, by line and field.
    """
    frame = table.copy()
    model_code, _ = pd.factorize(frame["model"])
    item_code, items = pd.factorize(frame["item_id"])
    key, key_uniques = pd.factorize(model_code.astype(np.int64) * max(1, len(items)) + item_code)
    frame["key"] = key
    frame["ans"] = _normalized(frame["answer"])
    frame["gold_n"] = _normalized(frame["gold"])
    cond = frame["condition"].to_numpy(dtype=object)
    problems: list[LineProblem] = []

    variant = frame["variant"].where(frame["condition"].isin(MULTI_PROBE_CONDITIONS), None)
    ident = pd.DataFrame({"key": key, "cond": cond, "variant": variant.fillna("\0")})
    dup = ident.duplicated(keep="first").to_numpy()
    if dup.any():
        first = frame.groupby([ident["key"], ident["cond"], ident["variant"]])["line"].transform(
            "min"
        )
        problems += _problems(
            frame,
            dup,
            "condition",
            "duplicate record for model {model!r}, item {item!r}, condition {cond!r} (first at "
            "line {first}); several probes of one condition need distinct variants",
            first=first,
        )

    is_orig = cond == ORIGINAL
    has_orig = np.zeros(len(key_uniques), dtype=bool)
    has_orig[key[is_orig]] = True
    orphan = ~is_orig & ~has_orig[key]
    if orphan.any():
        problems += _problems(
            frame,
            orphan,
            "condition",
            "a {cond!r} record needs the original record (condition 'original') of model "
            "{model!r}, item {item!r}, which is missing",
        )

    for name in FRAMEWORKS:
        marked = np.zeros(len(key_uniques), dtype=bool)
        marked[key[np.isin(cond, list(markers_of(name)))]] = True
        frame[f"in_{name}"] = marked[key] & np.isin(cond, list(_CONDITIONS_OF[name]))

    problems += _medvigil_problems(frame)
    problems += _lotfinia_problems(frame, key, is_orig, len(key_uniques))
    problems += _zafar_problems(frame, is_orig)
    if problems:
        problems.sort(key=lambda p: p.line)
        raise AuditInputError(source=source, problems=problems)
    return AuditTable(frame=frame, n_items=len(key_uniques))


def _medvigil_problems(frame: pd.DataFrame) -> list[LineProblem]:
    inside = frame["in_medvigil"].to_numpy()
    gold = frame["gold_n"]
    not_letter = inside & ~gold.isin(_LETTERS).to_numpy()
    out = _problems(
        frame,
        not_letter,
        "gold",
        "MedVIGIL probe {cond!r} needs a gold letter A–E, got {g!r}",
        g=frame["gold"],
    )
    refusal = inside & frame["condition"].isin(REFUSAL_PROBES).to_numpy() & ~not_letter
    wrong = refusal & (gold != REFUSAL_LETTER).to_numpy()
    out += _problems(
        frame,
        wrong,
        "gold",
        "the correct letter of a {cond!r} probe is E (the safe action), got {g!r}",
        g=frame["gold"],
    )
    blur = inside & (frame["condition"] == "blur_sigma").to_numpy()
    if blur.any():
        sigma = pd.to_numeric(frame["variant"].where(blur, None), errors="coerce")
        bad = blur & ~(sigma >= 0).to_numpy()
        out += _problems(
            frame, bad, "variant", "a blur_sigma record needs its σ in px as variant, e.g. '8'"
        )
    return out


def _lotfinia_problems(
    frame: pd.DataFrame, key: np.ndarray, is_orig: np.ndarray, n_keys: int
) -> list[LineProblem]:
    inside = frame["in_lotfinia"].to_numpy()
    gold, ans = frame["gold_n"], frame["ans"]
    bad_gold = inside & is_orig & ~gold.isin(_YES_NO).to_numpy()
    out = _problems(
        frame,
        bad_gold,
        "gold",
        "Lotfinia cases are Yes/No: the original of item {item!r} needs gold 'Yes' or 'No', "
        "got {g!r}",
        g=frame["gold"],
    )
    bad_ans = inside & ans.notna().to_numpy() & ~ans.isin(_YES_NO).to_numpy()
    out += _problems(
        frame,
        bad_ans,
        "answer",
        "Lotfinia answers are 'Yes' or 'No' (null for an unparsed output), got {a!r}",
        a=frame["answer"],
    )
    original_gold = np.full(n_keys, None, dtype=object)
    original_gold[key[is_orig]] = gold.to_numpy()[is_orig]
    own = gold.to_numpy()
    expected = original_gold[key]
    differs = inside & ~is_orig & pd.notna(own) & pd.notna(expected) & (own != expected)
    out += _problems(
        frame,
        differs,
        "gold",
        "a {cond!r} record keeps the label of its original; its gold {g!r} differs from the "
        "original's {o!r}",
        g=frame["gold"],
        o=expected,
    )
    return out


def _zafar_problems(frame: pd.DataFrame, is_orig: np.ndarray) -> list[LineProblem]:
    missing = frame["in_zafar"].to_numpy() & is_orig & frame["gold_n"].isna().to_numpy()
    return _problems(
        frame,
        missing,
        "gold",
        "the original of item {item!r} (model {model!r}) needs a gold answer: Zafar scores "
        "every condition against it",
    )
