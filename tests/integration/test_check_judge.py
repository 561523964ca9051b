"""``faithjudge check-judge`` against the fake judge server: a good server, one that answers
garbage, one whose chat template drops the system message, one that refuses strict schemas, a
dead URL, an unlisted model, and the offline judge."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from faithjudge.cli.main import app
from faithjudge.exit_codes import ExitCode
from faithjudge.runners.judge_check import (
    MetricProbe,
    Suggestion,
    prompt_reached,
    suggest_settings,
)
from faithjudge.settings import Settings
from faithjudge_client.metric_catalogue import metric_names
from typer.testing import CliRunner

from tests.fakes.judge_server import FakeJudge, FakeJudgeConfig, run_fake_judge

# A server on loopback gets two calls per metric: its prompt counted (one token, unstreamed),
# then graded.
CALLS = 2


def _check(env: dict[str, str], *args: str) -> Any:
    return CliRunner().invoke(app, ["check-judge", *args], env=env)


def _env(base_url: str) -> dict[str, str]:
    return {"OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": "sk-test",
            "FAITHJUDGE_RETRY_BASE_S": "0"}  # fmt: skip


def _text(result: Any) -> str:
    return " ".join(result.output.split())


@pytest.fixture
def judge(request: pytest.FixtureRequest) -> Iterator[FakeJudge]:
    options = getattr(request, "param", {})
    with run_fake_judge(FakeJudgeConfig(models=("judge-1",), **options)) as fake:
        yield fake


def test_a_good_server_passes_and_names_the_format(judge: FakeJudge) -> None:
    result = _check(_env(judge.base_url), "--judge", "openai:judge-1")
    text = _text(result)
    assert result.exit_code == ExitCode.OK, result.output
    assert "the judge can grade (response format json_schema)" in text
    assert "the server lists 1 model(s): judge-1" in text
    assert "warning" not in text
    # real calls per metric: nothing came from a cache
    assert judge.counters.by_metric == {metric: CALLS for metric in metric_names()}
    assert [b["max_tokens"] for b in judge.requests] == [1, 1024] * len(metric_names())
    for setting in ("FAITHJUDGE_TIMEOUT_S", "FAITHJUDGE_CONCURRENCY", "FAITHJUDGE_MAX_TOKENS"):
        assert setting in text


def test_every_check_is_a_real_call_even_with_a_warm_cache(judge: FakeJudge) -> None:
    env = _env(judge.base_url)
    for _ in range(2):
        assert _check(env, "--judge", "openai:judge-1").exit_code == 0
    assert judge.counters.by_metric == {metric: 2 * CALLS for metric in metric_names()}


@pytest.mark.parametrize("judge", [{"fault": "not_json"}], indirect=True)
def test_a_server_that_answers_garbage_fails_with_the_reason(judge: FakeJudge) -> None:
    result = _check(_env(judge.base_url), "--judge", "openai:judge-1")
    text = _text(result)
    assert result.exit_code == ExitCode.CHECK_FAILED, result.output
    assert "error:" in text and "the reply is not JSON" in text
    assert ", ".join(metric_names()) + ": the reply is not JSON" in text  # said once, not 3x


@pytest.mark.parametrize("judge", [{"fault": "schema_violation"}], indirect=True)
def test_replies_outside_the_schema_fail(judge: FakeJudge) -> None:
    result = _check(_env(judge.base_url), "--judge", "openai:judge-1", "--json")
    assert result.exit_code == ExitCode.CHECK_FAILED
    found = json.loads(result.stdout)
    assert {m["outcome"] for m in found["metrics"]} == {"schema"}
    assert "JSON outside the schema" in found["reason"]


@pytest.mark.parametrize("judge", [{"drop_system": True}], indirect=True)
def test_a_template_that_drops_the_system_message_is_warned_about(judge: FakeJudge) -> None:
    result = _check(_env(judge.base_url), "--judge", "openai:judge-1", "--json")
    found = json.loads(result.stdout)
    assert [m["system_reached"] for m in found["metrics"]] == [False] * len(metric_names())
    assert any("system message (the rubric) does not seem to reach" in w
               for w in found["warnings"])  # fmt: skip
    assert "--chat_format chatml" in " ".join(found["warnings"])


@pytest.mark.parametrize("judge", [{"reject_json_schema": True}], indirect=True)
def test_the_format_the_server_accepted_is_named(judge: FakeJudge) -> None:
    result = _check(_env(judge.base_url), "--judge", "openai:judge-1", "--json")
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    assert found["response_format"] not in (None, "json_schema")
    assert judge.counters.rejected_json_schema >= 1


def test_a_dead_url_fails_at_once_with_the_cause() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = _check(_env(f"http://127.0.0.1:{port}/v1"), "--judge", "openai:judge-1")
    text = _text(result)
    assert result.exit_code == ExitCode.UNEVALUABLE, result.output
    assert "the judge server is unreachable: connection refused" in text
    assert "one sample CoT" not in text  # no grading was attempted


def test_a_model_the_server_does_not_serve_is_named(judge: FakeJudge) -> None:
    result = _check(_env(judge.base_url), "--judge", "openai:judge-2")
    text = _text(result)
    assert result.exit_code == ExitCode.UNEVALUABLE, result.output
    assert "'judge-2' is not among the models the server lists" in text
    assert "model or endpoint not found (HTTP 404)" in text


def test_the_offline_judge_passes_without_a_server() -> None:
    result = _check({}, "--judge", "lexicon:v1", "--json")
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    assert [m["outcome"] for m in found["metrics"]] == ["valid"] * len(metric_names())
    assert found["suggestions"] == [] and found["models"]["models"] is None


def _probe(latency: float, completion: int, outcome: str = "valid") -> MetricProbe:
    return MetricProbe(metric="clinical_fidelity", outcome=outcome, detail=None, latency_s=latency,
                       attempts=1, prompt_tokens=1000, completion_tokens=completion, model="m",
                       response_format="json_object", system_chars=3000, user_chars=800,
                       truncated=completion >= 1024)  # fmt: skip


def _suggested(suggestions: list[Suggestion]) -> dict[str, str]:
    return {s.setting: s.value for s in suggestions}


def test_a_slow_serial_server_gets_a_long_timeout_and_concurrency_one() -> None:
    settings = Settings.model_construct(timeout_s=60.0, concurrency=100, max_tokens=1024)
    slow = _suggested(suggest_settings(settings, [_probe(95.0, 300), _probe(120.0, 350)], None))
    assert slow == {"FAITHJUDGE_TIMEOUT_S": "360", "FAITHJUDGE_CONCURRENCY": "1",
                    "FAITHJUDGE_MAX_TOKENS": "1024"}  # fmt: skip
    serial = _suggested(suggest_settings(settings, [_probe(2.0, 100)] * 3, 1.1))
    assert serial["FAITHJUDGE_CONCURRENCY"] == "1" and serial["FAITHJUDGE_TIMEOUT_S"] == "60"
    parallel = _suggested(suggest_settings(settings, [_probe(2.0, 100)] * 3, 2.9))
    assert parallel["FAITHJUDGE_CONCURRENCY"] == "100"


def test_a_reply_cut_at_the_token_limit_doubles_it() -> None:
    settings = Settings.model_construct(timeout_s=60.0, concurrency=4, max_tokens=1024)
    cut = _suggested(suggest_settings(settings, [_probe(1.0, 1024, "parse")], None))
    assert cut["FAITHJUDGE_MAX_TOKENS"] == "2048"
    long = _suggested(suggest_settings(settings, [_probe(1.0, 700)], None))
    assert long["FAITHJUDGE_MAX_TOKENS"] == "1536"


def test_the_system_message_estimate() -> None:
    # 4,000 characters of rubric and 1,000 of CoT: about 1,250 tokens with the rubric
    assert prompt_reached(1250, 4000, 1000) is True
    assert prompt_reached(1000, 4000, 1000) is True  # a tokenizer at 5 characters a token
    assert prompt_reached(260, 4000, 1000) is False  # the CoT alone
    assert prompt_reached(0, 4000, 1000) is None  # the server reported no usage


@pytest.mark.parametrize("judge", [{"fault": "truncated"}], indirect=True)
def test_a_reply_cut_at_the_token_limit_fails_and_asks_for_more(judge: FakeJudge) -> None:
    env = {**_env(judge.base_url), "FAITHJUDGE_MAX_TOKENS": "600"}
    result = _check(env, "--judge", "openai:judge-1", "--json")
    assert result.exit_code == ExitCode.CHECK_FAILED, result.output
    found = json.loads(result.stdout)
    assert all(m["truncated"] for m in found["metrics"])
    assert "cut off at the token limit (600 tokens, FAITHJUDGE_MAX_TOKENS)" in found["reason"]
    tokens = next(s for s in found["suggestions"] if s["setting"] == "FAITHJUDGE_MAX_TOKENS")
    assert (tokens["value"], tokens["current"]) == ("1200", "600")


def test_a_batch_spec_is_checked_through_the_live_route(judge: FakeJudge) -> None:
    # the Batch API answers within hours: the same server and model are asked directly
    result = _check(_env(judge.base_url), "--judge", "openai-batch:judge-1", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["judge"] == "openai:judge-1"
    assert judge.counters.by_metric == {metric: CALLS for metric in metric_names()}


def test_a_server_that_counts_no_tokens_keeps_the_token_limit() -> None:
    settings = Settings.model_construct(timeout_s=60.0, concurrency=1, max_tokens=1024)
    kept = [s for s in suggest_settings(settings, [_probe(5.0, 0)], None)
            if s.setting == "FAITHJUDGE_MAX_TOKENS"]  # fmt: skip
    assert kept[0].value == "1024" and not kept[0].changes
    assert kept[0].why == "the server reported no token counts"
