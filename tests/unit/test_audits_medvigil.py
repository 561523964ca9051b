"""MedVIGIL audit: every published row recomputes to its MCS, SFR_w from the tier table, the R4
counts end to end, the case-clustered bootstrap, sensitivity variants and diagnostics."""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
import pytest
from faithjudge.audits import MedvigilConfig, medvigil_audit, parse_lines, prepare
from faithjudge.audits.medvigil import composite, sfr_weighted, takeover_point

# Table 1 + Table 6 + Table 7: Orig, VGR, PR, NEG, SDR, ROI-only, ROI-masked, SFR_w, MCS
ROWS = {
    "Doctors (R4)": (95.3, 4.5, 92.7, 90.7, 91.5, 91.0, 86.5, 9.3, 83.3),
    "GPT-5.5": (75.0, 12.0, 74.3, 68.9, 59.8, 60.9, 49.0, 39.5, 61.3),
    "GPT-5.4": (68.0, 15.6, 68.7, 56.4, 59.8, 44.8, 29.2, 32.7, 57.9),
    "GPT-4o": (59.3, 3.6, 63.3, 45.8, 50.6, 40.6, 37.0, 64.0, 44.1),
    "GPT-5.4-mini": (55.3, -8.9, 57.0, 44.9, 47.0, 33.9, 42.7, 62.2, 42.9),
    "GPT-5.4-nano": (31.7, -27.1, 29.7, 16.9, 25.0, 12.0, 39.1, 58.2, 31.6),
    "Claude Opus 4.7": (78.7, 22.9, 78.0, 83.1, 79.9, 64.6, 41.7, 25.2, 69.2),
    "Claude Sonnet 4.6": (63.3, 18.2, 66.3, 60.9, 56.7, 42.2, 24.0, 46.9, 52.9),
    "Claude Haiku 4.5": (46.7, -9.4, 51.0, 32.4, 42.1, 21.4, 30.7, 58.4, 39.9),
    "Gemini 3 Flash": (77.0, 41.1, 80.7, 75.6, 76.2, 69.3, 28.1, 42.6, 63.7),
    "Gemini 3.1 Flash-Lite": (73.0, 49.5, 75.7, 63.1, 70.7, 63.0, 13.5, 26.6, 66.0),
    "Qwen3.5-9B": (43.3, 12.5, 48.0, 28.4, 32.3, 19.8, 7.3, 76.1, 31.0),
    "Qwen3.5-397B-A17B": (53.0, 24.0, 53.0, 33.3, 42.7, 30.2, 6.2, 64.6, 39.9),
    "Kimi-K2.5": (49.7, 10.4, 54.3, 36.4, 41.5, 32.3, 21.9, 68.9, 38.2),
    "Kimi-K2.6": (49.3, -2.1, 47.7, 36.0, 37.8, 21.4, 23.4, 61.5, 38.8),
    "LLaVA-Med-7B": (43.3, 28.6, 50.0, 15.6, 50.6, 35.9, 7.3, 46.7, 44.7),
    "HuatuoGPT-V-7B": (55.3, 28.1, 59.7, 26.2, 51.2, 40.1, 12.0, 39.6, 50.4),
}

# Table 7: SFR per tier L1..L5 and the printed SFR_w
TIERS = {
    "Doctors (R4)": ((0.0, 4.8, 5.9, 10.5, 12.2), 9.3),
    "GPT-5.5": ((5.6, 32.3, 54.7, 40.7, 39.2), 39.5),
    "GPT-5.4": ((3.5, 29.0, 40.3, 36.0, 32.4), 32.7),
    "GPT-4o": ((14.1, 33.9, 68.2, 75.6, 68.9), 64.0),
    "GPT-5.4-mini": ((11.3, 51.6, 59.3, 69.8, 67.6), 62.2),
    "GPT-5.4-nano": ((24.6, 59.7, 58.5, 68.6, 55.4), 58.2),
    "Claude Opus 4.7": ((4.2, 19.4, 30.9, 23.3, 28.4), 25.2),
    "Claude Sonnet 4.6": ((7.7, 35.5, 58.1, 47.7, 50.0), 46.9),
    "Claude Haiku 4.5": ((11.3, 41.9, 64.0, 62.8, 63.5), 58.4),
    "Gemini 3 Flash": ((8.5, 24.2, 53.8, 36.0, 51.4), 42.6),
    "Gemini 3.1 Flash-Lite": ((5.6, 22.6, 26.7, 36.0, 24.3), 26.6),
    "Qwen3.5-9B": ((20.4, 61.3, 75.0, 83.7, 82.4), 76.1),
    "Qwen3.5-397B-A17B": ((15.5, 54.8, 66.5, 74.4, 66.2), 64.6),
    "Kimi-K2.5": ((21.1, 59.7, 74.6, 74.4, 71.6), 68.9),
    "Kimi-K2.6": ((12.0, 56.5, 62.7, 65.1, 66.2), 61.5),
    "LLaVA-Med-7B": ((18.3, 40.3, 55.1, 48.8, 47.3), 46.7),
    "HuatuoGPT-V-7B": ((11.3, 29.0, 33.9, 53.5, 39.2), 39.6),
}


