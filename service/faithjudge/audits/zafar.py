"""Zafar counterfactual grounding audit (METHODS §3): VRS, BD, IS_pred/IS_raw, VBR, VHR, HN-GAP,
RCR, NVCR/HVRR, and paired model comparisons.

An item joins when it holds a blank, shuffled, hard-negative or corrupted record. Every
condition is scored against the ORIGINAL's gold (δ^c = 1[answer under c = a*]), including the
hard negative. An unparsed answer is wrong and equals no other answer. Each metric is a mean of
an item-level value over the items holding the records it needs, computed per benchmark
(``metadata.source``) and macro-averaged over benchmarks. Values in %, differences in pp.

Comparisons (A − B) use the paired bootstrap stratified by benchmark (items resampled within
each benchmark, macro mean recomputed per replicate), the two-sided McNemar test for 0/1
outcomes, and P(Δ > 0) / P(Δ < 0) as shares of replicates, with the direction of improvement of
each metric; a difference is "significant" when its 95% CI excludes 0. Pure.
"""

from __future__ import annotations

import itertools
import re
import warnings
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from faithjudge.audits.conditions import ORIGINAL, ZAFAR_CONDITIONS
from faithjudge.audits.grid import ItemGrid, item_grid
from faithjudge.audits.stats import mcnemar, mean_bootstrap, rng_for, summarise_replicates

__all__ = ["IMPROVES", "ITEM_METRICS", "ZafarConfig", "zafar_audit"]

# item-level columns; metrics are their means (× 100)
ITEM_METRICS: tuple[str, ...] = (
    "acc_real",
    "acc_blank",
    "acc_shuffle",
    "acc_noimg",
    "acc_hn",
    "acc_corrupt",
    "VRS",
    "BD",
    "IS_pred",
    "IS_raw",
    "VBR",
    "VHR",
    "HN_GAP",
)
IMPROVES: dict[str, str] = {
    "acc_real": "higher",
    "VRS": "higher",
    "BD": "higher",
    "IS_pred": "lower",
    "IS_raw": "lower",
    "VBR": "higher",
    "VHR": "lower",
    "HN_GAP": "higher",
}
_BINARY = ("acc_real", "IS_pred", "VBR", "VHR")
_COMPARED = tuple(IMPROVES)

# Our own short list of words that make a sentence a claim about image content.
_VISUAL_TERMS = frozenset(
    re.findall(
        r"\w+",
        """
        opacity opacities opacification shadow density dense lucency lucent radiolucent
        radiopaque bright brighter dark darker hyperdense hypodense hyperintense hypointense
        enhancing enhancement mass nodule nodules lesion lesions consolidation effusion
        infiltrate contour margin margins border borders calcification calcified blunting
        blunted silhouette arrow arrows visible visualized visualised seen shows showing
        demonstrates depicted appears appearance region area shaded stain stained staining cell
        cells nuclei tissue fracture widening widened enlarged enlargement thickening thickened
        air fluid gas
        """,
    )
)
_SENTENCES = re.compile(r"[.!?\n]+")
_WORDS = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class ZafarConfig:
    """Parameters; defaults follow the paper (B = 10,000, seed 42)."""

    B: int = 10_000
    seed: int = 42
    reference_model: str | None = None  # compare every model with it; None: all pairs
    mcnemar_exact_below: int = 25
    # Eq. 4 (shuffled right, real wrong); the prose reads it as "the same wrong answer under the
    # shuffled image" (real wrong, shuffled answer equal to the real one)
    vhr_form: Literal["eq4", "same_wrong"] = "eq4"


def _words(text: str | None) -> set[str]:
    return set(_WORDS.findall(text.casefold())) if text else set()


