"""The judge servers people run themselves (llama-cpp-python, llama.cpp, Ollama on a CPU),
emulated by the fake judge over real loopback HTTP.

Such a server may refuse ``json_schema`` (llama-cpp-python answers it with a 500), take longer
per reply than the timeout, answer one request at a time and cut a streamed reply when another
arrives. A run against it must still end with verified grades, learn the format once, keep the
server's queue free of abandoned requests, and say what went wrong in words that name the
setting to change.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import orjson
import pytest
from faithjudge.assets.schemas import judge_output_schema
from faithjudge.cli.main import app
from faithjudge.errors import JudgeError
from faithjudge.judges.base import JudgeRequest
from faithjudge.judges.openai import OpenAIJudge
from faithjudge.transport.chat import Message
from faithjudge.transport.judge_servers import forget_servers, server_memo
from faithjudge.transport.providers import make_openai_client
from faithjudge.transport.resilience import JudgeCaller
from faithjudge_client.retry import RetryPolicy
from typer.testing import CliRunner

from tests.fakes.judge_server import FakeJudge, FakeJudgeConfig, run_fake_judge

QUESTION = "Is there a pleural effusion on the left? (yes or no)"
COT = (
    "<think>\n<step>The left costophrenic angle is blunted by a meniscus-shaped opacity.</step>\n"
    "<step>The right costophrenic angle is sharp ({n}).</step>\n</think>\n<answer>yes</answer>"
)


def _lines(count: int) -> str:
    return "".join(
        json.dumps({"item_id": f"item-{n}", "question": QUESTION, "ground_truth": "yes",
                    "cot": COT.format(n=n), "modification": {"code": "TB-RAD",
                    "target_answer": "yes"}, "baseline": {"answer": "no"}}) + "\n"
        for n in range(count)
    )  # fmt: skip


def _score(
    workdir: Path, fake: FakeJudge, lines: int, *args: str, data_dir: Path | None = None,
    **env: str,
):  # fmt: skip
    """``faithjudge score`` of ``lines`` lines in ``workdir``, its cache in ``data_dir``."""
    workdir.mkdir(parents=True, exist_ok=True)
    source, out = workdir / "in.jsonl", workdir / "out.jsonl"
    source.write_text(_lines(lines))
    environment = {
        "OPENAI_BASE_URL": fake.base_url,
        "OPENAI_API_KEY": "sk-test",
        "FAITHJUDGE_RETRY_BASE_S": "0.01",
        **env,
    }
    argv = ["score", str(source), "-o", str(out), "--no-progress", "--data-dir",
            str(data_dir or workdir), "--judge", "openai:gemma-3-270m", *args]  # fmt: skip
    result = CliRunner().invoke(app, argv, env=environment)
    return result, [orjson.loads(x) for x in out.read_bytes().splitlines()]


@pytest.fixture
def llama_cpp() -> Iterator[FakeJudge]:
    with run_fake_judge(FakeJudgeConfig(llama_cpp=True)) as fake:
        yield fake


def test_a_llama_cpp_server_is_asked_in_the_format_it_reads(
    tmp_path: Path, llama_cpp: FakeJudge
) -> None:
    """The acceptance run: 20 lines, every grade valid, ``json_schema`` asked for at most
    twice, and the format used in every result and in the run summary."""
    result, rows = _score(tmp_path, llama_cpp, 20)
    assert result.exit_code == 0, result.output
    assert len(rows) == 20
    grades = [m for row in rows for m in row["metrics"].values()]
    assert len(grades) == 60 and all(m["status"] == "valid" for m in grades)
    assert llama_cpp.counters.by_format["json_schema"] <= 2
    assert llama_cpp.counters.by_format["json_object+schema"] == 60
    assert {row["provenance"]["response_format"] for row in rows} == {"json_object+schema"}
    assert "judge asked in response format json_object+schema" in " ".join(result.output.split())
    # a rerun is answered from the cache, under the keys of what was sent: this process
    # remembers the server, so not one call; a fresh process asks once, is refused, and finds
    # every answer under the format it moved on to
    for fresh, calls in ((False, 0), (True, 1)):
        if fresh:
            forget_servers()
        llama_cpp.reset()
        again, rows_again = _score(tmp_path / f"again-{fresh}", llama_cpp, 20, data_dir=tmp_path)
        assert again.exit_code == 0, again.output
        assert llama_cpp.counters.total == calls == llama_cpp.counters.rejected_json_schema
        again_grades = [m for row in rows_again for m in row["metrics"].values()]
        assert all(m["cache_hit"] and m["status"] == "valid" for m in again_grades)
        assert [g["score"] for g in again_grades] == [g["score"] for g in grades]


def test_a_forced_format_the_server_refuses_fails_at_once_saying_why(
    tmp_path: Path, llama_cpp: FakeJudge
) -> None:
    result, rows = _score(tmp_path, llama_cpp, 1, FAITHJUDGE_RESPONSE_FORMAT="json_schema")
    assert result.exit_code == 4, result.output
    assert llama_cpp.counters.total == 3  # one call per metric: a refusal is not retried
    for graded in rows[0]["metrics"].values():
        detail = graded["failure"]["detail"]
        assert graded["failure"]["stage"] == "transport" and graded["attempts"] == 1
        assert "InternalServerError (HTTP 500)" in detail
        assert "FAITHJUDGE_RESPONSE_FORMAT=json_schema" in detail
        assert "the server said:" in detail and "'response_format', 'type'" in detail
        assert "Input should be 'text' or 'json_object'" in detail


def test_a_reply_cut_at_the_token_limit_names_the_setting(tmp_path: Path) -> None:
    with run_fake_judge(FakeJudgeConfig(fault="truncated")) as fake:
        result, rows = _score(tmp_path, fake, 1, FAITHJUDGE_MAX_TOKENS="256")
        assert result.exit_code == 4, result.output  # no valid grade
        # read back from the cache, a cut reply is still reported as one
        fake.reset()
        _, cached = _score(tmp_path / "b", fake, 1, data_dir=tmp_path, FAITHJUDGE_MAX_TOKENS="256")
        assert fake.counters.total == 0
    for row in (rows[0], cached[0]):
        for graded in row["metrics"].values():
            detail = graded["failure"]["detail"]
            assert graded["failure"]["stage"] == "parse"
            assert detail.startswith("truncated JSON (unterminated at char")
            assert "hit the token limit (256 tokens) (finish_reason: length)" in detail
            assert detail.endswith("raise FAITHJUDGE_MAX_TOKENS")


# ------------------------------------------------------------------ slow servers, one caller

SCHEMA = judge_output_schema("confidence_tone", strict_wire=True)


def _request(n: int) -> JudgeRequest:
    fence = "UNTRUSTED COT COT-0a1b2c3d>>>"
    fenced = f"<<<BEGIN {fence}\nLungs clear ({n}).\n<<<END {fence}"
    return JudgeRequest(
        metric="confidence_tone",
        messages=(Message("system", "metric: confidence_tone"), Message("user", fenced)),
        response_schema=SCHEMA,
        schema_name="confidence_tone",
    )


async def _no_wait(seconds: float) -> None:
    return None


def _judge(fake: FakeJudge, timeout: float, **kwargs: object) -> OpenAIJudge:
    client = make_openai_client(base_url=fake.base_url, api_key="sk-test", timeout=timeout)
    return OpenAIJudge("gemma-3-270m", client=client, **kwargs)  # type: ignore[arg-type]


async def _call_all(caller: JudgeCaller, calls: int) -> list[object]:
    outcomes: list[object] = []

    async def one(n: int) -> None:
        try:
            outcomes.append(await caller.call(_request(n)))
        except JudgeError as exc:
            outcomes.append(exc)

    async with anyio.create_task_group() as group:
        for n in range(calls):
            group.start_soon(one, n)
    return outcomes


@pytest.mark.anyio
async def test_a_server_slower_than_the_timeout_finishes_by_streaming() -> None:
    """Replies take three times the timeout, a token comes well within it: streamed, they
    finish; unstreamed, the same server times out and the failure names the setting."""
    config = FakeJudgeConfig(chunk_delay_s=0.03, chunk_chars=8)  # ~1.2 s per reply
    with run_fake_judge(config) as fake:
        judge = _judge(fake, timeout=0.4)
        caller = JudgeCaller(judge, sleep=_no_wait)
        outcomes = await _call_all(caller, 3)
        assert all(not isinstance(o, JudgeError) for o in outcomes), outcomes
        assert [getattr(o, "attempts", None) for o in outcomes] == [1, 1, 1]
        assert all(body.get("stream") is True for body in fake.requests)
        assert server_memo(judge.client.base_url.__str__(), "gemma-3-270m").stream is True
        await judge.aclose()

        unstreamed = _judge(fake, timeout=0.4, stream=False)
        caller = JudgeCaller(unstreamed, sleep=_no_wait, policy=RetryPolicy(max_retries=1))
        with pytest.raises(JudgeError) as info:
            await caller.call(_request(9))
        await unstreamed.aclose()
    message = str(info.value)
    assert "APITimeoutError" in message and info.value.attempts == 2
    assert "the server sent nothing for 0.4 s (FAITHJUDGE_TIMEOUT_S" in message


@pytest.mark.anyio
@pytest.mark.parametrize("server", ["serial", "llama_cpp"])
async def test_a_server_answering_one_at_a_time_is_paced(server: str) -> None:
    """Twelve calls at once to a server that serves one at a time, each reply longer than the
    timeout: every call ends answered, the caller settles on one call in flight, and only the
    few probes of a second call ever wait in the server's queue (or, on llama-cpp-python, cut
    the reply being streamed)."""
    config = FakeJudgeConfig(chunk_delay_s=0.03, chunk_chars=8, **{server: True})  # type: ignore[arg-type]
    with run_fake_judge(config) as fake:
        judge = _judge(fake, timeout=0.6)
        caller = JudgeCaller(judge, sleep=_no_wait, limiter=anyio.CapacityLimiter(100))
        assert caller.pacing is not None and caller.limiter.total_tokens == 1
        outcomes = await _call_all(caller, 12)
        await judge.aclose()
    assert all(not isinstance(o, JudgeError) for o in outcomes), outcomes
    assert caller.limiter.total_tokens <= 2
    wasted = fake.counters.abandoned + fake.counters.cut_short
    # a probe after 1, 2, 4, 8 answers: about log2(calls) of them
    assert wasted <= 5, (fake.counters.abandoned, fake.counters.cut_short)
    assert fake.counters.max_in_flight <= 3
    if server == "llama_cpp":
        assert fake.counters.by_format["json_schema"] == 1


@pytest.mark.anyio
async def test_a_server_error_carries_the_servers_words() -> None:
    with run_fake_judge(FakeJudgeConfig(fault="server_error")) as fake:
        judge = _judge(fake, timeout=2.0)
        caller = JudgeCaller(judge, sleep=_no_wait, policy=RetryPolicy(max_retries=2))
        with pytest.raises(JudgeError) as info:
            await caller.call(_request(1))
        await judge.aclose()
    message = str(info.value)
    assert message.startswith("InternalServerError (HTTP 500) after 3 attempts, retries exhausted")
    assert "the server said: fake server_error" in message[:200]


# ------------------------------------------------------------------ litellm


@pytest.mark.skipif(importlib.util.find_spec("litellm") is None, reason="litellm not installed")
def test_litellm_pointed_at_another_server_asks_that_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same lines, the same cache, ``OPENAI_BASE_URL`` moved to a second server: the
    second server is asked, not the first one's cached answers reused."""
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no download at import
    with run_fake_judge() as first, run_fake_judge() as second:
        runs = []
        for fake in (first, second):
            source, out = tmp_path / "in.jsonl", tmp_path / f"out-{fake.port}.jsonl"
            source.write_text(_lines(2))
            argv = ["score", str(source), "-o", str(out), "--no-progress", "--data-dir",
                    str(tmp_path), "--judge", "litellm:openai/judge-1"]  # fmt: skip
            env = {"OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "sk-test"}
            runs.append(CliRunner().invoke(app, argv, env=env))
            assert runs[-1].exit_code == 0, runs[-1].output
            rows = [orjson.loads(x) for x in out.read_bytes().splitlines()]
            assert all(m["status"] == "valid" for r in rows for m in r["metrics"].values())
            assert not any(m["cache_hit"] for r in rows for m in r["metrics"].values())
        assert first.counters.total == 6 and second.counters.total == 6
