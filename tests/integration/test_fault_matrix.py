"""A batch through the fake judge over real HTTP, with every fault type injected.

Each faulty item carries a ``[[fake:FAULT]]`` directive in its CoT, so all three of its metric
calls meet the fault. Permanent faults must end in exactly the failure stage they provoke;
transient ones (``*N``) must end valid with the retries counted; no line may go missing.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from faithjudge.pipeline.runtime import open_scorer
from faithjudge.runners.file_runner import score_file
from faithjudge.settings import Settings
from faithjudge_client.lines import ItemResult

from tests.fakes.judge_server import FakeJudgeConfig, run_fake_judge

pytestmark = pytest.mark.anyio

QUESTION = "Is there a pleural effusion on the left? (yes or no)"
COT = (
    "<think>\n<step>The left costophrenic angle is blunted by a meniscus-shaped opacity.</step>\n"
    "<step>The right costophrenic angle is sharp. {marker}</step>\n</think>\n<answer>yes</answer>"
)

# fault -> the failure stage every metric of the item must end with
PERMANENT = {
    "rate_limit": "transport",
    "server_error": "transport",
    "unavailable": "transport",
    "hang": "transport",
    "drop": "transport",
    "not_json": "parse",
    "truncated": "parse",
    "schema_violation": "schema",
    "bad_quote": "evidence",
}
# fault -> failing attempts before the fake answers normally
TRANSIENT = {"rate_limit": 2, "server_error": 1, "unavailable": 3, "hang": 1, "drop": 2}


def _line(item_id: str, marker: str) -> str:
    return json.dumps(
        {
            "item_id": item_id,
            "question": QUESTION,
            "ground_truth": "yes",
            "cot": COT.format(marker=marker),
            "modification": {"code": "TB-RAD", "target_answer": "yes"},
            "baseline": {"answer": "no"},
        }
    )


def _settings(base_url: str, tmp_path: Path) -> Settings:
    return Settings(
        judge="openai:fake-judge",
        openai_base_url=base_url,
        openai_api_key="test-key",
        # well above a loaded machine's answer time (a slow answer must not count as a hang),
        # well below the fake's hang
        timeout_s=1.5,
        retry_base_s=0.0,
        max_retries=5,
        concurrency=32,
        data_dir=tmp_path / "data",
    )


def _results(path: Path) -> dict[str, ItemResult]:
    rows = [ItemResult.model_validate_json(x) for x in path.read_bytes().splitlines()]
    return {r.item_id: r for r in rows if r.item_id}


async def test_every_fault_ends_in_its_stage_and_transients_recover(tmp_path: Path) -> None:
    lines = [_line("clean-1", "(one)"), _line("clean-2", "(two)")]
    lines += [_line(f"perm-{fault}", f"[[fake:{fault}]]") for fault in PERMANENT]
    lines += [_line(f"tran-{f}", f"[[fake:{f}*{n}]]") for f, n in TRANSIENT.items()]
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out.jsonl"

    with run_fake_judge(FakeJudgeConfig(hang_s=3.0)) as fake:
        async with open_scorer(_settings(fake.base_url, tmp_path)) as scorer:
            summary = await score_file(scorer, source, out, concurrency=16)

    results = _results(out)
    assert len(results) == len(lines), "a line went missing"
    assert summary.scored == len(lines)

    stages = Counter(
        m.failure.stage for r in results.values() for m in r.metrics.values() if m.failure
    )
    expected = Counter()
    for stage in PERMANENT.values():
        expected[stage] += 3
    assert stages == expected

    for fault, stage in PERMANENT.items():
        for name, metric in results[f"perm-{fault}"].metrics.items():
            assert metric.status == "invalid", (fault, name)
            assert metric.failure is not None and metric.failure.stage == stage, (fault, name)
            if stage == "transport":
                assert metric.attempts == 6, (fault, name)  # one try + five retries
            else:
                assert metric.attempts == 1, (fault, name)

    for fault, failing in TRANSIENT.items():
        for name, metric in results[f"tran-{fault}"].metrics.items():
            assert metric.status == "valid", (fault, name, metric.failure)
            assert metric.attempts == failing + 1, (fault, name)
        assert results[f"tran-{fault}"].provenance.attempts == 3 * (failing + 1)

    for item in ("clean-1", "clean-2"):
        assert all(m.status == "valid" for m in results[item].metrics.values())
        assert all(m.attempts == 1 for m in results[item].metrics.values())


def _without_cache_bookkeeping(result: ItemResult) -> dict:
    data = result.model_dump(mode="json")
    for metric in data["metrics"].values():
        metric.pop("cache_hit")
        metric.pop("attempts")
    data["provenance"].pop("cache")
    data["provenance"].pop("attempts")
    data["provenance"].pop("judge_s", None)  # the time of calls made: none from the cache
    return data


async def test_second_run_is_served_from_the_cache_with_identical_results(tmp_path: Path) -> None:
    lines = [_line(f"item-{i}", f"(case {i})") for i in range(12)]
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(lines) + "\n")
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"

    with run_fake_judge(FakeJudgeConfig(quote_mode="first_sentence")) as fake:
        async with open_scorer(_settings(fake.base_url, tmp_path)) as scorer:
            await score_file(scorer, source, first)
        calls_after_first = fake.counters.total
        async with open_scorer(_settings(fake.base_url, tmp_path)) as scorer:
            await score_file(scorer, source, second)
        calls_after_second = fake.counters.total

    assert calls_after_first == 36
    assert calls_after_second == calls_after_first, "the cached run called the judge"
    a, b = _results(first), _results(second)
    assert a.keys() == b.keys()
    for key in a:
        assert all(m.cache_hit for m in b[key].metrics.values())
        assert b[key].provenance.cache.hits == 3
        assert _without_cache_bookkeeping(a[key]) == _without_cache_bookkeeping(b[key])
    # the quotes were real: located in the CoT and scored 3
    assert all(m.score == 3 and m.quotes for r in a.values() for m in r.metrics.values())


def test_cli_openai_judge_honours_sdk_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from faithjudge.cli.main import app
    from typer.testing import CliRunner

    source = tmp_path / "in.jsonl"
    source.write_text(_line("env-1", "") + "\n")
    with run_fake_judge() as used, run_fake_judge() as ignored:
        monkeypatch.setenv("OPENAI_BASE_URL", ignored.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
        # the service's own setting wins over the SDK's variable
        monkeypatch.setenv("FAITHJUDGE_OPENAI_BASE_URL", used.base_url)
        result = CliRunner().invoke(
            app,
            [
                "score",
                str(source),
                "-o",
                str(tmp_path / "o.jsonl"),
                "--judge",
                "openai:judge-x",
                "--no-progress",
            ],
        )
        assert result.exit_code == 0, result.output
        assert used.counters.total == 3 and ignored.counters.total == 0
        assert {r["model"] for r in used.requests} == {"judge-x"}

        monkeypatch.delenv("FAITHJUDGE_OPENAI_BASE_URL")
        result = CliRunner().invoke(
            app,
            [
                "score",
                str(source),
                "-o",
                str(tmp_path / "o2.jsonl"),
                "--judge",
                "openai:judge-x",
                "--no-cache",
                "--no-progress",
            ],
        )
        assert result.exit_code == 0, result.output
        assert ignored.counters.total == 3