def _item_values(grid: ItemGrid, vhr_form: str = "eq4") -> pd.DataFrame:
    gold = grid.gold
    nan = np.nan

    def correct(cond: str) -> np.ndarray:
        a = grid.answer(cond)
        return np.where(a == -2, nan, ((a >= 0) & (a == gold)).astype(float))

    real, blank, shuf = correct(ORIGINAL), correct("blank"), correct("shuffle")
    noimg, hn, cor = correct("no_image"), correct("hard_negative"), correct("corrupt")
    a_real, a_shuf = grid.answer(ORIGINAL), grid.answer("shuffle")
    same = np.where(
        a_shuf == -2, nan, ((a_real >= 0) & (a_shuf >= 0) & (a_real == a_shuf)).astype(float)
    )
    raw_real, raw_shuf = grid.column(ORIGINAL, "raw_output"), grid.column("shuffle", "raw_output")
    both_raw = pd.notna(raw_real) & pd.notna(raw_shuf)
    same_raw = np.where(both_raw, (raw_real == raw_shuf).astype(float), nan)
    return pd.DataFrame(
        {
            "acc_real": real,
            "acc_blank": blank,
            "acc_shuffle": shuf,
            "acc_noimg": noimg,
            "acc_hn": hn,
            "acc_corrupt": cor,
            "VRS": real - shuf,
            "BD": real - blank,
            "IS_pred": same,
            "IS_raw": same_raw,
            "VBR": np.where(np.isnan(noimg), nan, ((real == 1) & (noimg == 0)).astype(float)),
            "VHR": np.where(
                np.isnan(shuf),
                nan,
                ((shuf == 1) & (real == 0)).astype(float)
                if vhr_form == "eq4"
                else ((real == 0) & (same == 1)).astype(float),
            ),
            "HN_GAP": real - hn,
        }
    )


def zafar_audit(rows: pd.DataFrame, config: ZafarConfig | None = None) -> dict[str, Any]:
    """The Zafar audit of the prepared records ``rows`` (those with ``in_zafar``)."""
    config = config or ZafarConfig()
    grid = item_grid(rows, ZAFAR_CONDITIONS)
    values = _item_values(grid, config.vhr_form)
    values["model"] = grid.items["model"].to_numpy(dtype=object)
    values["benchmark"] = grid.items["source"].fillna("all").to_numpy(dtype=object)
    values["item_id"] = grid.items["item_id"].to_numpy(dtype=object)
    models = []
    for model, part in values.groupby("model", sort=True):
        per_bench = part.groupby("benchmark", sort=True)[list(ITEM_METRICS)].mean()
        counts = part.groupby("benchmark", sort=True)[list(ITEM_METRICS)].count()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            macro = per_bench.mean(axis=0, skipna=True)
        sel = grid.items["model"].to_numpy(dtype=object) == model
        models.append(
            {
                "model": model,
                "n_items": len(part),
                "benchmarks": {
                    str(b): {m: _cell(per_bench.at[b, m], counts.at[b, m]) for m in ITEM_METRICS}
                    for b in per_bench.index
                },
                "macro": {m: _pct(macro[m]) for m in ITEM_METRICS},
                "rationales": _rationale_metrics(grid, sel),
            }
        )
    return {
        "framework": "zafar",
        "config": asdict(config),
        "n_records": len(rows),
        "n_items": len(grid.items),
        "improves": IMPROVES,
        "models": models,
        "comparisons": _comparisons(values, config),
    }


def _pct(value: float | None) -> float | None:
    return None if value is None or not np.isfinite(value) else 100.0 * float(value)


def _cell(value: float, n: int) -> dict[str, Any]:
    return {"value": _pct(value), "n": int(n)}


def _rationale_metrics(grid: ItemGrid, sel: np.ndarray) -> dict[str, Any]:
    """RCR per perturbed condition and the experimental NVCR / HVRR (lexicon-based)."""
    real = grid.column(ORIGINAL, "rationale")[sel]
    if not pd.notna(real).any():
        reason = "no rationale text in the original records"
        return {"RCR": None, "NVCR": None, "HVRR": None, "reason": reason}
    rcr: dict[str, Any] = {}
    for cond in sorted(ZAFAR_CONDITIONS - {ORIGINAL}):
        other = grid.column(cond, "rationale")[sel]
        distances = []
        for a, b in zip(real, other, strict=True):
            if pd.isna(a) or pd.isna(b):
                continue
            ua, ub = _words(a), _words(b)
            union = ua | ub
            distances.append(1 - len(ua & ub) / len(union) if union else 0.0)
        rcr[cond] = (
            {"value": 100 * float(np.mean(distances)), "n": len(distances)} if distances else None
        )
    question = grid.items["question"].to_numpy(dtype=object)[sel]
    noimg = grid.column("no_image", "rationale")[sel]
    sentences = claims = survived = claims_with_noimg = 0
    for text, q, blind in zip(real, question, noimg, strict=True):
        if pd.isna(text):
            continue
        asked = _words(q) if not pd.isna(q) else set()
        blind_words = _words(blind) if not pd.isna(blind) else None
        for sentence in _SENTENCES.split(text):
            words = _words(sentence)
            if not words:
                continue
            sentences += 1
            novel = (words & _VISUAL_TERMS) - asked
            if novel:
                claims += 1
                if blind_words is not None:
                    claims_with_noimg += 1
                    survived += bool(novel & blind_words)
    return {
        "RCR": rcr,
        "NVCR": {"value": 100 * claims / sentences, "n_sentences": sentences}
        if sentences
        else None,
        "HVRR": {"value": 100 * survived / claims_with_noimg, "n_claims": claims_with_noimg}
        if claims_with_noimg
        else None,
        "experimental": "NVCR/HVRR use a fixed visual-term lexicon (not a validated tagger)",
        "reason": None,
    }