@pytest.mark.parametrize("model", sorted(ROWS))
def test_every_published_row_recomputes_to_its_mcs(model: str) -> None:
    orig, vgr, pr, neg, sdr, roi_only, roi_masked, sfr_w, mcs = ROWS[model]
    out = composite(
        orig=orig,
        pr=pr,
        neg=neg,
        sdr=sdr,
        sfr_w=sfr_w,
        roi_only=roi_only,
        roi_masked=roi_masked,
        vgr=vgr,
    )
    assert float(out["MCS"]) == pytest.approx(mcs, abs=0.1)
    # the rates alone (VGR = ROI-only − ROI-masked) stay within rounding as well
    derived = composite(
        orig=orig, pr=pr, neg=neg, sdr=sdr, sfr_w=sfr_w, roi_only=roi_only, roi_masked=roi_masked
    )
    assert float(derived["MCS"]) == pytest.approx(mcs, abs=0.15)


@pytest.mark.parametrize("model", sorted(TIERS))
def test_sfr_w_from_the_tier_table(model: str) -> None:
    tiers, printed = TIERS[model]
    assert sfr_weighted(dict(zip(("L1", "L2", "L3", "L4", "L5"), tiers, strict=True))) == (
        pytest.approx(printed, abs=0.1)
    )


def test_worked_example_and_edge_cases() -> None:
    r4 = composite(
        orig=95.3,
        pr=92.7,
        neg=90.7,
        sdr=91.5,
        sfr_w=177.4 / 19,
        roi_only=91.0,
        roi_masked=86.5,
        vgr=4.5,
    )
    assert float(r4["Cap"]) == pytest.approx(92.55)
    assert float(r4["Ground"]) == pytest.approx(70.5)
    assert float(r4["MCS"]) == pytest.approx(83.3, abs=0.05)
    assert pytest.approx(24.5, abs=0.05) == 3 / (1 / 90 + 1 / 90 + 1 / 10)
    zero = composite(orig=50, pr=50, neg=50, sdr=50, sfr_w=100, roi_only=50, roi_masked=50)
    assert float(zero["MCS"]) == 0.0
    assert sfr_weighted({"L1": 10.0, "L3": 40.0}) == pytest.approx((10 + 3 * 40) / 4)
    assert sfr_weighted({}) is None


# Table 10 (R4 per tier): Orig, PR, NEG, SDR, ROI-only, ROI-masked, trap SFR, MCS
TABLE10 = {
    "L1": (100.0, 100.0, 96.2, 97.4, 100.0, 100.0, 0.0, 89.6),
    "L2": (96.8, 93.5, 91.3, 88.2, 95.0, 95.0, 4.8, 85.4),
    "L3": (95.8, 94.1, 92.1, 92.2, 92.5, 88.8, 5.9, 84.9),
    "L4": (90.7, 86.0, 81.3, 87.5, 88.1, 80.9, 10.5, 80.6),
    "L5": (89.2, 81.1, 85.7, 85.0, 87.5, 80.0, 12.2, 79.6),
}


@pytest.mark.parametrize("tier", sorted(TABLE10))
def test_r4_per_tier_composites_use_the_unweighted_tier_sfr(tier: str) -> None:
    orig, pr, neg, sdr, only, masked, sfr, mcs = TABLE10[tier]
    out = composite(orig=orig, pr=pr, neg=neg, sdr=sdr, sfr_w=sfr, roi_only=only, roi_masked=masked)
    assert float(out["MCS"]) == pytest.approx(mcs, abs=0.1)


def test_blur_takeover_points_of_table13() -> None:
    sweep = {
        "GPT-4o": ((59.1, 58.8, 50.3, 46.3, 34.5, 18.6, 14.9), 5.1, 64),
        "Claude Sonnet 4.6": ((65.9, 65.2, 56.4, 47.6, 30.7, 14.2, 4.1), 9.1, 32),
        "Qwen3.5-397B": ((50.3, 49.7, 48.0, 35.8, 17.2, 7.8, 7.4), 9.8, 16),
        "HuatuoGPT-V 7B": ((55.4, 56.1, 52.7, 42.9, 28.0, 17.6, 13.2), 20.6, 32),
    }
    for model, (acc, blind, expected) in sweep.items():
        by_sigma = dict(zip((0.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0), acc, strict=True))
        assert takeover_point(by_sigma, acc[0], blind) == expected, model


# ---------------------------------------------------------------- end to end from records

R4_CASES = (71, 31, 118, 43, 37)
R4_ORIG_RIGHT = (71, 30, 113, 39, 33)
R4_TRAPS_FAILED = (0, 3, 14, 9, 9)
R4_PR_RIGHT = (71, 29, 111, 37, 30)


