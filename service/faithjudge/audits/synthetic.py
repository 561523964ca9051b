"""Seeded synthetic answer records for demos, tests and the scale benchmark.

Made-up models with tunable behaviour (how often they are right, flip under a target mask, keep
their answer under a swap, refuse a trap ...). Nothing here comes from real model outputs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

__all__ = ["lotfinia_records", "medvigil_records", "synthetic_records", "zafar_records"]

_FINDINGS = ("atelectasis", "cardiomegaly", "edema", "pleural_effusion", "pneumothorax")
_AGE = ("<50", "50-70", ">70")
_TIERS = ("L1", "L2", "L3", "L4", "L5")
_LETTERS = ("A", "B", "C", "D", "E")


def _flip_yes_no(answer: str) -> str:
    return "No" if answer == "Yes" else "Yes"


def lotfinia_records(
    models: int = 3, cases: int = 200, *, seed: int = 0, masked_share: float = 0.4
) -> Iterator[dict[str, Any]]:
    """Yes/No cases; a ``masked_share`` of them (MS-CXR-like) also get target/irrelevant masks.

    Model m is right with probability 0.55 + 0.1·m, flips under the target mask with 0.1 + 0.15·m,
    keeps its answer under a swap with 0.95 − 0.05·m; one output in 100 is unparsed.
    """
    rng = np.random.default_rng(seed)
    gold = rng.random(cases) < 0.6
    masked = rng.random(cases) < masked_share
    finding = rng.integers(0, len(_FINDINGS), cases)
    sex = rng.integers(0, 2, cases)
    view = rng.integers(0, 2, cases)
    age = rng.integers(0, 3, cases)
    for m in range(models):
        right = rng.random(cases) < 0.55 + 0.1 * m
        flips = rng.random(cases) < 0.1 + 0.15 * m
        keeps = rng.random(cases) < 0.95 - 0.05 * m
        stable = rng.random(cases) < 0.97
        unparsed = rng.random((4, cases)) < 0.01
        p_noise = rng.random(cases)
        for j in range(cases):
            y = "Yes" if gold[j] else "No"
            o = y if right[j] else _flip_yes_no(y)
            meta = {
                "finding": _FINDINGS[finding[j]],
                "sex": "MF"[sex[j]],
                "view": ("PA", "AP")[view[j]],
                "age_group": _AGE[age[j]],
                "source": "MS-CXR" if masked[j] else "MIMIC-CXR",
            }
            p_yes = 0.5 + (0.45 if o == "Yes" else -0.45) * p_noise[j]
            answers = {
                "original": o,
                "swap_same_label": o if keeps[j] else _flip_yes_no(o),
            }
            if masked[j]:
                answers["target_mask"] = _flip_yes_no(o) if flips[j] else o
                answers["irrelevant_mask"] = o if stable[j] else _flip_yes_no(o)
            for k, (condition, answer) in enumerate(answers.items()):
                parsed = None if unparsed[k, j] else answer
                yield {
                    "model": f"lotfinia-vlm-{m}",
                    "item_id": f"cxr-{j:06d}",
                    "condition": condition,
                    "raw_output": answer if parsed else "I cannot tell.",
                    "answer": parsed,
                    "gold": y,
                    "p_yes": round(float(p_yes), 4) if condition == "original" else None,
                    "metadata": meta,
                }


def zafar_records(
    models: int = 2, items: int = 100, *, benchmarks: int = 4, seed: int = 1
) -> Iterator[dict[str, Any]]:
    """Four-option items in ``benchmarks`` strata under the six Zafar conditions."""
    rng = np.random.default_rng(seed)
    options = ("A", "B", "C", "D")
    conditions = ("original", "blank", "shuffle", "no_image", "hard_negative", "corrupt")
    skill = {
        "original": 0.6,
        "blank": 0.45,
        "shuffle": 0.45,
        "no_image": 0.4,
        "hard_negative": 0.35,
        "corrupt": 0.5,
    }
    for b in range(benchmarks):
        gold = rng.integers(0, 4, items)
        for m in range(models):
            for condition in conditions:
                right = rng.random(items) < skill[condition] + 0.05 * m
                other = (gold + rng.integers(1, 4, items)) % 4
                for j in range(items):
                    letter = options[gold[j] if right[j] else other[j]]
                    yield {
                        "model": f"zafar-vlm-{m}",
                        "item_id": f"bench{b}-{j:05d}",
                        "condition": condition,
                        "raw_output": f"The answer is {letter}.",
                        "answer": letter,
                        "gold": options[gold[j]] if condition == "original" else None,
                        "question": "Which abnormality is shown?",
                        "rationale": f"The image shows an opacity in the region of {letter}."
                        if condition in ("original", "no_image", "shuffle")
                        else None,
                        "metadata": {"source": f"benchmark-{b}"},
                    }


def medvigil_records(
    models: int = 3, cases: int = 60, *, seed: int = 2
) -> Iterator[dict[str, Any]]:
    """Five-letter MCQ cases with the MedVIGIL probe battery (two traps per case)."""
    rng = np.random.default_rng(seed)
    tiers = rng.integers(0, 5, cases)
    gold = rng.integers(0, 4, cases)
    probes = (
        ("original", None),
        ("paraphrase", None),
        ("negation", None),
        ("specificity_drop", None),
        ("knowledge_only", None),
        ("false_premise_trap", "1"),
        ("false_premise_trap", "2"),
        ("roi_only", None),
        ("roi_masked", None),
        ("lr_flip", None),
    )
    for m in range(models):
        skill = 0.5 + 0.12 * m
        for j in range(cases):
            for condition, variant in probes:
                refusal = condition in ("false_premise_trap", "roi_masked")
                g = 4 if refusal else int((gold[j] + (condition == "negation")) % 4)
                p = skill - (0.08 * tiers[j] if refusal else 0.0)
                if condition == "roi_masked":
                    p -= 0.2
                letter = g if rng.random() < p else int((g + rng.integers(1, 5)) % 5)
                yield {
                    "model": f"medvigil-vlm-{m}",
                    "item_id": f"case-{j:04d}",
                    "condition": condition,
                    "variant": variant,
                    "raw_output": _LETTERS[letter],
                    "answer": _LETTERS[letter],
                    "gold": _LETTERS[g],
                    "metadata": {"risk_tier": _TIERS[tiers[j]], "source": "VQA-RAD"},
                }


def synthetic_records(scale: int = 1, *, seed: int = 0) -> Iterator[dict[str, Any]]:
    """Records for all three audits; ``scale`` multiplies the number of cases."""
    yield from lotfinia_records(cases=200 * scale, seed=seed)
    yield from zafar_records(items=50 * scale, seed=seed + 1)
    yield from medvigil_records(cases=60 * scale, seed=seed + 2)
