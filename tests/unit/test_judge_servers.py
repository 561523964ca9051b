"""What the process learns about judge servers: refused response formats, slow replies, where
a server runs; and how a streamed reply is put back together."""

from __future__ import annotations

from typing import Any

import httpx2
import openai
import pytest
from faithjudge.transport.chat import CompletionChunks, StreamCutShort
from faithjudge.transport.judge_servers import (
    RESPONSE_FORMATS,
    ServerMemo,
    forget_servers,
    grammar_schema,
    is_local_server,
    refuses_response_format,
    response_format_body,
    server_memo,
    server_message,
)

SCHEMA = {"type": "object", "required": ["score"]}
# llama-cpp-python 0.3: FastAPI's validation error, wrapped in an internal server error
LLAMA_CPP = (
    "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', "
    "'type'), 'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}"
)


def status_error(status: int, body: Any) -> openai.APIStatusError:
    """The error the SDK raises for ``status`` (it keeps the error object as ``body``)."""
    request = httpx2.Request("POST", "http://127.0.0.1:8080/v1/chat/completions")
    response = httpx2.Response(status, request=request, json=body)
    kept = body.get("error", body) if isinstance(body, dict) else body
    return openai.APIStatusError("refused", response=response, body=kept)


def test_the_bodies_of_each_format() -> None:
    assert response_format_body("json_schema", name="ct", schema=SCHEMA) == {
        "type": "json_schema",
        "json_schema": {"name": "ct", "schema": SCHEMA, "strict": True},
    }
    assert response_format_body("json_object+schema", name="ct", schema=SCHEMA) == {
        "type": "json_object",
        "schema": grammar_schema(SCHEMA),
    }
    assert response_format_body("json_object", name="ct", schema=SCHEMA) == {"type": "json_object"}
    assert response_format_body("none", name="ct", schema=SCHEMA) is None
    with pytest.raises(ValueError, match="unknown response format 'xml'"):
        response_format_body("xml", name="ct", schema=SCHEMA)


@pytest.mark.parametrize(
    ("status", "body"),
    [
        # OpenAI: the field in ``param``
        (400, {"error": {"message": "not supported", "type": "invalid_request_error",
                         "param": "response_format", "code": None}}),
        # FastAPI servers: a validation error located at the field
        (422, {"detail": [{"loc": ["body", "response_format", "type"], "msg": "bad"}]}),
        # llama-cpp-python: the same validation error, as a 500's message
        (500, {"error": {"message": LLAMA_CPP, "type": "internal_server_error", "param": None,
                         "code": None}}),
    ],
)  # fmt: skip
def test_a_refused_response_format_is_recognised(status: int, body: dict[str, Any]) -> None:
    exc = status_error(status, body)
    assert exc.status_code == status
    assert refuses_response_format(exc)


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (500, {"error": {"message": "CUDA out of memory", "type": "server_error"}}),
        (400, {"error": {"message": "context too long", "param": "messages"}}),
        (503, {"error": {"message": "response_format busy", "type": "server_error"}}),
        (429, {"error": {"message": "slow down", "param": "response_format"}}),
    ],
)
def test_other_failures_are_not_refusals(status: int, body: dict[str, Any]) -> None:
    assert not refuses_response_format(status_error(status, body))
    assert not refuses_response_format(ValueError("response_format"))


def test_the_server_message_is_kept_whole_and_trimmed() -> None:
    exc = status_error(500, {"error": {"message": "  the\nmodel   crashed ", "type": "x"}})
    assert server_message(exc) == "the model crashed"
    long = status_error(500, {"error": {"message": "x" * 1000}})
    said = server_message(long, limit=50)
    assert said is not None and len(said) == 50 and said.endswith("…")
    assert server_message(status_error(422, {"detail": "bad body"})) == "bad body"
    assert server_message(ValueError("no body")) is None


def test_the_memo_moves_on_once_per_refused_format() -> None:
    memo = ServerMemo()
    assert memo.response_format == "json_schema"
    assert memo.refused("json_schema") and memo.response_format == "json_object+schema"
    # a second call refused in the same format finds the memo already moved on: ask again
    assert memo.refused("json_schema") and memo.response_format == "json_object+schema"
    assert memo.refused("json_object+schema") and memo.response_format == "json_object"
    assert memo.refused("json_object") and memo.response_format == "none"
    assert not memo.refused("none") and memo.response_format == "none"
    assert not memo.refused("xml")
    assert RESPONSE_FORMATS == ("json_schema", "json_object+schema", "json_object", "none")


def test_the_memo_is_shared_per_server_and_model() -> None:
    forget_servers()
    first = server_memo("http://127.0.0.1:8080/v1", "gemma")
    assert server_memo("http://127.0.0.1:8080/v1", "gemma") is first
    assert server_memo("http://127.0.0.1:8081/v1", "gemma") is not first
    assert server_memo("http://127.0.0.1:8080/v1", "qwen") is not first
    first.refused("json_schema")
    forget_servers()
    assert server_memo("http://127.0.0.1:8080/v1", "gemma").response_format == "json_schema"


