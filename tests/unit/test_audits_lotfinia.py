"""Lotfinia audit: Table 1 reproduced from counts, the published categories, the options the
paper leaves open (IS conditioning, ECE form, the unassigned gap), tests and comparisons."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from faithjudge.audits import LotfiniaConfig, lotfinia_audit, parse_lines, prepare
from faithjudge.audits.lotfinia import categorize

FAST = {"B": 400, "permutations": 200}


def _no(answer: str) -> str:
    return "No" if answer == "Yes" else "Yes"


def _cases(
    model: str,
    *,
    total: int,
    correct: int,
    masked_correct: int,
    masked_wrong: int,
    flips: int,
    stable: int,
    swap_same: int,
    same_answer_everywhere: bool = False,
    p_yes: float | None = None,
) -> list[dict[str, Any]]:
    """Records with exactly the given counts: the first ``correct`` cases are right; masked
    cases are the first ``masked_correct`` right ones plus ``masked_wrong`` wrong ones."""
    out = []
    for j in range(total):
        right = j < correct
        gold = "Yes" if j % 3 else "No"
        o = gold if right else _no(gold)
        meta = {
            "sex": "MF"[j % 2],
            "view": ("PA", "AP")[j % 5 == 0],
            "age_group": ("<50", "50-70", ">70")[j % 3],
            "finding": ("edema", "atelectasis")[j % 2],
            "source": "probe",
        }
        base = {"model": model, "item_id": f"c{j:05d}", "gold": gold, "metadata": meta}
        out.append(
            {
                **base,
                "condition": "original",
                "answer": o,
                **(
                    {"p_yes": p_yes} if p_yes is not None else {"p_yes": 0.8 if o == "Yes" else 0.3}
                ),
            }
        )
        swap = o if (same_answer_everywhere or (right and j < swap_same) or not right) else _no(o)
        out.append({**base, "condition": "swap_same_label", "answer": swap})
        masked = j < masked_correct or correct <= j < correct + masked_wrong
        if masked:
            flip = not same_answer_everywhere and right and j < flips
            moved = not same_answer_everywhere and right and j >= stable
            out.append({**base, "condition": "target_mask", "answer": _no(o) if flip else o})
            out.append({**base, "condition": "irrelevant_mask", "answer": _no(o) if moved else o})
    return out


def _audit(records: list[dict[str, Any]], **config: Any) -> dict[str, Any]:
    lines = [(i, orjson.dumps(r)) for i, r in enumerate(records, 1)]
    table = prepare(parse_lines(lines))
    return lotfinia_audit(table.rows("lotfinia"), LotfiniaConfig(**{**FAST, **config}))


MEDGEMMA = {
    "total": 2575,
    "correct": 1424,
    "masked_correct": 373,
    "masked_wrong": 79,
    "flips": 125,
    "stable": 352,
    "swap_same": 1089,
}


@pytest.fixture(scope="module")
def medgemma() -> dict[str, Any]:
    return _audit(_cases("MedGemma-1.5-4B", **MEDGEMMA))["models"][0]


def test_table1_medgemma_row_from_counts(medgemma: dict[str, Any]) -> None:
    expected = {
        "accuracy": (55.3, 1.0, 2575),
        "CGR": (33.5, 2.4, 373),
        "UAR": (76.5, 1.1, 1424),
        "IS": (94.4, 1.2, 373),
    }
    for name, (value, se, n) in expected.items():
        cell = medgemma[name]
        assert cell["value"] == pytest.approx(value, abs=0.05), name
        assert cell["se"] == pytest.approx(se, abs=0.05), name
        assert cell["n"] == n, name
        assert cell["low"] < cell["value"] < cell["high"]
    assert medgemma["GSP"] == pytest.approx(27.9, abs=0.05)
    assert medgemma["image_contingent"] == pytest.approx(23.5, abs=0.05)
    assert medgemma["category"] == "uses_image"
    # Table 3: the grounded-correct regime holds exactly the CGR flips
    assert medgemma["confidence_by_regime"]["grounded_correct"]["n"] == 125
    assert medgemma["confidence_by_regime"]["ungrounded_correct"]["n"] == 1424 - 125
    assert medgemma["confidence_by_regime"]["incorrect"]["n"] == 2575 - 1424


def test_is_over_all_parsed_cases_is_an_option() -> None:
    model = _audit(_cases("m", **MEDGEMMA), is_condition_on_correct=False)["models"][0]
    assert model["IS"]["n"] == 452
    assert model["IS"]["value"] == pytest.approx(100 * (352 + 79) / 452)
    assert model["IS"]["conditioned_on_correct"] is False


def _cell(value: float, n: int, low: float | None = None) -> dict[str, Any]:
    return {"value": value, "n": n, "low": value if low is None else low}


# Table 1: (CGR, CGR CI low, n), (UAR, n), (IS, n) -> published category
TABLE1 = {
    "MedGemma-1.5-4B": ((33.5, 28.7, 373), (76.5, 1424), (94.4, 373), "uses_image"),
    "LLaVA-Med-7B": ((0.0, 0.0, 444), (100.0, 1267), (100.0, 441), "ignores_image"),
    "Gemma-4-26B": ((33.2, 28.7, 370), (80.4, 1703), (96.0, 370), "uses_image"),
    "Qwen3-VL-32B": ((17.5, 13.5, 325), (78.7, 1621), (90.1, 325), "uses_image"),
    "Mistral-Small-4-119B": ((40.0, 20.0, 25), (84.5, 1106), (56.0, 25), "unstable"),
    "GPT-5": ((24.5, 20.1, 359), (75.4, 1505), (90.3, 361), "uses_image"),
    "MedGemma-27B-text": ((0.0, 0.0, 415), (100.0, 1397), (100.0, 415), "ignores_image"),
    "DeepSeek-R1-7B": ((0.0, 0.0, 141), (100.0, 1085), (100.0, 141), "ignores_image"),
    "RAD-DINO": ((6.4, 4.1, 388), (82.1, 1248), (99.5, 388), "uses_image"),
}


@pytest.mark.parametrize("model", sorted(TABLE1))
def test_table1_rows_map_to_the_published_categories(model: str) -> None:
    (cgr, low, n_cgr), (uar, n_uar), (is_, n_is), expected = TABLE1[model]
    category, rule = categorize(
        _cell(cgr, n_cgr, low), _cell(uar, n_uar), _cell(is_, n_is), LotfiniaConfig()
    )
    assert category == expected, rule


def test_the_gap_is_unassigned_and_thresholds_are_parameters() -> None:
    cfg = LotfiniaConfig()
    gap = categorize(_cell(20.0, 300, 15.0), _cell(80.0, 900), _cell(80.0, 300), cfg)
    assert gap[0] == "unassigned"
    ci_touching_zero = categorize(_cell(1.0, 300, 0.0), _cell(80.0, 900), _cell(95.0, 300), cfg)
    assert ci_touching_zero[0] == "unassigned"
    few = categorize(_cell(0.0, 50), _cell(100.0, 900), _cell(100.0, 50), cfg)
    assert few[0] == "unassigned"
    lenient = LotfiniaConfig(unstable_below=50.0, uses_is_at_least=50.0)
    assert categorize(_cell(40.0, 25, 20.0), _cell(84.5, 1106), _cell(56.0, 25), lenient)[0] == (
        "uses_image"
    )


def test_text_only_model_ignores_the_image_end_to_end() -> None:
    counts = {**MEDGEMMA, "total": 400, "correct": 300, "masked_correct": 150, "masked_wrong": 10}
    report = _audit(
        _cases("blind", **counts, same_answer_everywhere=True, p_yes=0.0)
        + _cases("seer", **{**counts, "flips": 40, "stable": 148, "swap_same": 200}),
        text_only_models=("blind",),
    )
    blind, seer = report["models"]
    assert blind["model"] == "blind" and blind["text_only"]
    assert (blind["CGR"]["value"], blind["UAR"]["value"], blind["IS"]["value"]) == (0, 100, 100)
    assert blind["category"] == "ignores_image"
    assert blind["calibration"]["ECE"] is None and "N/A" in blind["calibration"]["reason"]
    assert seer["category"] == "uses_image"
    families = {c["family"] for c in report["comparisons"]}
    assert families == {
        "pairwise accuracy / probe",
        "accuracy vs text-only blind / probe",
        "UAR vs text-only blind / probe",
    }
    uar = next(c for c in report["comparisons"] if c["metric"] == "UAR")
    assert (uar["a"], uar["b"], uar["n_shared"]) == ("seer", "blind", 300)
    assert uar["delta"] == pytest.approx(100 * (200 - 300) / 300)
    assert uar["q"] == pytest.approx(uar["p"])  # a family of one
    acc = next(c for c in report["comparisons"] if c["family"].startswith("pairwise"))
    assert acc["delta"] == 0 and acc["p"] == 1.0


def test_subgroups_calibration_and_findings(medgemma: dict[str, Any]) -> None:
    tests = medgemma["subgroups"]
    assert [(t["metric"], t["by"]) for t in tests] == [
        ("CGR", "sex"),
        ("CGR", "view"),
        ("CGR", "age_group"),
        ("UAR", "sex"),
        ("UAR", "age_group"),
    ]
    assert all(t["q"] >= t["p"] for t in tests)
    assert tests[2]["test"] == "anova_f" and tests[0]["test"] == "abs_diff"
    cal = medgemma["calibration"]
    assert cal["n"] == 2575 and cal["AUROC"] is not None and cal["ECE_form"] == "p_yes_vs_label"
    findings = {f["finding"]: f for f in medgemma["per_finding_CGR"]}
    assert sum(f["n"] for f in findings.values()) == 373
    assert all(f["wilson_low"] <= f["value"] <= f["wilson_high"] for f in findings.values())


def test_ece_forms_differ_and_runs_are_seed_stable() -> None:
    records = _cases(
        "m",
        **{
            **MEDGEMMA,
            "total": 300,
            "correct": 200,
            "masked_correct": 100,
            "masked_wrong": 20,
            "flips": 30,
            "stable": 95,
            "swap_same": 150,
        },
    )
    a = _audit(records)
    b = _audit(records)
    assert a == b
    other = _audit(records, ece_form="confidence_vs_correct")["models"][0]["calibration"]
    assert other["ECE"] != a["models"][0]["calibration"]["ECE"]
    reseeded = _audit(records, seed=1)["models"][0]["CGR"]
    assert reseeded["value"] == a["models"][0]["CGR"]["value"]
    assert (reseeded["low"], reseeded["high"]) != (
        a["models"][0]["CGR"]["low"],
        a["models"][0]["CGR"]["high"],
    )


def test_bootstrap_sd_is_the_alternative_se() -> None:
    counts = {**MEDGEMMA, "total": 600, "correct": 400, "masked_correct": 200, "masked_wrong": 20,
              "flips": 60, "stable": 190, "swap_same": 300}  # fmt: skip
    analytical = _audit(_cases("m", **counts), B=4000)["models"][0]["CGR"]
    boot = _audit(_cases("m", **counts), B=4000, se="bootstrap")["models"][0]["CGR"]
    assert analytical["se"] == pytest.approx(100 * (0.3 * 0.7 / 200) ** 0.5)
    assert boot["se"] == pytest.approx(analytical["se"], rel=0.05)
    assert boot["se"] != analytical["se"]
