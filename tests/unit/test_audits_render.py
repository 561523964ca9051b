"""Audit rendering: untrusted names are escaped, every audit has its tables, JSON is strict;
and the package's public surface."""

from __future__ import annotations

import json

import faithjudge.audits as audits
import orjson
from faithjudge.audits import AuditOptions, parse_lines, prepare, run_audit
from faithjudge.audits.render import audit_html, audit_markdown
from faithjudge.audits.synthetic import synthetic_records

EVIL = "<script>alert(1)</script>|*"


def _report() -> dict:
    records = []
    for r in synthetic_records(1):
        if r["model"].endswith("-0"):
            r = {**r, "model": f"{EVIL}{r['model']}"}
        records.append({k: v for k, v in r.items() if v is not None})
    table = prepare(parse_lines([(i, orjson.dumps(r)) for i, r in enumerate(records, 1)]))
    return run_audit(table, AuditOptions().with_resampling(seed=1, B=50))


def test_renderings_escape_names_and_cover_every_audit() -> None:
    report = _report()
    json.dumps(report, allow_nan=False)
    page = audit_html(report)
    assert "<script>" not in page and "&lt;script&gt;" in page
    md = audit_markdown(report)
    assert "<script>" not in md and "\\<script\\>" in md
    titles = ("Lotfinia: image reliance", "Zafar: macro mean", "MedVIGIL: composite",
              "MedVIGIL: SFR by risk tier", "Lotfinia: subgroup permutation tests")  # fmt: skip
    for title in titles:
        assert f"## {title}" in md and title in page


def test_with_resampling_reaches_every_audit() -> None:
    options = AuditOptions().with_resampling(seed=9, B=77)
    assert {options.lotfinia.seed, options.zafar.seed, options.medvigil.seed} == {9}
    assert {options.lotfinia.B, options.zafar.B, options.medvigil.B} == {77}
    defaults = AuditOptions().with_resampling(seed=None, B=None)
    assert (defaults.lotfinia.seed, defaults.zafar.seed, defaults.medvigil.seed) == (
        0,
        42,
        20260505,
    )
    assert (defaults.lotfinia.B, defaults.zafar.B, defaults.medvigil.B) == (10_000, 10_000, 500)


def test_public_surface() -> None:
    assert sorted(audits.__all__) == [
        "AnswerRecord", "AuditInputError", "AuditOptions", "AuditTable", "ItemMeta",
        "LotfiniaConfig", "MedvigilConfig", "ZafarConfig", "load_records", "lotfinia_audit",
        "medvigil_audit", "parse_lines", "prepare", "run_audit", "zafar_audit",
    ]  # fmt: skip
    for name in audits.__all__:
        assert getattr(audits, name) is not None