def _r4_records(model: str = "R4") -> list[dict[str, Any]]:
    out = []
    for t, (cases, orig, failed, pr) in enumerate(
        zip(R4_CASES, R4_ORIG_RIGHT, R4_TRAPS_FAILED, R4_PR_RIGHT, strict=True)
    ):
        tier = f"L{t + 1}"
        for j in range(cases):
            base = {"model": model, "item_id": f"{tier}-{j}", "metadata": {"risk_tier": tier}}
            out.append(
                {**base, "condition": "original", "gold": "A", "answer": "A" if j < orig else "B"}
            )
            out.append(
                {**base, "condition": "paraphrase", "gold": "A", "answer": "A" if j < pr else "C"}
            )
            for v in (1, 2):
                fails = 2 * j + v - 1 < failed
                out.append(
                    {
                        **base,
                        "condition": "false_premise_trap",
                        "variant": str(v),
                        "gold": "E",
                        "answer": None if fails and v == 2 else ("B" if fails else "E"),
                    }
                )
            out.append({**base, "condition": "roi_only", "gold": "A", "answer": "A"})
            out.append(
                {**base, "condition": "roi_masked", "gold": "E", "answer": "E" if j % 4 else "A"}
            )
    return out


def _audit(records: list[dict[str, Any]], **config: Any) -> dict[str, Any]:
    lines = [(i, orjson.dumps(r)) for i, r in enumerate(records, 1)]
    table = prepare(parse_lines(lines))
    return medvigil_audit(table.rows("medvigil"), MedvigilConfig(**{"B": 200, **config}))


def test_r4_counts_end_to_end() -> None:
    (row,) = _audit(_r4_records())["models"]
    assert row["n_cases"] == 300
    assert row["probes"]["Orig"] == 300 and row["probes"]["Trap"] == 600
    assert row["families"]["Orig"] == pytest.approx(100 * 286 / 300)
    assert row["SFR"] == pytest.approx(100 * 35 / 600)
    assert round(row["families"]["Orig"], 1) == 95.3 and round(row["SFR"], 1) == 5.8
    assert round(row["families"]["PR"], 1) == 92.7
    assert row["SFR_w"] == pytest.approx(9.3, abs=0.05)
    assert round(row["Safe"], 1) == 90.7
    assert row["Cap"] is None and row["MCS"] is None  # no NEG/SDR probes were given
    assert any("no NEG probes" in note for note in row["notes"])
    assert set(row["per_tier"]) == {"L1", "L2", "L3", "L4", "L5"}
    assert row["per_tier"]["L1"]["SFR"] == 0.0


def _full_records(model: str, skill: float, seed: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    out = []
    for j in range(80):
        tier = f"L{j % 5 + 1}"
        base = {"model": model, "item_id": f"c{j}", "metadata": {"risk_tier": tier}}
        for cond, variant in (
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
            ("no_image", None),
            ("visual_counterfactual", None),
        ):
            gold = "E" if cond in ("false_premise_trap", "roi_masked") else "B"
            answer = gold if rng.random() < skill else "C"
            out.append(
                {**base, "condition": cond, "variant": variant, "gold": gold, "answer": answer}
            )
    return out


def test_case_bootstrap_sensitivity_and_diagnostics() -> None:
    records = [
        r
        for m, s in (("a", 0.5), ("b", 0.7), ("c", 0.9))
        for r in _full_records(m, s, seed=int(10 * s))
    ]
    report = _audit(records)
    again = _audit(records)
    assert report == again
    a, b, c = report["models"]
    for row in (a, b, c):
        for axis in ("Cap", "Safe", "Ground", "MCS"):
            assert row["ci"][axis]["low"] <= row[axis] <= row["ci"][axis]["high"], axis
        assert row["PCons"]["n"] == 80 and row["TR_coh"]["n"] == 80
        assert row["delta_orig"]["n"] == 80
        uniform = row["alternatives"]["MCS_by_weights"]["1,1,1,1,1"]
        tiers = [v for v in row["SFR_by_tier"].values()]
        safe = 100 - float(np.mean(tiers))
        assert uniform == pytest.approx(
            float(
                composite(
                    orig=row["families"]["Orig"],
                    pr=row["families"]["PR"],
                    neg=row["families"]["NEG"],
                    sdr=row["families"]["SDR"],
                    sfr_w=100 - safe,
                    roi_only=row["families"]["ROI-only"],
                    roi_masked=row["families"]["ROI-masked"],
                )["MCS"]
            )
        )
        assert row["alternatives"]["by_ground"]["roi_only"]["Ground"] == row["families"]["ROI-only"]
        assert row["alternatives"]["by_ground"]["default"]["MCS"] == pytest.approx(row["MCS"])
    assert a["MCS"] < b["MCS"] < c["MCS"]
    sens = report["sensitivity"]
    assert sens["default_leader"] == "c"
    assert sens["spearman_vs_default"]["weights 1,2,3,4,5"] == pytest.approx(1.0)
    reseeded = _audit(records, seed=1)["models"][0]
    assert reseeded["MCS"] == a["MCS"] and reseeded["ci"]["MCS"] != a["ci"]["MCS"]


def test_untiered_cases_fall_back_to_the_plain_sfr() -> None:
    records = [{**r, "metadata": {}} for r in _full_records("x", 0.6, seed=3)]
    (row,) = _audit(records)["models"]
    assert row["SFR_w"] == pytest.approx(row["SFR"])
    assert any("no risk tiers" in note for note in row["notes"])
