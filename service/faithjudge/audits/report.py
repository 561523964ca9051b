"""Running the selected audits over prepared records, and the JSON form of the result. Pure."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from faithjudge.audits.conditions import FRAMEWORKS
from faithjudge.audits.consistency import AuditTable
from faithjudge.audits.lotfinia import LotfiniaConfig, lotfinia_audit
from faithjudge.audits.medvigil import MedvigilConfig, medvigil_audit
from faithjudge.audits.zafar import ZafarConfig, zafar_audit

__all__ = ["AuditOptions", "jsonable", "run_audit"]


@dataclass(frozen=True)
class AuditOptions:
    """Which audits to run and their parameters (each defaults to its paper's settings)."""

    frameworks: tuple[str, ...] = FRAMEWORKS
    lotfinia: LotfiniaConfig = field(default_factory=LotfiniaConfig)
    zafar: ZafarConfig = field(default_factory=ZafarConfig)
    medvigil: MedvigilConfig = field(default_factory=MedvigilConfig)

    def with_resampling(self, *, seed: int | None, B: int | None) -> AuditOptions:
        """The same options with one seed and/or one number of resamples for every audit."""
        changes: dict[str, Any] = {}
        if seed is not None:
            changes["seed"] = seed
        if B is not None:
            changes["B"] = B
        if not changes:
            return self
        return replace(
            self,
            lotfinia=replace(self.lotfinia, **changes),
            zafar=replace(self.zafar, **changes),
            medvigil=replace(self.medvigil, **changes),
        )


def run_audit(table: AuditTable, options: AuditOptions | None = None) -> dict[str, Any]:
    """Every selected audit over ``table``; an audit without records says so instead."""
    options = options or AuditOptions()
    frame = table.frame
    summary = {
        "records": len(frame),
        "items": table.n_items,
        "models": sorted(frame["model"].unique().tolist()),
        "conditions": {str(k): int(v) for k, v in frame["condition"].value_counts().items()},
        "records_per_audit": {name: int(frame[f"in_{name}"].sum()) for name in FRAMEWORKS},
        "records_unused": table.unused(),
        "parse_failures": int(frame["ans"].isna().sum()),
    }
    runners = {
        "lotfinia": lambda rows: lotfinia_audit(rows, options.lotfinia),
        "zafar": lambda rows: zafar_audit(rows, options.zafar),
        "medvigil": lambda rows: medvigil_audit(rows, options.medvigil),
    }
    audits: dict[str, Any] = {}
    for name in options.frameworks:
        rows = table.rows(name)
        if rows.empty:
            audits[name] = {"framework": name, "skipped": "no record belongs to this audit"}
        else:
            audits[name] = runners[name](rows)
    document: dict[str, Any] = jsonable({"summary": summary, "audits": audits})
    return document


def jsonable(value: Any) -> Any:
    """Plain JSON types: numpy scalars unwrapped, NaN/inf as None, tuples as lists."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return [jsonable(v) for v in value.tolist()]
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, (np.integer, int)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        v = float(value)
        return v if math.isfinite(v) else None
    return value
