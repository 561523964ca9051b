"""A judge server's limits, told truthfully: a server that refuses ``stream: true``, a prompt
longer than the server's context window (refused in llama-server's and llama-cpp-python's own
words, streamed and unstreamed), a reply cut by the context rather than by the token limit, and
``check-judge`` on the user's own file. The judge is the fake over real loopback HTTP.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from faithjudge.assets.schemas import judge_output_schema
from faithjudge.cli.main import app
from faithjudge.errors import JudgeError
from faithjudge.exit_codes import ExitCode
from faithjudge.judges.base import JudgeRequest
from faithjudge.judges.openai import OpenAIJudge
from faithjudge.transport.chat import Message
from faithjudge.transport.judge_servers import server_memo
from faithjudge.transport.providers import make_openai_client
from faithjudge.transport.resilience import JudgeCaller
from faithjudge_client.metric_catalogue import metric_names
from typer.testing import CliRunner

from tests.fakes.judge_server import FakeJudge, FakeJudgeConfig, run_fake_judge

QUESTION = "Is there a pleural effusion on the left? (yes or no)"
COT = (
    "<think>\n<step>The left costophrenic angle is blunted by a meniscus-shaped opacity.</step>\n"
    "<step>The right costophrenic angle is sharp{pad}.</step>\n</think>\n<answer>yes</answer>"
)
# The fake counts a token per 4 characters: the prompts of a short line are about 1,000-2,200
# tokens by metric, and a line padded with 6,000 characters adds 1,500 to each.
N_CTX = 3_000
LONG_PAD = 6_000


def _line(n: int, pad: int = 0) -> str:
    cot = COT.format(pad=f" ({'the right base is clear; ' * (pad // 26 + 1)})"[: pad + 3] if pad
                     else f" ({n})")  # fmt: skip
    return json.dumps({"item_id": f"item-{n}", "question": QUESTION, "ground_truth": "yes",
                       "cot": cot, "modification": {"code": "TB-RAD", "target_answer": "yes"},
                       "baseline": {"answer": "no"}}) + "\n"  # fmt: skip


def _env(fake: FakeJudge, **extra: str) -> dict[str, str]:
    return {"OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "sk-test",
            "FAITHJUDGE_RETRY_BASE_S": "0", **extra}  # fmt: skip


def _score(tmp_path: Path, fake: FakeJudge, lines: str, **env: str) -> tuple[Any, list[Any]]:
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text(lines)
    argv = ["score", str(source), "-o", str(out), "--no-progress", "--data-dir", str(tmp_path),
            "--judge", "openai:gemma-3-270m"]  # fmt: skip
    result = CliRunner().invoke(app, argv, env=_env(fake, **env))
    return result, [orjson.loads(x) for x in out.read_bytes().splitlines()]


def _grades(rows: list[Any]) -> list[dict[str, Any]]:
    return [m for row in rows for m in row["metrics"].values()]


def _text(result: Any) -> str:
    return " ".join(result.output.split())


# ---------------------------------------------------------------- a server that cannot stream


def test_a_server_that_refuses_streaming_is_asked_unstreamed(tmp_path: Path) -> None:
    """The acceptance run: every grade valid, the refusal learnt once, no attempt lost to it."""
    with run_fake_judge(FakeJudgeConfig(refuse_stream=True)) as fake:
        result, rows = _score(tmp_path, fake, "".join(_line(n) for n in range(4)))
        refused = fake.counters.stream_refused
        bodies = fake.requests
    assert result.exit_code == 0, result.output
    grades = _grades(rows)
    assert len(grades) == 4 * len(metric_names())
    assert all(g["status"] == "valid" and g["attempts"] == 1 for g in grades), grades
    assert refused == 1  # a server on loopback is streamed to at first, once
    assert [b.get("stream") for b in bodies].count(True) == 1
    assert server_memo(fake.base_url + "/", "gemma-3-270m").stream_refused


# ---------------------------------------------------- a prompt longer than the context window

STYLES = ["llama_server", "llama_server_event", "llama_cpp_python"]


@pytest.mark.parametrize("style", STYLES)
def test_a_prompt_longer_than_the_context_is_named_and_tried_once(
    tmp_path: Path, style: str
) -> None:
    config = FakeJudgeConfig(n_ctx=N_CTX, context_style=style)  # type: ignore[arg-type]
    with run_fake_judge(config) as fake:
        lines = _line(0) + _line(1, pad=LONG_PAD)
        result, rows = _score(tmp_path, fake, lines)
        refused = fake.counters.context_refused
    assert result.exit_code == 0, result.output  # the short line and most metrics grade
    assert all(g["status"] == "valid" for g in _grades(rows[:1]))
    failed = [(name, g) for name, g in rows[1]["metrics"].items() if g["status"] != "valid"]
    assert [name for name, _ in failed] == ["clinical_fidelity"]  # its prompt is the longest
    graded = failed[0][1]
    detail = graded["failure"]["detail"]
    assert graded["failure"]["stage"] == "transport"
    assert graded["attempts"] == 1 and refused == 1  # not retried
    assert "does not fit the judge server's context window" in detail
    assert "--n_ctx" in detail and "-c/--ctx-size" in detail
    assert "FAITHJUDGE_MAX_TOKENS cannot help" in detail
    assert "FAITHJUDGE_CONCURRENCY" not in detail
    assert f"context window {N_CTX:,}" in detail  # the size the server told
    if style != "llama_cpp_python":
        assert "exceeds the available context size" in detail  # the server's own words
    else:
        assert f"maximum context length is {N_CTX} tokens" in detail


def _request(chars: int) -> JudgeRequest:
    fence = "UNTRUSTED COT COT-0a1b2c3d>>>"
    fenced = f"<<<BEGIN {fence}\n{'Lungs clear. ' * (chars // 13)}\n<<<END {fence}"
    return JudgeRequest(
        metric="confidence_tone",
        messages=(Message("system", "metric: confidence_tone"), Message("user", fenced)),
        response_schema=judge_output_schema("confidence_tone", strict_wire=True),
        schema_name="confidence_tone",
    )


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [True, False])
async def test_llama_cpp_python_words_reach_the_failure_streamed_or_not(stream: bool) -> None:
    """llama-cpp-python ends a stream before any chunk when the prompt does not fit: the call
    is asked again unstreamed within the attempt, and its refusal is what the failure says."""
    with run_fake_judge(FakeJudgeConfig(n_ctx=500, llama_cpp=True)) as fake:
        client = make_openai_client(base_url=fake.base_url, api_key="sk-test", timeout=5.0)
        judge = OpenAIJudge("gemma", client=client, stream=stream,
                                    response_format="json_object+schema")  # fmt: skip
        caller = JudgeCaller(judge)
        with pytest.raises(JudgeError) as info:
            await caller.call(_request(4_000))
        await judge.aclose()
        refused = fake.counters.context_refused
    message = str(info.value)
    assert info.value.attempts == 1
    assert refused == (2 if stream else 1)  # the silent stream, then the words
    assert "the prompt is 1,02" in message and "context window 500" in message
    assert "context_length_exceeded" not in message or "maximum context length" in message
    assert judge.context_size == 500


# ------------------------------------------------------- a reply cut by the context, not max


@pytest.mark.parametrize("llama_cpp", [False, True])
def test_a_reply_cut_by_the_context_is_not_blamed_on_the_token_limit(
    tmp_path: Path, llama_cpp: bool
) -> None:
    """A prompt that fits, but leaves the reply less room than it needs: the server stops at
    ``length`` as at the token limit. Streamed without counts (llama-cpp-python) or counted,
    the detail names the context window and not FAITHJUDGE_MAX_TOKENS."""
    with run_fake_judge(FakeJudgeConfig(n_ctx=2_200, llama_cpp=llama_cpp)) as fake:
        _, rows = _score(tmp_path, fake, _line(0))
    cut = rows[0]["metrics"]["clinical_fidelity"]  # ~2,160 prompt tokens of 2,200
    assert cut["failure"]["stage"] == "parse", cut
    detail = cut["failure"]["detail"]
    assert "the reply filled the judge server's context window" in detail
    assert "raise FAITHJUDGE_MAX_TOKENS" not in detail and "--n_ctx" in detail
    others = [g for name, g in rows[0]["metrics"].items() if name != "clinical_fidelity"]
    assert all(g["status"] == "valid" for g in others)


# ------------------------------------------------------------------- check-judge on a file


def _check(fake: FakeJudge, *args: str, **env: str) -> Any:
    argv = ["check-judge", "--judge", "openai:gemma-3-270m", *args]
    return CliRunner().invoke(app, argv, env=_env(fake, **env))


@pytest.mark.parametrize("style", ["llama_server", "llama_cpp_python"])
def test_check_judge_fails_on_a_file_whose_longest_prompt_does_not_fit(
    tmp_path: Path, style: str
) -> None:
    requests = tmp_path / "requests.jsonl"
    requests.write_text(_line(0) + _line(1) + _line(2, pad=LONG_PAD) + _line(3))
    config = FakeJudgeConfig(n_ctx=N_CTX, context_style=style)  # type: ignore[arg-type]
    with run_fake_judge(config) as fake:
        plain = _check(fake)  # the shipped sample fits
        on_file = _check(fake, str(requests))
        as_json = _check(fake, str(requests), "--json")
    assert plain.exit_code == ExitCode.OK, plain.output
    assert on_file.exit_code == ExitCode.CHECK_FAILED, on_file.output
    text = _text(on_file)
    assert f"the longest prompt of {requests} (line 3, clinical_fidelity) is 3,6" in text
    assert f"does not fit the server's context window of {N_CTX:,} tokens" in text
    assert "--n_ctx" in text
    found = json.loads(as_json.stdout)
    assert found["exit_code"] == ExitCode.CHECK_FAILED
    by_metric = {m["metric"]: m for m in found["metrics"]}
    assert by_metric["clinical_fidelity"]["outcome"] == "context"
    assert by_metric["clinical_fidelity"]["line"] == 3
    assert by_metric["confidence_tone"]["outcome"] == "valid"
    if style == "llama_server":
        assert found["n_ctx"] == N_CTX  # told by GET /props before any prompt


def test_check_judge_counts_unstreamed_and_never_says_zero_tokens(tmp_path: Path) -> None:
    """llama-cpp-python counts no tokens in a streamed reply: the prompt is counted by an
    unstreamed call, so a dropped system message is still warned about, and the reply's
    tokens are unknown, not 0. Replies slow enough for the timeout keep every grade streamed."""
    config = FakeJudgeConfig(llama_cpp=True, drop_system=True, chunk_delay_s=0.02,
                             chunk_chars=32)  # fmt: skip
    with run_fake_judge(config) as fake:
        result = _check(fake, "--json", FAITHJUDGE_TIMEOUT_S="0.6")
        table = _check(fake, FAITHJUDGE_TIMEOUT_S="0.6")
    found = json.loads(result.stdout)
    assert all(body.get("stream") for body in fake.requests if body.get("max_tokens") != 1)
    for metric in found["metrics"]:
        assert metric["prompt_tokens"] and metric["completion_tokens"] is None
        assert metric["system_reached"] is False
    assert any("system message (the rubric) does not seem to reach" in w
               for w in found["warnings"])  # fmt: skip
    assert not any("reported no prompt tokens" in w for w in found["warnings"])
    assert "unknown" in _text(table)


def test_check_judge_warns_when_the_context_leaves_the_reply_too_little_room(
    tmp_path: Path,
) -> None:
    requests = tmp_path / "requests.jsonl"
    requests.write_text(_line(0))
    with run_fake_judge(FakeJudgeConfig(n_ctx=2_600)) as fake:
        result = _check(fake, str(requests), "--json")
    found = json.loads(result.stdout)
    assert found["n_ctx"] == 2_600
    assert any("tokens of the server's 2,600-token context window for the reply" in w
               and "FAITHJUDGE_MAX_TOKENS (1,024)" in w for w in found["warnings"])  # fmt: skip


def test_check_judge_names_an_unreadable_file(tmp_path: Path) -> None:
    with run_fake_judge(FakeJudgeConfig()) as fake:
        missing = _check(fake, str(tmp_path / "nope.jsonl"))
        (tmp_path / "bad.jsonl").write_text("{not json\n")
        unreadable = _check(fake, str(tmp_path / "bad.jsonl"))
    assert missing.exit_code == ExitCode.UNEVALUABLE
    assert "cannot read the requests file" in _text(missing)
    assert unreadable.exit_code == ExitCode.UNEVALUABLE
    assert "no line makes a judge call" in _text(unreadable)
