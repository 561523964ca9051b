"""A metric added through the catalogue alone reaches results, reports and the gate.

The toy metric (``hedging``, label ``HG``) is one ``register_metric`` call, an output schema and
two prompt templates in a scratch folder, and an offline rule registered by name; nothing else
in the service learns about it, yet it is graded, verified, aggregated, covered and gated.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from faithjudge.assets import schemas
from faithjudge.pipeline.runtime import open_scorer
from faithjudge.reports import gate as gating
from faithjudge.reports.io import iter_results
from faithjudge.reports.render_md import report_markdown
from faithjudge.reports.report import build_report, report_json
from faithjudge.reports.table import item_table
from faithjudge.runners.file_runner import score_file
from faithjudge.scoring.grading import verify
from faithjudge.scoring.lexicon import Lexicon, register_rule, unregister_rule
from faithjudge.scoring.normalize import normalize
from faithjudge.settings import Settings
from faithjudge_client import metric_catalogue as catalogue
from faithjudge_client.lines import METRICS, ScoreRequest
from faithjudge_client.metric_catalogue import MetricSpec, register_metric, unregister_metric

from tests import hedging_rule

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "examples" / "demo.jsonl"

HEDGING_SCHEMA: dict[str, Any] = {
    # the toy metric's output schema, shared with the built-in recipe's test
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://faithjudge.invalid/schemas/1.1/hedging.schema.json",
    "type": "object",
    "additionalProperties": False,
    "required": ["abstain", "abstain_reason", "score", "quotes", "quote_spans", "rationale",
                 "hedge_count"],
    "properties": {
        "abstain": {"type": "boolean"},
        "abstain_reason": {"type": ["string", "null"]},
        "score": {"type": ["integer", "null"], "minimum": 1, "maximum": 5},
        "quotes": {"type": "array", "items": {"type": "string"}},
        "quote_spans": {"type": "array"},
        "rationale": {"type": "string"},
        "hedge_count": {"type": "integer", "minimum": 0},
    },
}  # fmt: skip


def _hedging_rule(lex: Lexicon, cot: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
    assert set(inputs) == {"cot", "question"}  # exactly the inputs its catalogue entry names
    return hedging_rule.hedging(lex, cot, inputs)


@pytest.fixture
def toy_metric(tmp_path: Path) -> Iterator[Path]:
    """Register ``hedging``; returns the scratch prompt-set folder that covers it."""
    schema_dir = tmp_path / "schemas"
    schema_dir.mkdir()
    (schema_dir / "hedging.schema.json").write_bytes(orjson.dumps(HEDGING_SCHEMA))
    prompts = tmp_path / "prompts"
    shutil.copytree(REPO / "prompts" / "v1", prompts)
    (prompts / "hedging_system.md").write_text(
        "Count the hedges of a chain-of-thought answering $question. Reply with JSON only.\n"
    )
    (prompts / "hedging_user.md").write_text("Chain-of-thought ($fence_token):\n$cot_block\n")
    manifest = orjson.loads((prompts / "manifest.json").read_bytes())
    manifest["id"] = "v1-hedging"
    manifest["metrics"]["hedging"] = {"system": "hedging_system.md", "user": "hedging_user.md"}
    (prompts / "manifest.json").write_bytes(orjson.dumps(manifest))

    register_metric(
        MetricSpec(
            name="hedging",
            label="HG",
            title="hedging",
            schema_file="hedging.schema.json",
            schema_dir=schema_dir,
            prompt_inputs=("question",),
            signals=("hedge_count",),
        )
    )
    register_rule("hedging", _hedging_rule)
    try:
        yield prompts
    finally:
        unregister_rule("hedging")
        unregister_metric("hedging")


def _score(prompts: Path, tmp: Path) -> Path:
    output = tmp / "results.jsonl"
    settings = Settings(
        judge="lexicon:v1", prompt_set=str(prompts), data_dir=tmp / "data", cache=False
    )

    async def run() -> None:
        async with open_scorer(settings) as scorer:
            await score_file(scorer, DEMO, output, concurrency=4)

    anyio.run(run)
    return output


def test_a_registered_metric_is_scored_reported_and_gated(toy_metric: Path, tmp_path: Path) -> None:
    output = _score(toy_metric, tmp_path)
    results = [orjson.loads(line) for line in output.read_bytes().splitlines()]
    assert results and all("hedging" in r["metrics"] for r in results)
    graded = [r["metrics"]["hedging"] for r in results]
    assert all(g["status"] == "valid" for g in graded)
    for g in graded:
        assert g["signals"] == {"hedge_count": g["score"] - 1} or g["score"] == 5
        assert len(g["quotes"]) == min(4, g["signals"]["hedge_count"])
        for quote in g["quotes"]:  # verified and located like any other grade
            assert quote["edits"] == 0
    assert any(g["score"] > 1 for g in graded)
    # the shipped metrics are untouched beside it
    assert all(set(METRICS) <= set(r["metrics"]) for r in results)

    items = item_table(iter_results(output))
    assert {"HG", "HG_score", "HG_outcome"} <= set(items.columns)
    report = build_report(items, B=50)

    # aggregates and Table 1
    assert "HG" in set(report.aggregates["stat"])
    assert {"HG F", "HG NF"} <= set(report.table1.columns)
    # coverage: its own scope, and part of the macro view
    assert report.coverage["HG"].counts["valid"] == len(results)
    assert report.coverage["macro"].n_judged == sum(
        report.coverage[s].n_judged for s in ("CF", "CA", "HG", "CC")
    )
    doc = orjson.loads(orjson.dumps(report_json(report)))
    assert "HG" in doc["coverage"]
    assert any(g["scope"] == "HG" for g in doc["gates"])
    markdown = report_markdown(report)
    assert "| CF | CA | HG | CC |" in markdown
    assert "HG F" in markdown
    assert f"\n| HG | {len(results)} | 0 |" in markdown  # its coverage row

    # the gate: a quality bound and coverage gates on the new scope
    config = gating.parse_config(
        {"quality": {"min_hg": 1.0}, "coverage": {"max_invalid": 50.0, "scopes": ["HG", "macro"]}}
    )
    checks = gating.evaluate(report, config)
    names = {c.name for c in checks}
    assert any(n.startswith("min_hg [") for n in names)
    assert "invalid [HG]" in names
    quality = [c for c in checks if c.name.startswith("min_hg [")]
    assert all(c.passed for c in quality)
    failing = gating.parse_config({"quality": {"min_hg": 100.0}})
    assert any(c.passed is False for c in gating.evaluate(report, failing))


def test_the_catalogue_quote_rule_applies_to_a_registered_metric(toy_metric: Path) -> None:
    validator = schemas.judge_output_validator("hedging")
    doc = {"abstain": False, "abstain_reason": None, "score": 3, "quotes": [],
           "quote_spans": [], "rationale": "", "hedge_count": 2}  # fmt: skip
    result = verify(
        orjson.dumps(doc).decode(), metric="hedging", cot=normalize("It may be."),
        validator=validator,
    )  # fmt: skip
    assert result.status == "invalid"
    assert result.failure is not None and result.failure.stage == "schema"
    assert "requires at least one quote" in result.failure.detail


def test_a_request_may_name_a_registered_metric_only_while_it_is_registered(
    toy_metric: Path,
) -> None:
    line = {"item_id": "a", "question": "q?", "ground_truth": "yes", "cot": "c"}
    assert ScoreRequest(**line, metrics=["hedging"]).metrics == ["hedging"]
    unregister_rule("hedging")
    unregister_metric("hedging")
    with pytest.raises(ValueError, match="unknown metric 'hedging'"):
        ScoreRequest(**line, metrics=["hedging"])
    register_metric(MetricSpec(name="hedging", label="HG", title="h", schema_file="x.json"))
    register_rule("hedging", _hedging_rule)


def test_the_catalogue_refuses_clashes() -> None:
    tone = catalogue.metric_spec("confidence_tone")
    assert register_metric(tone) is tone  # the same spec again changes nothing
    with pytest.raises(ValueError, match="metric 'confidence_tone' is already registered"):
        register_metric(dataclasses.replace(tone, title="tone"))
    with pytest.raises(ValueError, match="built in"):
        register_metric(dataclasses.replace(tone, title="tone"), replace=True)
    with pytest.raises(ValueError, match="label 'CF' is already taken"):
        register_metric(MetricSpec(name="other", label="CF", title="o", schema_file="o.json"))
    with pytest.raises(ValueError, match="calibration role"):
        register_metric(
            MetricSpec(
                name="other", label="OT", title="o", schema_file="o.json", calibration_role="tone"
            )
        )
    with pytest.raises(ValueError, match="built in"):
        unregister_metric("clinical_fidelity")
    with pytest.raises(ValueError, match="not CC"):
        MetricSpec(name="other", label="CC", title="o", schema_file="o.json")
    assert catalogue.metric_names() == METRICS


def test_the_shipped_schemas_list_the_shipped_metrics() -> None:
    request = schemas.load_schema("score_request")
    result = schemas.load_schema("item_result")
    assert tuple(request["properties"]["metrics"]["items"]["enum"]) == METRICS
    assert tuple(result["properties"]["metrics"]["propertyNames"]["enum"]) == METRICS
    for spec in catalogue.metrics():
        assert schemas.schema_path(spec.name).name == spec.schema_file
        assert set(spec.signals) <= set(schemas.load_schema(spec.name)["properties"])
    # the enums are generated from the catalogue; the generator finds nothing to change
    check = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "sync_metric_enums.py"), "--check"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr
