"""End to end through the file runner with the replay judge: order, errors, resume, CLI."""

from __future__ import annotations

import gc
import json
from pathlib import Path

import orjson
import pytest
from faithjudge.cli.main import app
from faithjudge.pipeline.runtime import open_scorer
from faithjudge.runners.file_runner import score_file
from faithjudge.settings import Settings
from faithjudge_client.lines import ItemResult
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "demo.jsonl"
DEMO_JUDGE = ROOT / "examples" / "demo_judge.jsonl"

pytestmark = pytest.mark.anyio


def _settings(tmp_path: Path, **extra: object) -> Settings:
    return Settings(
        judge=f"replay:{DEMO_JUDGE}", data_dir=tmp_path / "data", concurrency=4, **extra
    )


def _read(path: Path) -> list[ItemResult]:
    return [ItemResult.model_validate_json(line) for line in path.read_bytes().splitlines()]


async def test_demo_file_scores_every_line_in_order(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    async with open_scorer(_settings(tmp_path)) as scorer:
        summary = await score_file(scorer, DEMO, out, concurrency=3)
    results = _read(out)
    assert [r.line for r in results] == list(range(1, 7))
    assert summary.scored == 6 and summary.input_errors == 0
    by_id = {r.item_id: r for r in results}

    first = by_id["demo-001"]
    assert first.metrics["clinical_fidelity"].status == "valid"
    assert first.metrics["clinical_fidelity"].score == 5
    quote = first.metrics["clinical_fidelity"].quotes[0]
    cot = json.loads(DEMO.read_text().splitlines()[0])["cot"]
    assert cot[quote.span[0] : quote.span[1]] == quote.text
    assert first.modification is not None and first.modification.aligned is True
    assert first.flip is not None and first.flip.value is False
    assert first.confidence_calibration == pytest.approx(1 - 0.728 * 0.25)

    # the judge quoted a sentence the CoT does not contain
    ct = by_id["demo-005"].metrics["confidence_tone"]
    assert ct.status == "invalid" and ct.failure is not None and ct.failure.stage == "evidence"
    # an unknown question is a kb failure for CF only
    cf = by_id["demo-006"].metrics["clinical_fidelity"]
    assert cf.status == "invalid" and cf.failure is not None and cf.failure.stage == "kb"
    assert by_id["demo-006"].metrics["confidence_tone"].status == "valid"
    # a misleading leaked-answer hint is derived as not aligned
    assert by_id["demo-005"].modification.aligned is False
    # provenance is complete
    prov = first.provenance
    assert prov is not None and prov.judge.startswith("replay:")
    assert len(prov.prompt_sha256) == 64 and prov.kb_sha256 and prov.schema_version


async def test_malformed_lines_become_error_results_naming_line_and_field(tmp_path: Path) -> None:
    good = DEMO.read_text().splitlines()[0]
    bad_code = json.loads(good) | {"item_id": "bad-code", "modification": {"code": "XX-YY"}}
    missing_cot = {k: v for k, v in json.loads(good).items() if k != "cot"}
    lines = [
        good,
        "{not json",
        json.dumps(missing_cot),
        "",
        json.dumps(bad_code),
        json.dumps(["a", "list"]),
        json.dumps(json.loads(good) | {"metrics": ["clinical_fidelity", "bogus"]}),
    ]
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out.jsonl"
    async with open_scorer(_settings(tmp_path)) as scorer:
        summary = await score_file(scorer, source, out, concurrency=2)
    results = {r.line: r for r in _read(out)}
    assert sorted(results) == [1, 2, 3, 5, 6, 7]  # the blank line 4 is not an item
    assert results[1].error is None
    assert results[2].error is not None and "line 2" in results[2].error.detail
    assert "cot" in results[3].error.detail and "line 3" in results[3].error.detail
    assert "modification.code" in results[5].error.detail
    assert results[5].item_id == "bad-code"
    assert "JSON object" in results[6].error.detail
    assert "metrics" in results[7].error.detail
    assert summary.input_errors == 5


async def test_resume_skips_lines_already_written_and_repairs_a_torn_line(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    async with open_scorer(_settings(tmp_path)) as scorer:
        await score_file(scorer, DEMO, out)
    full = out.read_bytes().splitlines(keepends=True)
    # keep three whole lines and half of the fourth, as a crash mid-write would
    out.write_bytes(b"".join(full[:3]) + full[3][: len(full[3]) // 2])
    async with open_scorer(_settings(tmp_path)) as scorer:
        summary = await score_file(scorer, DEMO, out)
    assert summary.skipped == 3 and summary.scored == 3
    results = _read(out)
    assert sorted(r.line for r in results) == list(range(1, 7))
    strip = [orjson.loads(x) for x in full]
    again = [orjson.loads(x) for x in out.read_bytes().splitlines()]
    assert sorted(strip, key=lambda r: r["line"]) == sorted(again, key=lambda r: r["line"])


def test_cli_score_writes_results_and_summary(tmp_path: Path) -> None:
    out = tmp_path / "cli.jsonl"
    result = CliRunner().invoke(
        app,
        [
            "score",
            str(DEMO),
            "-o",
            str(out),
            "--judge",
            f"replay:{DEMO_JUDGE}",
            "--data-dir",
            str(tmp_path / "d"),
            "--no-progress",
        ],
    )
    assert result.exit_code == 0, result.output
    assert len(_read(out)) == 6
    # a small run lists its items, failures by stage
    assert "demo-006" in result.output and "kb" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--judge", "replay:/nonexistent.jsonl"], "nonexistent"),
        (["--judge", ""], "no judge configured"),
        (["--judge", "nosuch:model"], "nosuch"),
    ],
)
def test_cli_reports_unevaluable_runs_with_exit_3(
    tmp_path: Path, args: list[str], message: str
) -> None:
    result = CliRunner().invoke(app, ["score", str(DEMO), "-o", str(tmp_path / "o.jsonl"), *args])
    assert result.exit_code == 3, result.output
    assert message in result.output


def test_cli_missing_input_file_exits_3(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        [
            "score",
            str(tmp_path / "none.jsonl"),
            "-o",
            str(tmp_path / "o.jsonl"),
            "--judge",
            f"replay:{DEMO_JUDGE}",
        ],
    )
    assert result.exit_code == 3
    assert "not found" in result.output


async def test_a_judge_in_the_process_scores_one_item_at_a_time(tmp_path: Path) -> None:
    # Nothing to overlap: more items in flight would only hold more of them in memory.
    async with open_scorer(_settings(tmp_path)) as scorer:
        assert scorer.items_at_once(32) == 1
    remote = Settings(
        judge="openai:fake-judge",
        openai_base_url="http://127.0.0.1:9/v1",
        openai_api_key="test-key",
        data_dir=tmp_path / "remote",
    )
    async with open_scorer(remote) as scorer:
        assert scorer.items_at_once(32) == 32
        assert scorer.items_at_once(0) == 1


async def test_an_open_scorer_keeps_its_startup_heap_out_of_the_collector(tmp_path: Path) -> None:
    assert gc.get_freeze_count() == 0
    async with open_scorer(_settings(tmp_path)):
        frozen = gc.get_freeze_count()
        assert frozen > 0  # the lexicon, KB and modules: never walked again
        async with open_scorer(_settings(tmp_path / "inner")):
            pass
        assert gc.get_freeze_count() == frozen  # an inner scorer leaves the outer's heap frozen
    assert gc.get_freeze_count() == 0  # handed back on close: its garbage is collected as usual
