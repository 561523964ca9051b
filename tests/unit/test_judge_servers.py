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
    context_overflow,
    forget_servers,
    grammar_schema,
    is_local_server,
    refuses_response_format,
    refuses_stream,
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
    from faithjudge.assets.schemas import judge_output_schema

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


def stream_error(error: dict[str, Any]) -> openai.APIError:
    """What the SDK raises for an error event inside a stream (no status, the error as body)."""
    request = httpx2.Request("POST", "http://127.0.0.1:8080/v1/chat/completions")
    return openai.APIError(str(error.get("message")), request, body=error)


LLAMA_SERVER = {"code": 400, "message": "the request exceeds the available context size, try "
                "increasing it", "type": "exceed_context_size_error", "n_prompt_tokens": 2260,
                "n_ctx": 2048}  # fmt: skip
LLAMA_CPP_PYTHON = {"message": "This model's maximum context length is 2048 tokens. However, you "
                    "requested 3284 tokens (2260 in the messages, 1024 in the completion). Please "
                    "reduce the length of the messages or completion.",
                    "type": "invalid_request_error", "param": "messages",
                    "code": "context_length_exceeded"}  # fmt: skip
LLAMA_CPP_LOG = "Requested tokens (2260) exceed context window of 2048"


@pytest.mark.parametrize(
    "exc",
    [
        status_error(400, {"error": LLAMA_SERVER}),  # llama-server
        stream_error(LLAMA_SERVER),  # older llama-server: an error event in the stream
        status_error(400, {"error": LLAMA_CPP_PYTHON}),  # llama-cpp-python (and vLLM's words)
        # llama-cpp-python's ValueError, as a wrapper passes it on
        status_error(500, {"error": {"message": LLAMA_CPP_LOG, "type": "internal_server_error"}}),
    ],
)
def test_a_prompt_longer_than_the_context_is_recognised_with_its_sizes(exc: Exception) -> None:
    overflow = context_overflow(exc)
    assert overflow is not None
    assert (overflow.prompt_tokens, overflow.n_ctx) == (2260, 2048)
    told = overflow.describe()
    assert "the prompt is 2,260 tokens, the server's context window 2,048" in told
    assert "--n_ctx" in told and "-c/--ctx-size" in told and "cannot help" in told
    assert overflow.said  # the server's own words are kept


def test_a_prompt_that_fits_only_without_the_token_limit_says_both_ways_out() -> None:
    vllm = ("'max_tokens' or 'max_completion_tokens' is too large: 1024. This model's maximum "
            "context length is 2048 tokens and your request has 1500 input tokens "
            "(1024 > 2048 - 1500).")  # fmt: skip
    overflow = context_overflow(status_error(400, {"error": {"message": vllm}}))
    assert overflow is not None and (overflow.prompt_tokens, overflow.n_ctx) == (1500, 2048)
    assert "lower FAITHJUDGE_MAX_TOKENS below 548" in overflow.describe()


@pytest.mark.parametrize(
    "exc",
    [
        status_error(500, {"error": {"message": "CUDA out of memory", "type": "server_error"}}),
        status_error(400, {"error": {"message": "messages must not be empty"}}),
        status_error(429, {"error": {"message": "too many requests in the context of a minute"}}),
        openai.APIConnectionError(request=httpx2.Request("POST", "http://127.0.0.1:9/v1")),
    ],
)
def test_other_failures_are_not_context_overflows(exc: Exception) -> None:
    assert context_overflow(exc) is None


def test_a_refused_stream_is_recognised_and_nothing_else_is() -> None:
    assert refuses_stream(status_error(400, {"error": {"message": "stream=true is not supported",
                                                        "param": "stream"}}))  # fmt: skip
    validation = {"detail": [{"loc": ["body", "stream_options"], "msg": "extra fields"}]}
    assert refuses_stream(status_error(422, validation))
    assert not refuses_stream(status_error(500, {"error": {"message": "stream broke"}}))
    assert not refuses_stream(status_error(400, {"error": {"message": "upstream model busy"}}))
    assert not refuses_stream(status_error(400, {"error": LLAMA_CPP_PYTHON}))


def test_a_stream_that_ends_before_any_chunk_is_told_apart_from_one_cut_short() -> None:
    with pytest.raises(StreamCutShort) as nothing:
        CompletionChunks().response()
    assert nothing.value.events == 0 and "before any reply" in str(nothing.value)
    chunks = CompletionChunks()
    chunks.add(_chunk())  # the role chunk alone
    with pytest.raises(StreamCutShort) as cut:
        chunks.response()
    assert cut.value.events == 1