def _comparisons(values: pd.DataFrame, config: ZafarConfig) -> list[dict[str, Any]]:
    models = sorted(values["model"].unique())
    if config.reference_model is not None:
        pairs = [(m, config.reference_model) for m in models if m != config.reference_model]
    else:
        pairs = [(b, a) for a, b in itertools.combinations(models, 2)]
    return [_compare(values, a, b, config) for a, b in pairs if a in models and b in models]


def _compare(values: pd.DataFrame, a: str, b: str, config: ZafarConfig) -> dict[str, Any]:
    cols = list(_COMPARED)
    va = values[values["model"] == a].set_index(["benchmark", "item_id"])[cols]
    vb = values[values["model"] == b].set_index(["benchmark", "item_id"])[cols]
    joined = va.add_suffix("_a").join(vb.add_suffix("_b"), how="inner")
    left = joined[[f"{c}_a" for c in cols]].to_numpy(dtype=float)
    right = joined[[f"{c}_b" for c in cols]].to_numpy(dtype=float)
    diff = left - right
    bench = joined.index.get_level_values(0).to_numpy(dtype=object)
    names = sorted(set(bench))
    # each metric's CI is marginal, so each column is resampled on its own: a column takes a
    # handful of values, and a multinomial over them is the exact item bootstrap of its mean
    points = np.full((len(names), len(cols)), np.nan)
    samples = np.full((len(names), config.B, len(cols)), np.nan)
    for i, name in enumerate(names):
        rows = diff[bench == name]
        for j, col in enumerate(cols):
            rng = rng_for(config.seed, f"zafar/paired/{a}/{b}/{name}/{col}")
            points[i, j], samples[i, :, j] = mean_bootstrap(rows[:, j], B=config.B, rng=rng)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        macro_point = np.nanmean(points, axis=0) if names else np.full(len(cols), np.nan)
        macro_samples = np.nanmean(samples, axis=0) if names else np.zeros((0, len(cols)))
    metrics = {}
    for j, col in enumerate(cols):
        entry = _delta(len(joined), macro_point[j], macro_samples[:, j] if names else np.zeros(0))
        entry["improves"] = IMPROVES[col]
        if col in _BINARY:
            ok = ~np.isnan(left[:, j]) & ~np.isnan(right[:, j])
            b10 = int(((left[:, j] == 1) & (right[:, j] == 0) & ok).sum())
            b01 = int(((left[:, j] == 0) & (right[:, j] == 1) & ok).sum())
            method, p = mcnemar(b10, b01, exact_below=config.mcnemar_exact_below)
            entry["mcnemar"] = {"a_only": b10, "b_only": b01, "method": method, "p": p}
        entry["per_benchmark"] = {
            str(name): _delta(int((bench == name).sum()), points[i, j], samples[i, :, j])
            for i, name in enumerate(names)
        }
        metrics[col] = entry
    return {"a": a, "b": b, "n_paired": len(joined), "metrics": metrics}


def _delta(n: int, point: float, samples: np.ndarray) -> dict[str, Any]:
    if not np.isfinite(point):
        return {
            "n": n,
            "delta": None,
            "low": None,
            "high": None,
            "p_gt0": None,
            "p_lt0": None,
            "significant": None,
        }
    s = summarise_replicates(n, float(point), np.asarray(samples, dtype=float))
    significant = s.low is not None and s.high is not None and (s.low > 0 or s.high < 0)
    return {
        "n": n,
        "delta": _pct(s.delta),
        "low": _pct(s.low),
        "high": _pct(s.high),
        "p_gt0": s.p_gt0,
        "p_lt0": s.p_lt0,
        "significant": significant,
    }
