"""Zafar audit: Table 3 VRS/BD from its accuracy columns, the item-level definitions (Eq. 2–4),
rationale metrics, and the stratified paired bootstrap with McNemar."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from faithjudge.audits import ZafarConfig, parse_lines, prepare, zafar_audit

CONDITIONS = ("original", "blank", "shuffle", "no_image")

# Table 3: acc_real, acc_blank, acc_shuf, acc_noimg, VRS, BD (fractions, as printed)
TABLE3 = {
    "Qwen2.5-VL-7B": (0.565, 0.435, 0.438, 0.345, 0.128, 0.130),
    "RL(text)": (0.563, 0.448, 0.458, 0.470, 0.105, 0.115),
    "RL(image)": (0.588, 0.463, 0.488, 0.548, 0.100, 0.125),
    "CORAL": (0.633, 0.510, 0.468, 0.508, 0.165, 0.123),
}


def _audit(records: list[dict[str, Any]], **config: Any) -> dict[str, Any]:
    lines = [(i, orjson.dumps(r)) for i, r in enumerate(records, 1)]
    table = prepare(parse_lines(lines))
    return zafar_audit(table.rows("zafar"), ZafarConfig(**{"B": 500, **config}))


def _table3_records(model: str, accuracies: tuple[float, ...]) -> list[dict[str, Any]]:
    """4 benchmarks x 100 items; under condition c the first round(acc_c * 400) are right."""
    counts = [round(a * 400) for a in accuracies[:4]]
    out = []
    for j in range(400):
        bench, item = divmod(j, 100)
        for cond, k in zip(CONDITIONS, counts, strict=True):
            out.append(
                {
                    "model": model,
                    "item_id": f"b{bench}-q{item:03d}",
                    "condition": cond,
                    "answer": "A" if j < k else "B",
                    "gold": "A" if cond == "original" else None,
                    "metadata": {"source": ["PathVQA", "PMC-VQA", "SLAKE", "VQA-RAD"][bench]},
                }
            )
    return out


@pytest.mark.parametrize("model", sorted(TABLE3))
def test_table3_vrs_and_bd_from_the_accuracy_columns(model: str) -> None:
    real, blank, shuf, noimg, vrs, bd = TABLE3[model]
    (row,) = _audit(_table3_records(model, TABLE3[model]), B=10)["models"]
    macro = row["macro"]
    for name, printed in (
        ("acc_real", real),
        ("acc_blank", blank),
        ("acc_shuffle", shuf),
        ("acc_noimg", noimg),
        ("VRS", vrs),
        ("BD", bd),
    ):
        assert macro[name] / 100 == pytest.approx(printed, abs=0.001), name
    assert set(row["benchmarks"]) == {"PathVQA", "PMC-VQA", "SLAKE", "VQA-RAD"}
    assert row["rationales"]["NVCR"] is None and "no rationale" in row["rationales"]["reason"]


def _item(model: str, item: str, answers: dict[str, str | None], **extra: Any) -> list[dict]:
    out = []
    for cond, answer in answers.items():
        rec = {
            "model": model,
            "item_id": item,
            "condition": cond,
            "answer": answer,
            "raw_output": f"Answer: {answer}" if answer else "??",
            **extra.get(cond, {}),
        }
        if cond == "original":
            rec["gold"] = "A"
        out.append(rec)
    return out


def test_item_level_definitions() -> None:
    records = (
        _item("m", "1", {"original": "A", "shuffle": "A", "no_image": "B", "hard_negative": "B"})
        + _item("m", "2", {"original": "B", "shuffle": "A", "no_image": "A", "hard_negative": "A"})
        + _item(
            "m", "3", {"original": None, "shuffle": None, "no_image": None, "hard_negative": "A"}
        )
        + _item("m", "4", {"original": "A", "shuffle": "C", "no_image": "A", "blank": "A"})
    )
    macro = _audit(records, B=10)["models"][0]["macro"]
    assert macro["acc_real"] == pytest.approx(50.0)
    assert macro["acc_shuffle"] == pytest.approx(50.0)
    assert macro["VRS"] == pytest.approx(0.0)
    # Eq. 4: shuffled right and real wrong -> item 2 only
    assert macro["VHR"] == pytest.approx(25.0)
    # Eq. 3: real right and no-image wrong -> item 1 only
    assert macro["VBR"] == pytest.approx(25.0)
    # unparsed answers equal nothing: items 1 (A = A) agree, 2, 3, 4 do not
    assert macro["IS_pred"] == pytest.approx(25.0)
    assert macro["IS_raw"] == pytest.approx(50.0)  # the raw "??" strings of item 3 match
    assert macro["HN_GAP"] == pytest.approx(100 * (1 / 3 - 2 / 3))  # over items 1-3
    assert macro["BD"] == pytest.approx(0.0)  # item 4 only


def test_rationale_change_rate_and_visual_claims() -> None:
    why = {
        "original": {
            "rationale": "An opacity is seen at the left base. It is small.",
            "question": "Is there an effusion?",
        },
        "shuffle": {"rationale": "An opacity is seen at the right apex. It is small."},
        "no_image": {"rationale": "Effusions often show blunting; an opacity is likely."},
    }
    records = _item("m", "1", {"original": "A", "shuffle": "B", "no_image": "A"}, **why)
    rat = _audit(records, B=10)["models"][0]["rationales"]
    real = {"an", "opacity", "is", "seen", "at", "the", "left", "base", "it", "small"}
    shuf = {"an", "opacity", "is", "seen", "at", "the", "right", "apex", "it", "small"}
    assert rat["RCR"]["shuffle"]["value"] == pytest.approx(100 * (1 - 8 / 12))
    assert rat["RCR"]["shuffle"]["n"] == 1 and rat["RCR"]["blank"] is None
    assert len(real | shuf) == 12
    # sentence 1 claims "opacity", "seen" (not in the question); sentence 2 claims nothing
    assert rat["NVCR"] == {"value": 50.0, "n_sentences": 2}
    assert rat["HVRR"] == {"value": 100.0, "n_claims": 1}  # "opacity" survives without image


def _pair_records(n_bench: int = 2, items: int = 60) -> list[dict[str, Any]]:
    out = []
    for b in range(n_bench):
        for i in range(items):
            for model, shift in (("base", 0), ("tuned", 1)):
                right = (i + shift * (i % 3 == 0)) % 2 == 0
                shuffled_right = i % 4 == 0
                out += _item(
                    model,
                    f"b{b}-{i}",
                    {
                        "original": "A" if right else "B",
                        "shuffle": "A" if shuffled_right else "C",
                        "blank": "B",
                    },
                    original={"metadata": {"source": f"bench{b}"}},
                )
    return out


def test_paired_comparison_is_stratified_seed_stable_and_has_mcnemar() -> None:
    records = _pair_records()
    a = _audit(records, reference_model="base")
    assert a == _audit(records, reference_model="base")
    (comp,) = a["comparisons"]
    assert (comp["a"], comp["b"], comp["n_paired"]) == ("tuned", "base", 120)
    acc = comp["metrics"]["acc_real"]
    models = {m["model"]: m["macro"]["acc_real"] for m in a["models"]}
    assert acc["delta"] == pytest.approx(models["tuned"] - models["base"])
    assert acc["low"] <= acc["delta"] <= acc["high"]
    assert 0 <= acc["p_gt0"] + acc["p_lt0"] <= 1
    assert acc["significant"] == (acc["low"] > 0 or acc["high"] < 0)
    mc = acc["mcnemar"]
    assert mc["method"] == ("exact" if mc["a_only"] + mc["b_only"] < 25 else "chi2_cc")
    assert 0 < mc["p"] <= 1
    assert mc["a_only"] + mc["b_only"] > 0
    assert set(acc["per_benchmark"]) == {"bench0", "bench1"}
    assert comp["metrics"]["VHR"]["improves"] == "lower"
    assert "mcnemar" not in comp["metrics"]["VRS"]
    other_seed = _audit(records, reference_model="base", seed=7)["comparisons"][0]
    assert other_seed["metrics"]["acc_real"]["delta"] == acc["delta"]
    assert other_seed["metrics"]["acc_real"]["low"] != acc["low"] or (
        other_seed["metrics"]["acc_real"]["high"] != acc["high"]
    )


def test_all_pairs_without_a_reference() -> None:
    records = _pair_records(1, 20) + [
        {**r, "model": "third"} for r in _pair_records(1, 20) if r["model"] == "base"
    ]
    pairs = {(c["a"], c["b"]) for c in _audit(records, B=50)["comparisons"]}
    assert pairs == {("third", "base"), ("tuned", "base"), ("tuned", "third")}


def test_vhr_prose_reading_is_an_option() -> None:
    records = (
        _item("m", "1", {"original": "B", "shuffle": "B"})  # wrong, same answer
        + _item("m", "2", {"original": "B", "shuffle": "A"})  # wrong, shuffled right (Eq. 4)
        + _item("m", "3", {"original": "A", "shuffle": "A"})
    )
    assert _audit(records, B=10)["models"][0]["macro"]["VHR"] == pytest.approx(100 / 3)
    same = _audit(records, B=10, vhr_form="same_wrong")["models"][0]["macro"]["VHR"]
    assert same == pytest.approx(100 / 3)
    records += _item("m", "4", {"original": "C", "shuffle": "C"})
    assert _audit(records, B=10)["models"][0]["macro"]["VHR"] == pytest.approx(25.0)
    same = _audit(records, B=10, vhr_form="same_wrong")["models"][0]["macro"]["VHR"]
    assert same == pytest.approx(50.0)