def test_a_slow_reply_makes_the_server_streamed_for_good() -> None:
    memo = ServerMemo()
    assert memo.stream is None
    memo.replied(1.0, timeout=60.0)
    assert memo.stream is False
    memo.replied(20.0, timeout=60.0)  # a quarter of the timeout: the next one might not make it
    assert memo.stream is True
    memo.replied(0.1, timeout=60.0)
    assert memo.stream is True


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("http://127.0.0.1:8080/v1", True),
        ("http://localhost:11434/v1", True),
        ("http://[::1]:8000/v1", True),
        ("http://192.168.1.20:8000/v1", True),
        ("http://10.0.0.5/v1", True),
        ("http://vllm:8000/v1", True),
        ("http://gpu-box.local:8000/v1", True),
        ("https://api.openai.com/v1", False),
        ("https://my-resource.openai.azure.com/openai", False),
        ("https://api.together.xyz/v1", False),
        ("http://8.8.8.8/v1", False),
        (None, False),
        ("", False),
    ],
)
def test_which_servers_are_local(url: str | None, local: bool) -> None:
    assert is_local_server(url) is local


def _chunk(content: str | None = None, finish: str | None = None, **extra: Any) -> dict:
    delta = {} if content is None else {"content": content}
    return {"model": "gemma", "choices": [{"index": 0, "delta": delta,
                                           "finish_reason": finish}], **extra}  # fmt: skip


def test_a_streamed_reply_is_put_back_together() -> None:
    chunks = CompletionChunks()
    chunks.add(_chunk("", system_fingerprint="fp_1"))
    for piece in ('{"sco', 're": ', "3}"):
        chunks.add(_chunk(piece))
    chunks.add(_chunk(None, "stop"))
    chunks.add({"choices": [], "usage": {"prompt_tokens": 900, "completion_tokens": 7}})
    chunks.add("not a chunk")
    response = chunks.response()
    assert response.text == '{"score": 3}'
    assert (response.model, response.fingerprint, response.finish_reason) == (
        "gemma",
        "fp_1",
        "stop",
    )
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (900, 7)


def test_a_reply_cut_at_the_token_limit_says_so() -> None:
    chunks = CompletionChunks()
    chunks.add(_chunk('{"score": '))
    chunks.add(_chunk(None, "length"))
    assert chunks.response().finish_reason == "length"


def test_a_stream_that_ends_without_a_finish_reason_was_cut_short() -> None:
    chunks = CompletionChunks()
    chunks.add(_chunk('{"sco'))
    with pytest.raises(StreamCutShort, match="after 5 characters without saying why") as info:
        chunks.response()
    assert info.value.body == '{"sco'


@pytest.mark.parametrize("metric", ["clinical_fidelity", "causal_attribution", "confidence_tone"])
def test_the_grammar_schema_closes_the_sets_llama_cpp_would_widen(metric: str) -> None:
    """llama.cpp's grammar builder reads a list of types before an enum ("any string or null"):
    the schema it gets has the enum alone, and accepts exactly what the wire schema accepts."""
    import jsonschema
    from faithjudge.schemas import judge_output_schema

    wire = judge_output_schema(metric, strict_wire=True)  # type: ignore[arg-type]
    grammar = grammar_schema(wire)
    assert grammar_schema(wire) is grammar  # converted once per schema

    def nodes(node: Any) -> list[dict[str, Any]]:
        if isinstance(node, dict):
            return [node, *(n for v in node.values() for n in nodes(v))]
        if isinstance(node, list):
            return [n for v in node for n in nodes(v)]
        return []

    widened = [n for n in nodes(wire) if "enum" in n and isinstance(n.get("type"), list)]
    assert widened, "the wire schema has a nullable enum (abstain_reason)"
    assert not [n for n in nodes(grammar) if "enum" in n and isinstance(n.get("type"), list)]
    # each closed set is an enum alone, accepting exactly what the wire schema accepts
    samples = {
        "abstain_reason": [*wire["properties"]["abstain_reason"]["enum"], "empty", 3],
        "score": [None, 0, 1, 3, 5, 6, 2.5, "3"],
    }
    for field, values in samples.items():
        ours, theirs = grammar["properties"][field], wire["properties"][field]
        assert "enum" in ours and "type" not in ours, ours
        for value in values:
            by_wire = jsonschema.Draft202012Validator(theirs).is_valid(value)
            assert jsonschema.Draft202012Validator(ours).is_valid(value) == by_wire, (field, value)
    body = response_format_body("json_object+schema", name=metric, schema=wire)
    assert body == {"type": "json_object", "schema": grammar}
