"""Lotfinia causal image audit (METHODS §2): CGR, UAR, IS, GSP, categories, calibration, tests.

Per model, over its Yes/No cases (an item joins when it holds a swap or a mask record):

* accuracy, sensitivity, specificity over parsed originals;
* CGR: correct-on-original cases whose target-mask answer differs (target parsed);
* UAR: correct-on-original cases whose swap answer equals the original (swap parsed);
* IS: cases whose irrelevant-mask answer equals the original, over cases with both parsed;
  by default only correct-on-original cases count (this reproduces Table 1; the paper's Eq. 8
  form is ``is_condition_on_correct=False``);
* GSP = CGR − (100 − IS); the image-contingent fraction = 100 − UAR;
* the behavioural category (``ignores_image``, ``unstable``, ``uses_image`` or ``unassigned``
  for the cases the paper's rule does not cover) with the rule that decided it;
* per-finding CGR with Wilson intervals; ECE / Brier / AUROC of P(Yes); confidence by regime;
* subgroup permutation tests (BH within each model) and paired bootstrap comparisons between
  models (BH per family).

Rates are reported in % with the analytical SE and a percentile bootstrap CI. Pure.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from faithjudge.audits.conditions import LOTFINIA_MARKERS, ORIGINAL
from faithjudge.audits.grid import ItemGrid, item_grid
from faithjudge.audits.stats import (
    Proportion,
    auroc,
    benjamini_hochberg,
    brier,
    ece,
    hanley_mcneil_se,
    paired_bootstrap,
    permutation_test,
    proportion,
    rng_for,
    wilson_interval,
)

__all__ = ["LotfiniaConfig", "categorize", "lotfinia_audit"]

Category = Literal["ignores_image", "unstable", "uses_image", "unassigned"]
_SUBGROUP_TESTS = (
    ("CGR", "sex"),
    ("CGR", "view"),
    ("CGR", "age_group"),
    ("UAR", "sex"),
    ("UAR", "age_group"),
)


@dataclass(frozen=True)
class LotfiniaConfig:
    """Parameters of the audit; defaults follow the paper (METHODS §2.4–2.6)."""

    B: int = 10_000
    seed: int = 0
    permutations: int = 1_000
    se: Literal["analytical", "bootstrap"] = "analytical"  # Methods text says bootstrap SD
    is_condition_on_correct: bool = True
    unstable_below: float = 70.0  # IS < T: unstable
    uses_is_at_least: float = 90.0
    ignores_min_cases: int = 100
    ece_bins: int = 10
    ece_form: Literal["p_yes_vs_label", "confidence_vs_correct"] = "p_yes_vs_label"
    calibration_degenerate_share: float = 0.9  # N/A when more confidences are exactly 0 or 1
    regime_confidence: Literal["p_yes", "p_answer"] = "p_yes"
    regime_unparsed_as_incorrect: bool = False
    finding_min_interpret: int = 10
    text_only_models: tuple[str, ...] = ()


def _pct(value: float | None) -> float | None:
    return None if value is None else 100.0 * value


def _rate(p: Proportion) -> dict[str, Any]:
    return {
        "value": _pct(p.value),
        "se": _pct(p.se),
        "low": _pct(p.low),
        "high": _pct(p.high),
        "k": p.k,
        "n": p.n,
    }


def categorize(
    cgr: dict[str, Any], uar: dict[str, Any], is_: dict[str, Any], config: LotfiniaConfig
) -> tuple[Category, str]:
    """The behavioural category of one model from its CGR, UAR and IS (values in %) and the
    rule that decided it. Order: ignores image, unstable, uses image, else unassigned."""
    n_min = config.ignores_min_cases
    if (
        cgr["value"] == 0
        and uar["value"] == 100
        and is_["value"] == 100
        and min(cgr["n"], uar["n"], is_["n"]) >= n_min
    ):
        return "ignores_image", f"CGR = 0, UAR = 100 and IS = 100, each on >= {n_min} cases"
    if is_["value"] is not None and is_["value"] < config.unstable_below:
        return "unstable", f"IS = {is_['value']:.1f} < {config.unstable_below:g}"
    if (
        cgr["value"] is not None
        and cgr["value"] > 0
        and cgr["low"] is not None
        and cgr["low"] > 0
        and is_["value"] is not None
        and is_["value"] >= config.uses_is_at_least
    ):
        return "uses_image", (
            f"CGR > 0 with a 95% CI excluding 0 and IS = {is_['value']:.1f} "
            f">= {config.uses_is_at_least:g}"
        )
    return (
        "unassigned",
        "no rule of the paper applies (e.g. 70 <= IS < 90, a CGR CI touching "
        "0, or too few cases for 'ignores image')",
    )


@dataclass(frozen=True)
class _Cases:
    """Per-case indicators of one audit (aligned with the grid's items)."""

    parsed: np.ndarray
    correct: np.ndarray
    yes: np.ndarray
    label_yes: np.ndarray
    cgr_elig: np.ndarray
    cgr_hit: np.ndarray
    uar_elig: np.ndarray
    uar_hit: np.ndarray
    is_elig: np.ndarray
    is_hit: np.ndarray


def _cases(grid: ItemGrid, config: LotfiniaConfig) -> _Cases:
    o = grid.answer(ORIGINAL)
    s, t, i = (grid.answer(c) for c in ("swap_same_label", "target_mask", "irrelevant_mask"))
    yes = o == grid.code_of("yes")
    parsed = o >= 0
    correct = parsed & (o == grid.gold)
    base = correct if config.is_condition_on_correct else parsed
    return _Cases(
        parsed=parsed,
        correct=correct,
        yes=yes,
        label_yes=grid.gold == grid.code_of("yes"),
        cgr_elig=correct & (t >= 0),
        cgr_hit=correct & (t >= 0) & (t != o),
        uar_elig=correct & (s >= 0),
        uar_hit=correct & (s >= 0) & (s == o),
        is_elig=base & (i >= 0),
        is_hit=base & (i >= 0) & (i == o),
    )


def lotfinia_audit(rows: pd.DataFrame, config: LotfiniaConfig | None = None) -> dict[str, Any]:
    """The Lotfinia audit of the prepared records ``rows`` (those with ``in_lotfinia``)."""
    config = config or LotfiniaConfig()
    grid = item_grid(rows, LOTFINIA_MARKERS | {ORIGINAL})
    cases = _cases(grid, config)
    items = grid.items
    models = sorted(items["model"].unique()) if len(items) else []
    model_of = items["model"].to_numpy(dtype=object)
    out_models = []
    for model in models:
        sel = model_of == model
        out_models.append(_model_block(model, sel, grid, cases, config))
    return {
        "framework": "lotfinia",
        "config": {**asdict(config), "text_only_models": list(config.text_only_models)},
        "n_records": len(rows),
        "n_items": len(items),
        "models": out_models,
        "comparisons": _comparisons(grid, cases, config),
    }


def _model_block(
    model: str, sel: np.ndarray, grid: ItemGrid, c: _Cases, config: LotfiniaConfig
) -> dict[str, Any]:
    def rate(name: str, hit: np.ndarray, elig: np.ndarray) -> dict[str, Any]:
        k, n = int((hit & elig & sel).sum()), int((elig & sel).sum())
        rng = rng_for(config.seed, f"lotfinia/{model}/{name}")
        return _rate(proportion(k, n, B=config.B, rng=rng, se=config.se))

    acc = rate("accuracy", c.correct, c.parsed)
    sens = rate("sensitivity", c.yes, c.parsed & c.label_yes)
    spec = rate("specificity", ~c.yes, c.parsed & ~c.label_yes)
    cgr = rate("CGR", c.cgr_hit, c.cgr_elig)
    uar = rate("UAR", c.uar_hit, c.uar_elig)
    is_ = rate("IS", c.is_hit, c.is_elig)
    gsp = (
        None
        if cgr["value"] is None or is_["value"] is None
        else cgr["value"] - (100 - is_["value"])
    )
    category, rule = categorize(cgr, uar, is_, config)
    return {
        "model": model,
        "n_cases": int(sel.sum()),
        "text_only": model in config.text_only_models,
        "accuracy": acc,
        "sensitivity": sens,
        "specificity": spec,
        "CGR": cgr,
        "UAR": uar,
        "IS": {**is_, "conditioned_on_correct": config.is_condition_on_correct},
        "GSP": gsp,
        "image_contingent": None if uar["value"] is None else 100 - uar["value"],
        "category": category,
        "category_rule": rule,
        "per_finding_CGR": _per_finding(sel, grid, c, config),
        "calibration": _calibration(sel, grid, c, config),
        "confidence_by_regime": _regimes(sel, grid, c, config),
        "subgroups": _subgroups(model, sel, grid, c, config),
    }


def _per_finding(
    sel: np.ndarray, grid: ItemGrid, c: _Cases, config: LotfiniaConfig
) -> list[dict[str, Any]]:
    finding = grid.items["finding"].to_numpy(dtype=object)
    elig = sel & c.cgr_elig
    out = []
    for name in sorted({f for f in finding[elig] if f is not None}):
        mask = elig & (finding == name)
        n, k = int(mask.sum()), int((mask & c.cgr_hit).sum())
        low, high = wilson_interval(k, n) or (None, None)
        out.append(
            {
                "finding": name,
                "k": k,
                "n": n,
                "value": 100 * k / n,
                "wilson_low": _pct(low),
                "wilson_high": _pct(high),
                "interpreted": n >= config.finding_min_interpret,
            }
        )
    return out


def _calibration(
    sel: np.ndarray, grid: ItemGrid, c: _Cases, config: LotfiniaConfig
) -> dict[str, Any]:
    p = grid.items["p_yes"].to_numpy(dtype=float)
    mask = sel & c.parsed & np.isfinite(p)
    n = int(mask.sum())
    empty = {"n": n, "ECE": None, "Brier": None, "AUROC": None, "AUROC_se": None}
    if n == 0:
        return {**empty, "reason": "no P(Yes) on parsed original cases"}
    pm, label = p[mask], c.label_yes[mask].astype(float)
    extreme = float(np.mean((pm == 0) | (pm == 1)))
    if extreme > config.calibration_degenerate_share:
        return {
            **empty,
            "reason": f"{100 * extreme:.1f}% of confidences are exactly 0 or 1 "
            f"(> {100 * config.calibration_degenerate_share:g}%): N/A",
        }
    if config.ece_form == "p_yes_vs_label":
        e = ece(pm, label, n_bins=config.ece_bins)
    else:
        said_yes = c.yes[mask]
        e = ece(np.where(said_yes, pm, 1 - pm), c.correct[mask], n_bins=config.ece_bins)
    area = auroc(pm, label.astype(bool))
    n_pos = int(label.sum())
    return {
        "n": n,
        "ECE": _pct(e),
        "ECE_form": config.ece_form,
        "Brier": _pct(brier(pm, label)),
        "AUROC": _pct(area),
        "AUROC_se": None if area is None else _pct(hanley_mcneil_se(area, n_pos, n - n_pos)),
        "reason": None,
    }


def _regimes(sel: np.ndarray, grid: ItemGrid, c: _Cases, config: LotfiniaConfig) -> dict[str, Any]:
    p = grid.items["p_yes"].to_numpy(dtype=float)
    conf = p if config.regime_confidence == "p_yes" else np.where(c.yes, p, 1 - p)
    grounded = c.cgr_hit
    wrong = (c.parsed | config.regime_unparsed_as_incorrect) & ~c.correct
    out: dict[str, Any] = {"confidence": config.regime_confidence}
    for name, mask in (
        ("grounded_correct", c.correct & grounded),
        ("ungrounded_correct", c.correct & ~grounded),
        ("incorrect", wrong),
    ):
        values = conf[sel & mask & np.isfinite(conf)]
        out[name] = {
            "n": int(values.size),
            "mean": _pct(float(values.mean())) if values.size else None,
            "sd": _pct(float(values.std(ddof=1))) if values.size > 1 else None,
        }
    return out


def _subgroups(
    model: str, sel: np.ndarray, grid: ItemGrid, c: _Cases, config: LotfiniaConfig
) -> list[dict[str, Any]]:
    tests: list[dict[str, Any]] = []
    for metric, by in _SUBGROUP_TESTS:
        elig, hit = (c.cgr_elig, c.cgr_hit) if metric == "CGR" else (c.uar_elig, c.uar_hit)
        labels = grid.items[by].to_numpy(dtype=object)
        mask = sel & elig & pd.notna(labels)
        result = permutation_test(
            hit[mask].astype(float),
            labels[mask],
            B=config.permutations,
            rng=rng_for(config.seed, f"lotfinia/{model}/subgroup/{metric}/{by}"),
        )
        tests.append({"metric": metric, "by": by, **result})
    p_values: list[float] = [np.nan if t["p"] is None else float(t["p"]) for t in tests]
    q = benjamini_hochberg(p_values)
    for test, value in zip(tests, q, strict=True):
        test["q"] = None if np.isnan(value) else float(value)
    return tests


def _comparisons(grid: ItemGrid, c: _Cases, config: LotfiniaConfig) -> list[dict[str, Any]]:
    """Paired bootstrap differences (A − B, in pp) with BH per family (METHODS §2.6)."""
    items = grid.items
    if items.empty:
        return []
    source = items["source"].fillna("all").to_numpy(dtype=object)
    frame = pd.DataFrame(
        {
            "dataset": source,
            "item_id": items["item_id"].to_numpy(dtype=object),
            "model": items["model"].to_numpy(dtype=object),
            "acc": np.where(c.parsed, c.correct.astype(float), np.nan),
            "uar": np.where(c.uar_elig, c.uar_hit.astype(float), np.nan),
        }
    )
    out: list[dict[str, Any]] = []
    baselines = [m for m in config.text_only_models if m in set(frame["model"])]
    for dataset, part in frame.groupby("dataset", sort=True):
        models = sorted(part["model"].unique())
        wide = {
            m: part.pivot_table(index="item_id", columns="model", values=m, aggfunc="first")
            for m in ("acc", "uar")
        }
        family: list[dict[str, Any]] = []
        for a, b in itertools.combinations(models, 2):
            family.append(_pair(wide["acc"], a, b, "accuracy", str(dataset), config))
        out += _with_q(family, f"pairwise accuracy / {dataset}")
        for base in baselines:
            for metric, name in (("acc", "accuracy"), ("uar", "UAR")):
                fam = [
                    _pair(wide[metric], m, base, name, str(dataset), config)
                    for m in models
                    if m != base and m not in baselines
                ]
                out += _with_q(fam, f"{name} vs text-only {base} / {dataset}")
    return out


def _pair(
    wide: pd.DataFrame, a: str, b: str, metric: str, dataset: str, config: LotfiniaConfig
) -> dict[str, Any]:
    if a not in wide.columns or b not in wide.columns:
        d = np.zeros(0)
    else:
        both = wide[[a, b]].dropna()
        d = (both[a] - both[b]).to_numpy(dtype=float)
    rng = rng_for(config.seed, f"lotfinia/paired/{dataset}/{metric}/{a}/{b}")
    r = paired_bootstrap(d, B=config.B, rng=rng)
    return {
        "metric": metric,
        "dataset": dataset,
        "a": a,
        "b": b,
        "n_shared": r.n,
        "delta": _pct(r.delta),
        "sd": _pct(r.sd),
        "low": _pct(r.low),
        "high": _pct(r.high),
        "p": r.p,
    }


def _with_q(family: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    q = benjamini_hochberg([np.nan if f["p"] is None else f["p"] for f in family])
    return [
        {**f, "family": name, "q": None if np.isnan(v) else float(v)}
        for f, v in zip(family, q, strict=True)
    ]
