"""A provider's prompt cache, over real HTTP: cached tokens counted, priced and shown (by the
CLI and in a service job's status), and the ``prompt_cache_key`` sent, or learnt to be refused.

The fake judge caches prompt prefixes by OpenAI's rules (``FakeJudgeConfig.prompt_cache``:
1,024 tokens at least, 128-token steps) and counts what its usage reported.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from faithjudge.cli.main import app
from faithjudge.judges.base import JudgeRequest
from faithjudge.judges.openai import OpenAIJudge, prompt_cache_key
from faithjudge.transport.chat import Message
from faithjudge.transport.judge_servers import forget_servers
from faithjudge.transport.providers import make_openai_client
from faithjudge_client.lines import ItemResult
from typer.testing import CliRunner

from tests.fakes.judge_server import FakeJudge, FakeJudgeConfig, run_fake_judge
from tests.fixtures_service import Backend, running_app, wait_for_status
from tests.integration.test_api_jobs import NDJSON, demo_lines, settings_for

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "demo.jsonl"
SCHEMA = {"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"]}
# a system prompt long enough to be cached (OpenAI caches from 1,024 tokens)
RUBRIC = "You are a strict judge. metric: confidence_tone. " + "Grade with care. " * 400

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def judge(request: pytest.FixtureRequest) -> Iterator[FakeJudge]:
    forget_servers()  # what another test's server refused is not this one's
    options = getattr(request, "param", {})
    with run_fake_judge(FakeJudgeConfig(prompt_cache=True, **options)) as fake:
        yield fake
    forget_servers()


def _env(judge: FakeJudge, tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "OPENAI_BASE_URL": judge.base_url,
        "OPENAI_API_KEY": "sk-test",
        "FAITHJUDGE_RETRY_BASE_S": "0",
        "FAITHJUDGE_DATA_DIR": str(tmp_path / "data"),
        **extra,
    }


def _results(path: Path) -> list[ItemResult]:
    return [ItemResult.model_validate_json(line) for line in path.read_bytes().splitlines()]


def test_the_results_count_every_cached_token_the_server_reported(
    judge: FakeJudge, tmp_path: Path
) -> None:
    out = tmp_path / "out.jsonl"
    prices = {"FAITHJUDGE_PRICE_INPUT_PER_MTOK": "2", "FAITHJUDGE_PRICE_OUTPUT_PER_MTOK": "8",
              "FAITHJUDGE_PRICE_CACHED_INPUT_PER_MTOK": "0.5"}  # fmt: skip
    result = CliRunner().invoke(
        app,
        ["score", str(DEMO), "-o", str(out), "--judge", "openai:judge-1", "--no-cache"],
        env=_env(judge, tmp_path, **prices),
    )
    assert result.exit_code == 0, result.output
    results = _results(out)
    tokens = [r.provenance.tokens for r in results if r.provenance is not None]
    cached = sum(t.cached for t in tokens)
    prompt = sum(t.prompt for t in tokens)
    completion = sum(t.completion for t in tokens)
    # later calls of a metric find its schema and system prompt cached
    assert 0 < cached == judge.counters.cached_tokens < prompt == judge.counters.prompt_tokens
    text = " ".join(result.output.split())
    share = f"{cached:,} ({cached / prompt:.1%})"
    assert re.search(rf"of which cached by the provider │ +{re.escape(share)}", text), text
    cost = ((prompt - cached) * 2 + cached * 0.5 + completion * 8) / 1e6
    full = (prompt * 2 + completion * 8) / 1e6
    assert f"${cost:,.4f}" in text and f"${full:,.4f}" in text
    # a line records its cached tokens only when some were: the others read as they always did
    for raw in out.read_bytes().splitlines():
        line = orjson.loads(raw)
        kept = line["provenance"]["tokens"]
        assert ("cached" in kept) == bool(kept.get("cached")), kept


def test_without_a_cached_price_none_is_claimed(judge: FakeJudge, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    prices = {"FAITHJUDGE_PRICE_INPUT_PER_MTOK": "2", "FAITHJUDGE_PRICE_OUTPUT_PER_MTOK": "8"}
    result = CliRunner().invoke(
        app,
        ["score", str(DEMO), "-o", str(out), "--judge", "openai:judge-1", "--no-cache"],
        env=_env(judge, tmp_path, **prices),
    )
    assert result.exit_code == 0, result.output
    tokens = [r.provenance.tokens for r in _results(out) if r.provenance is not None]
    assert sum(t.cached for t in tokens) > 0
    full = (sum(t.prompt for t in tokens) * 2 + sum(t.completion for t in tokens) * 8) / 1e6
    text = " ".join(result.output.split())
    assert f"${full:,.4f}" in text and "no cached-input rate" not in text


@pytest.fixture(params=[False, True], ids=["unstreamed", "streamed"])
async def openai_judge(
    request: pytest.FixtureRequest, judge: FakeJudge
) -> AsyncIterator[OpenAIJudge]:
    client = make_openai_client(base_url=judge.base_url, api_key="sk-test", timeout=5.0)
    openai_judge = OpenAIJudge("judge-1", client=client, stream=request.param)
    yield openai_judge
    await openai_judge.aclose()


def _request(cot: str, question: str = "Is there an effusion?") -> JudgeRequest:
    fenced = f"<<<BEGIN UNTRUSTED COT COT-0a1b2c3d>>>\n{cot}\n<<<END UNTRUSTED COT COT-0a1b2c3d>>>"
    return JudgeRequest(
        metric="confidence_tone",
        messages=(Message("system", RUBRIC), Message("user", f"Grade this.\n{fenced}")),
        response_schema=SCHEMA,
        schema_name="confidence_tone",
        inputs={"cot": cot, "question": question},
    )


async def test_cached_tokens_are_read_streamed_or_not(
    judge: FakeJudge, openai_judge: OpenAIJudge
) -> None:
    first = await openai_judge.judge(_request("The angle is blunted."))
    second = await openai_judge.judge(_request("The angle is sharp."))
    assert first.usage.cached_tokens == 0  # nothing was cached before
    assert 1024 <= second.usage.cached_tokens < second.usage.prompt_tokens
    assert second.usage.cached_tokens % 128 == 0
    assert first.usage.cached_tokens + second.usage.cached_tokens == judge.counters.cached_tokens


async def test_the_key_of_a_metric_and_question_is_sent(
    judge: FakeJudge, openai_judge: OpenAIJudge
) -> None:
    await openai_judge.judge(_request("one"))
    await openai_judge.judge(_request("two"))
    await openai_judge.judge(_request("three", question="Is the tube in place?"))
    keys = judge.counters.prompt_cache_keys
    assert keys == {
        prompt_cache_key(_request("one")): 2,
        prompt_cache_key(_request("three", question="Is the tube in place?")): 1,
    }
    sent = judge.requests[0]
    material = openai_judge.cache_key_material(_request("one"))
    # it decides where the prompt is cached, not what the judge answers: not in the cache key
    assert sent["prompt_cache_key"].startswith("fj-") and "prompt_cache_key" not in str(material)


@pytest.mark.parametrize("judge", [{"refuse_prompt_cache_key": True}], indirect=True)
async def test_a_refused_key_is_learnt_once_per_server(
    judge: FakeJudge, openai_judge: OpenAIJudge
) -> None:
    first = await openai_judge.judge(_request("one"))
    second = await openai_judge.judge(_request("two"))
    assert first.text and second.text
    assert judge.counters.cache_key_refused == 1  # refused once, then never sent again
    assert [("prompt_cache_key" in body) for body in judge.requests] == [True, False, False]


def test_a_server_without_caching_reports_none(tmp_path: Path) -> None:
    forget_servers()
    with run_fake_judge(FakeJudgeConfig()) as plain:
        out = tmp_path / "out.jsonl"
        result = CliRunner().invoke(
            app,
            ["score", str(DEMO), "-o", str(out), "--judge", "openai:judge-1", "--no-cache"],
            env=_env(plain, tmp_path),
        )
    forget_servers()
    assert result.exit_code == 0, result.output
    tokens: list[Any] = [r.provenance.tokens for r in _results(out) if r.provenance]
    assert tokens and all(t.cached == 0 and t.prompt > 0 for t in tokens)
    assert "of which cached by the provider │ 0 (0.0%)" in " ".join(result.output.split())
    assert b'"cached"' not in out.read_bytes()


async def test_a_jobs_status_adds_up_the_cached_tokens_of_its_results(
    judge: FakeJudge, tmp_path: Path
) -> None:
    settings = settings_for(
        Backend("sqlite", {}),
        tmp_path,
        judge="openai:judge-1",
        openai_base_url=judge.base_url,
        openai_api_key="sk-test",
        retry_base_s=0,
        cache=False,  # every answer paid now: the fake's counters hold all of them
        price_input_per_mtok=2,
        price_output_per_mtok=8,
        price_cached_input_per_mtok=0.5,
    )
    async with running_app(settings) as (_, client):
        body = b"\n".join(demo_lines(6)) + b"\n"
        accepted = await client.post("/v1/batches", content=body, headers=NDJSON)
        assert accepted.status_code == 202, accepted.text
        job_id = accepted.json()["id"]
        status = await wait_for_status(client, job_id)
        response = await client.get(f"/v1/batches/{job_id}/results")
        response.raise_for_status()
    results = [ItemResult.model_validate_json(x) for x in response.content.splitlines() if x]
    tokens = [r.provenance.tokens for r in results if r.provenance is not None]
    assert len(tokens) == 6
    prompt = sum(t.prompt for t in tokens)
    completion = sum(t.completion for t in tokens)
    cached = sum(t.cached for t in tokens)
    assert status["tokens"] == {"prompt": prompt, "completion": completion, "cached": cached}
    assert 0 < cached == judge.counters.cached_tokens < prompt == judge.counters.prompt_tokens
    cost = ((prompt - cached) * 2 + cached * 0.5 + completion * 8) / 1e6
    assert status["cost_usd"] == pytest.approx(cost, abs=1e-6)
