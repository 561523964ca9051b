"""An OpenAI-compatible fake judge served over real HTTP on loopback.

``POST /v1/chat/completions`` answers every metric with a schema-valid reply (score 1, no
quotes), after ``latency_s`` of non-blocking delay. Faults are chosen by the request itself: a
directive ``[[fake:FAULT]]`` or ``[[fake:FAULT*N]]`` anywhere in the user message makes the
first N attempts of that (user message, metric) fail with FAULT, and later ones answer normally;
without ``*N`` the fault is permanent. Faults:

==================  ===========================================================================
rate_limit          429 with ``Retry-After`` (``config.retry_after``, default ``0``)
server_error        500
unavailable         503
hang                no answer for ``config.hang_s`` seconds (then a normal answer)
drop                the connection is aborted without any response
not_json            200, content ``I think the score is 4.``
truncated           200, valid JSON cut in the middle, ``finish_reason`` ``length``
schema_violation    200, JSON with ``score`` 7
bad_quote           200, score 3 quoting text that is not in the CoT
==================  ===========================================================================

The metric comes from ``response_format.json_schema.name`` or, failing that, from the metric
name (or a ``metric:`` hint) in the system message; the metrics are the live catalogue's, and
every answer fills the metric's own fields with the simplest values its output schema allows.
``quote_mode="first_sentence"`` answers score 3 quoting the first sentence of the fenced CoT.
``reject_json_schema`` answers any ``json_schema`` response format with the 400 OpenAI sends
for unsupported formats.
``GET /v1/models`` lists ``config.models``; ``config.fault`` applies a fault to every request
and ``config.drop_system`` ignores the system message, as some chat templates do.

A request with ``stream: true`` gets the answer as server-sent chunks (``chunk_delay_s`` apart;
usage in a last chunk when ``stream_options.include_usage``). ``serial`` answers one request at
a time, as a server with one slot does: the others wait without a byte, and one whose client
went away while it waited is counted in ``counters.abandoned``. ``llama_cpp`` emulates
llama-cpp-python 0.3 (one request at a time, too): a ``json_schema`` response format gets its
HTTP 500 with the pydantic error naming ``body.response_format.type``; ``{"type":
"json_object", "schema": {...}}`` constrains the answer to the schema; without a schema the
answer is JSON off the schema (an unconstrained small model); and a streamed answer is cut short
(``[DONE]`` without a ``finish_reason``) as soon as another request waits.
``counters.by_format`` counts the response formats asked for.

``last_prompt`` emulates a server with one slot that keeps only the prompt it read last (as
llama-cpp-python and a one-slot llama.cpp server do): it answers one request at a time, and
reads each prompt (its messages' roles and texts, counted in whitespace-separated tokens) from
the first token that differs from the previous prompt; ``counters.prompt_tokens_reused`` and
``counters.prompt_tokens_read`` count both parts. ``read_s_per_token`` makes reading cost time.

``n_ctx`` gives the fake a context window, counted crudely (a token per 4 characters of system
and user message, the count its usage reports): a longer prompt is refused as its server would
(``context_style``; default llama-cpp-python's under ``llama_cpp``, else llama-server's), and a
reply that does not fit in what the prompt leaves is cut there with ``finish_reason`` ``length``.
``llama_server``: HTTP 400 ``exceed_context_size_error`` with ``n_prompt_tokens`` and ``n_ctx``,
streamed or not, and ``GET /props`` tells ``default_generation_settings.n_ctx``;
``llama_server_event``: the same error as an event inside a 200 stream (older llama-server);
``llama_cpp_python``: unstreamed, HTTP 400 ``context_length_exceeded`` in OpenAI's words;
streamed, a 200 stream that ends before any chunk (the server's reason only in its log).
``counters.context_refused`` counts those refusals. ``refuse_stream`` answers ``stream: true``
with a 400 naming the field, as a server without streaming does.

``prompt_cache`` caches prompt prefixes by OpenAI's rules: the prompt is the response format's
schema, then each message in order (a token per 4 characters, which its usage then counts); a
prompt of at least 1,024 tokens is cached in prefixes of 1,024 tokens and every 128 more, per
model, and a later prompt that starts with one of them reports the longest as
``usage.prompt_tokens_details.cached_tokens`` (0 below 1,024 tokens).
``counters.cached_tokens`` and ``counters.prompt_tokens`` sum what its usage reported, and
``counters.prompt_cache_keys`` counts the ``prompt_cache_key`` values sent.
``refuse_prompt_cache_key`` answers a ``prompt_cache_key`` with OpenAI's 400 for an unknown
parameter.

Use ``with run_fake_judge(FakeJudgeConfig(...)) as fake:`` in tests (uvicorn in a thread), or
``python -m tests.fakes.judge_server --port P --latency-ms L`` as a separate process.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import hashlib
import importlib.util
import re
import socket
import threading
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson
import uvicorn
from faithjudge.assets.schemas import judge_output_schema, judge_output_validator, schema_path
from faithjudge_client.metric_catalogue import metric_names

__all__ = [
    "FAULTS",
    "FakeCounters",
    "FakeJudge",
    "FakeJudgeApp",
    "FakeJudgeConfig",
    "normal_reply",
    "run_fake_judge",
]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

FAULTS = (
    "rate_limit",
    "server_error",
    "unavailable",
    "hang",
    "drop",
    "not_json",
    "truncated",
    "schema_violation",
    "bad_quote",
)
_DIRECTIVE = re.compile(r"\[\[fake:([a-z_]+)(?:\*(\d+))?\]\]")
_METRIC_HINT = re.compile(r"metric:\s*([a-z_]+)", re.IGNORECASE)
_FENCE = re.compile(
    r"<<<BEGIN UNTRUSTED COT ([A-Za-z0-9_-]+)>>>\n(.*?)\n<<<END UNTRUSTED COT \1>>>", re.DOTALL
)
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)|\n")
_BAD_QUOTE = "the scan shows a fracture of the left femur"
_JSON = [(b"content-type", b"application/json")]
# OpenAI's prompt caching: prompts from 1,024 tokens, cached in 128-token steps
_CACHE_MIN_TOKENS = 1024
_CACHE_BLOCK_TOKENS = 128


@dataclass
class FakeJudgeConfig:
    """Behaviour of the fake; fields may be changed while it runs."""

    latency_s: float = 0.0
    hang_s: float = 30.0
    quote_mode: Literal["none", "first_sentence"] = "none"
    reject_json_schema: bool = False
    retry_after: str | None = "0"
    model: str | None = None
    """Model name in answers; None echoes the requested model."""
    fingerprint: str | None = "fp_fake_judge"
    max_recorded: int = 1000
    api_key: str | None = None
    """When set, a request without ``Authorization: Bearer <api_key>`` gets a 401."""
    models: tuple[str, ...] | None = None
    """When set, a request for any other model gets a 404 ``model_not_found``; ``GET /models``
    lists these (unset, it lists ``model`` or ``fake-judge``)."""
    fault: str | None = None
    """A fault for every request that names none itself (as if each carried the directive)."""
    drop_system: bool = False
    """Ignore system messages, for the metric and the prompt-token count, as a chat template
    without a system role does (llama-cpp-python's ``--chat_format gemma``)."""
    chunk_delay_s: float = 0.0
    """Time to generate each chunk of an answer: the pause between the chunks of a streamed
    one (0: the whole answer in one write); an unstreamed one comes when all are generated."""
    chunk_chars: int = 16
    """Characters of the answer per chunk."""
    serial: bool = False
    """Answer one chat request at a time; the others wait in silence."""
    llama_cpp: bool = False
    """Behave as llama-cpp-python 0.3's server (see the module docstring)."""
    n_ctx: int | None = None
    """The context window in tokens (None: unbounded); see the module docstring."""
    context_style: Literal["llama_server", "llama_server_event", "llama_cpp_python"] | None = None
    """How a prompt longer than ``n_ctx`` is refused (None: ``llama_cpp_python`` under
    ``llama_cpp``, else ``llama_server``)."""
    refuse_stream: bool = False
    """Answer ``stream: true`` with HTTP 400 naming ``stream``."""
    prompt_cache: bool = False
    """Cache prompt prefixes as OpenAI does (see the module docstring)."""
    refuse_prompt_cache_key: bool = False
    """Answer a request carrying ``prompt_cache_key`` with HTTP 400 naming it."""
    arrival_log: str | None = None
    """A file to which the wall-clock time each chat request arrived is appended, one line a
    request (a benchmark reads when a client's calls went out)."""
    last_prompt: bool = False
    """Answer one request at a time, reusing the shared prefix of the last prompt read (see the
    module docstring)."""
    read_s_per_token: float = 0.0
    """Time to read each prompt token the last prompt did not share (``last_prompt``)."""
    request_log: str | None = None
    """A file to which each chat request's key (user message hash and metric) is appended, one
    line a request, so that a test can count what processes serving one after another saw."""


@dataclass
class FakeCounters:
    """What the fake saw; read from the test thread, written by the server thread."""

    total: int = 0
    by_fault: Counter[str] = field(default_factory=Counter)
    by_key: Counter[tuple[str, str]] = field(default_factory=Counter)
    by_metric: Counter[str] = field(default_factory=Counter)
    in_flight: int = 0
    max_in_flight: int = 0
    rejected_json_schema: int = 0
    by_format: Counter[str] = field(default_factory=Counter)
    """Chat requests by response format: ``json_schema``, ``json_object+schema``,
    ``json_object``, ``none``."""
    abandoned: int = 0
    """Requests (``serial``) whose client went away before their turn came."""
    cut_short: int = 0
    """Streamed answers cut short (``llama_cpp``) because another request was waiting."""
    context_refused: int = 0
    """Prompts refused as longer than ``n_ctx``."""
    stream_refused: int = 0
    """Requests refused for ``stream: true`` (``refuse_stream``)."""
    prompt_tokens_reused: int = 0
    """Prompt tokens (``last_prompt``) shared with the prompt read before: not read again."""
    prompt_tokens_read: int = 0
    """Prompt tokens (``last_prompt``) read: those after the prefix shared with the last one."""
    prompt_tokens: int = 0
    """Prompt tokens the answers' usage reported."""
    cached_tokens: int = 0
    """Of those, the tokens reported as served from the prompt cache (``prompt_cache``)."""
    prompt_cache_keys: Counter[str] = field(default_factory=Counter)
    """Chat requests by the ``prompt_cache_key`` they carried."""
    cache_key_refused: int = 0
    """Requests refused for their ``prompt_cache_key`` (``refuse_prompt_cache_key``)."""

    @property
    def reused_share(self) -> float:
        """The share of prompt tokens (``last_prompt``) that were reused, not read."""
        total = self.prompt_tokens_reused + self.prompt_tokens_read
        return self.prompt_tokens_reused / total if total else 0.0

    def reset(self) -> None:
        self.total = self.in_flight = self.max_in_flight = self.rejected_json_schema = 0
        self.prompt_tokens_reused = self.prompt_tokens_read = 0
        self.abandoned = self.cut_short = self.context_refused = self.stream_refused = 0
        self.prompt_tokens = self.cached_tokens = self.cache_key_refused = 0
        self.prompt_cache_keys.clear()
        self.by_fault.clear()
        self.by_key.clear()
        self.by_metric.clear()
        self.by_format.clear()


# What a middle score with a quote says besides (the other fields keep the schema's simplest
# value: no omission, no influence, not confident).
_QUOTED: dict[str, dict[str, Any]] = {
    "causal_attribution": {"did_acknowledge": True},
    "confidence_tone": {"confidence_level": "neutral"},
}


def normal_reply(metric: str, quote: tuple[str, int, int] | None = None) -> dict[str, Any]:
    """A reply that passes the strict schema: score 1, or 3 with ``quote`` (text, start, end)."""
    reply: dict[str, Any] = {
        "abstain": False,
        "abstain_reason": None,
        "score": 1,
        "quotes": [],
        "quote_spans": [],
        "rationale": "Nothing in the reasoning supports a higher score.",
    }
    if quote is not None:
        text, start, end = quote
        reply.update(
            score=3,
            quotes=[text],
            quote_spans=[[start, end]],
            rationale="Quote [0] supports a middle score.",
        )
        reply.update(_QUOTED.get(metric, {}))
    return {**_other_fields(metric, str(schema_path(metric)), quote is not None), **reply}


@functools.cache
def _other_fields(metric: str, _schema_file: str, quoted: bool) -> dict[str, Any]:
    """The simplest value the output schema of ``metric`` allows for each field besides the
    common ones (checked once per schema file, with a common part like the real one).

    Raises:
        ValueError: the schema refuses them (a rule the simple values cannot meet), naming
            the metric.
    """
    schema = judge_output_schema(metric)
    fields = {name: _simplest(spec) for name, spec in schema.get("properties", {}).items()}
    sample = dict(fields, abstain=False, abstain_reason=None, score=1, quotes=[],
                  quote_spans=[], rationale="r")  # fmt: skip
    if quoted:
        sample.update(score=3, quotes=["q"], quote_spans=[[0, 1]], **_QUOTED.get(metric, {}))
    errors = [e.message for e in judge_output_validator(metric).iter_errors(sample)]
    if errors:
        raise ValueError(f"the fake judge cannot answer metric {metric!r}: {errors[:3]}")
    return fields


def _simplest(spec: dict[str, Any]) -> Any:
    if "const" in spec:
        return spec["const"]
    enum = [v for v in spec.get("enum", []) if v is not None]
    if enum:
        return enum[0]
    types = spec.get("type", "null")
    kinds = [types] if isinstance(types, str) else list(types)
    kind = next((k for k in kinds if k != "null"), "null")
    if kind == "boolean":
        return False
    if kind in ("integer", "number"):
        return spec.get("minimum", 0)
    if kind == "string":
        return "x" * int(spec.get("minLength", 0))
    if kind == "array":
        return []
    if kind == "object":
        return {}
    return None


def _metric_words() -> re.Pattern[str]:
    """The catalogue's metric names, with a space or an underscore between words."""
    names = sorted(metric_names(), key=len, reverse=True)
    return re.compile("|".join(n.replace("_", "[_ ]") for n in names), re.IGNORECASE)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _first_sentence(user: str) -> tuple[str, int, int] | None:
    fence = _FENCE.search(user)
    if fence is None:
        return None
    cot = fence.group(2)
    end = _SENTENCE_END.search(cot)
    # A sentence ends after its punctuation, or before a line break.
    stop = len(cot) if end is None else end.start() if end.group() == "\n" else end.end()
    sentence = cot[:stop]
    start = len(sentence) - len(sentence.lstrip())
    sentence = sentence.strip()
    return (sentence, start, start + len(sentence)) if sentence else None


class FakeJudgeApp:
    """The raw ASGI application (kept lean: the fake must outrun the client under test)."""

    def __init__(self, config: FakeJudgeConfig | None = None) -> None:
        self.config = config or FakeJudgeConfig()
        self.counters = FakeCounters()
        self.requests: deque[dict[str, Any]] = deque(maxlen=self.config.max_recorded)
        self._ids = 0
        self._turn: asyncio.Lock | None = None  # the one slot of a serial server
        self._last_prompt: list[str] = []  # the tokens the slot holds (``last_prompt``)
        self._waiting = 0
        self._prefixes: set[bytes] = set()  # the prompt cache (``prompt_cache``)

    def reset(self) -> None:
        self.counters.reset()
        self.requests.clear()
        self._prefixes.clear()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        chunks = []
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        if scope["path"] == "/props" and scope["method"] == "GET":
            if self.config.n_ctx is None or self._context_style().startswith("llama_cpp"):
                return await _respond(send, 404, _error("not found", "invalid_request_error"))
            settings = {"n_ctx": self.config.n_ctx}
            return await _respond(send, 200, {"default_generation_settings": settings,
                                              "total_slots": 1})  # fmt: skip
        if scope["path"].endswith("/models") and scope["method"] == "GET":
            key = self.config.api_key
            if key is not None and dict(scope["headers"]).get(b"authorization") != (
                f"Bearer {key}".encode()
            ):
                return await _respond(send, 401, _error("Incorrect API key provided", "auth"))
            listed = self.config.models or (self.config.model or "fake-judge",)
            data = [{"id": name, "object": "model", "owned_by": "fake"} for name in listed]
            return await _respond(send, 200, {"object": "list", "data": data})
        if not scope["path"].endswith("/chat/completions") or scope["method"] != "POST":
            return await _respond(send, 404, _error("not found", "invalid_request_error"))
        content_type = dict(scope["headers"]).get(b"content-type", b"")
        if not content_type.startswith(b"application/json"):
            return await _respond(send, 415, _error("send JSON", "invalid_request_error"))
        config, counters = self.config, self.counters
        counters.total += 1
        if config.arrival_log is not None:
            _append(config.arrival_log, f"{time.time():.6f}\n")
        if config.api_key is not None:
            given = dict(scope["headers"]).get(b"authorization", b"")
            if given != f"Bearer {config.api_key}".encode():
                error = _error("Incorrect API key provided", "invalid_request_error")
                return await _respond(send, 401, error)
        counters.in_flight += 1
        counters.max_in_flight = max(counters.max_in_flight, counters.in_flight)
        try:
            if config.serial or config.llama_cpp or config.last_prompt:
                await self._in_turn(b"".join(chunks), receive, send)
            else:
                await self._complete(b"".join(chunks), receive, send)
        finally:
            counters.in_flight -= 1

    async def _in_turn(self, raw: bytes, receive: Receive, send: Send) -> None:
        """Wait for the one slot in silence, then answer; a request whose client went away
        meanwhile is counted and dropped."""
        if self._turn is None:
            self._turn = asyncio.Lock()
        gone = asyncio.Event()

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            gone.set()

        watcher = asyncio.ensure_future(watch())
        self._waiting += 1
        try:
            async with self._turn:
                self._waiting -= 1
                watcher.cancel()
                if gone.is_set():
                    self.counters.abandoned += 1
                    return
                await self._complete(raw, receive, send)
        except BaseException:
            if not watcher.done():
                watcher.cancel()
            raise

    async def _complete(self, raw: bytes, receive: Receive, send: Send) -> None:
        config, counters = self.config, self.counters
        try:
            body = orjson.loads(raw)
            messages = body["messages"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            return await _respond(send, 400, _error("body is not a chat request", "invalid_json"))
        self.requests.append(body)
        if config.models is not None and body.get("model") not in config.models:
            message = f"The model `{body.get('model')}` does not exist"
            return await _respond(send, 404, _error(message, "invalid_request_error",
                                                    code="model_not_found"))  # fmt: skip
        if config.latency_s > 0:
            await asyncio.sleep(config.latency_s)

        response_format = body.get("response_format") or {}
        asked_in = _format_label(response_format)
        counters.by_format[asked_in] += 1
        if config.llama_cpp and asked_in == "json_schema":
            counters.rejected_json_schema += 1
            return await _respond(send, 500, _error(_LLAMA_CPP_REFUSAL, "internal_server_error"))
        if config.reject_json_schema and response_format.get("type") == "json_schema":
            counters.rejected_json_schema += 1
            message = "Invalid parameter: 'response_format' of type 'json_schema' is not supported"
            error = _error(message, "invalid_request_error", param="response_format")
            return await _respond(send, 400, error)
        cache_key = body.get("prompt_cache_key")
        if isinstance(cache_key, str):
            if config.refuse_prompt_cache_key:
                counters.cache_key_refused += 1
                message = "Unrecognized request argument supplied: prompt_cache_key"
                error = _error(message, "invalid_request_error", param="prompt_cache_key")
                return await _respond(send, 400, error)
            counters.prompt_cache_keys[cache_key] += 1
        if config.refuse_stream and body.get("stream"):
            counters.stream_refused += 1
            error = _error("stream=true is not supported", "invalid_request_error", param="stream")
            return await _respond(send, 400, error)

        system = "\n".join(_text_of(m.get("content")) for m in messages if m["role"] == "system")
        if config.drop_system:
            system = ""
        user = "\n".join(_text_of(m.get("content")) for m in messages if m["role"] == "user")
        prompt_tokens = (len(system) + len(user)) // 4
        cached_tokens = 0
        if config.prompt_cache:
            prompt_tokens, cached_tokens = self._prompt_cache(body, response_format, messages)
        if config.n_ctx is not None and prompt_tokens >= config.n_ctx:
            counters.context_refused += 1
            return await self._refuse_context(send, body, prompt_tokens)
        if config.last_prompt:
            await self._read_prompt(messages)
        metric = _metric_of(response_format, system, user)
        if metric is None:
            return await _respond(send, 400, _error("cannot tell the metric", "invalid_request"))
        counters.by_metric[metric] += 1
        key = (hashlib.sha1(user.encode()).hexdigest(), metric)
        counters.by_key[key] += 1
        attempt = counters.by_key[key]
        if config.request_log is not None:
            _append(config.request_log, f"{key[0]} {metric}\n")

        fault = config.fault
        directive = _DIRECTIVE.search(user)
        if directive is not None:
            fault = None
            limit = directive.group(2)
            if limit is None or attempt <= int(limit):
                fault = directive.group(1)
        if fault is not None:
            if fault not in FAULTS:
                return await _respond(send, 400, _error(f"unknown fault {fault}", "invalid"))
            counters.by_fault[fault] += 1
            if fault == "rate_limit":
                headers = (
                    [(b"retry-after", config.retry_after.encode())] if config.retry_after else []
                )
                error = _error("Rate limit reached (fake)", "requests", code="rate_limit_exceeded")
                return await _respond(send, 429, error, headers)
            if fault in ("server_error", "unavailable"):
                status = 500 if fault == "server_error" else 503
                return await _respond(send, status, _error(f"fake {fault}", "server_error"))
            if fault == "drop":
                return await _abort(receive, send)
            if fault == "hang" and await _wait_for_disconnect(receive, config.hang_s):
                return None

        quote = _first_sentence(user) if config.quote_mode == "first_sentence" else None
        reply = normal_reply(metric, quote)
        finish = "stop"
        if fault == "schema_violation":
            reply["score"] = 7
        elif fault == "bad_quote":
            reply.update(score=3, quotes=[_BAD_QUOTE], quote_spans=[[0, len(_BAD_QUOTE)]])
        if config.llama_cpp and asked_in != "json_object+schema":
            # nothing constrains a small model to the schema: JSON, but not of its shape
            reply = {"score": 3, "reason": "The reasoning looks fine."}
        content = orjson.dumps(reply).decode()
        if fault == "not_json":
            content = "I think the score is 4."
        elif fault == "truncated":
            content, finish = content[: len(content) // 2], "length"
        self._ids += 1
        completion_tokens = max(1, len(content) // 4)
        if finish == "length":  # a server stops at the limit it was given, and counts it so
            limit = body.get("max_tokens") or body.get("max_completion_tokens")
            completion_tokens = limit if isinstance(limit, int) else completion_tokens
        if config.n_ctx is not None and prompt_tokens + completion_tokens > config.n_ctx:
            # the context holds the reply too: it stops where the window is full
            completion_tokens = config.n_ctx - prompt_tokens
            content, finish = content[: 4 * completion_tokens], "length"
        answer = {
            "id": f"chatcmpl-fake-{self._ids}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": config.model or body.get("model", "fake-judge"),
            "system_fingerprint": config.fingerprint,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": finish,
                    "logprobs": None,
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
        if config.prompt_cache:
            answer["usage"]["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
        counters.prompt_tokens += prompt_tokens
        counters.cached_tokens += cached_tokens
        if body.get("stream"):
            options = body.get("stream_options") or {}
            return await self._stream(send, answer, bool(options.get("include_usage")))
        if config.chunk_delay_s > 0:  # no byte before the whole answer is generated
            chunks = -(-len(content) // max(1, config.chunk_chars))
            await asyncio.sleep(config.chunk_delay_s * chunks)
        await _respond(send, 200, answer)

    def _prompt_cache(
        self, body: dict[str, Any], response_format: dict[str, Any], messages: list[Any]
    ) -> tuple[int, int]:
        """(prompt tokens, cached tokens) of a request, by OpenAI's rules: prefixes of 1,024
        tokens and every 128 more are cached, per model; the longest already cached is
        reported (a token is 4 characters here)."""
        text = orjson.dumps(response_format, option=orjson.OPT_SORT_KEYS).decode()
        text += "".join(f"\n{m.get('role')}\n{_text_of(m.get('content'))}" for m in messages)
        tokens = len(text) // 4
        digest = hashlib.sha256(str(body.get("model")).encode() + b"\0")
        start, cached = 0, 0
        seen: list[bytes] = []
        for size in range(_CACHE_MIN_TOKENS, tokens + 1, _CACHE_BLOCK_TOKENS):
            digest.update(text[start : 4 * size].encode("utf-8", "surrogatepass"))
            start = 4 * size
            prefix = digest.copy().digest()
            if prefix in self._prefixes:
                cached = size
            seen.append(prefix)
        self._prefixes.update(seen)
        return tokens, cached

    async def _read_prompt(self, messages: list[Any]) -> None:
        """Read the prompt from the first token it does not share with the last one."""
        text = " ".join(f"{m.get('role')}: {_text_of(m.get('content'))}" for m in messages)
        tokens = text.split()
        shared = 0
        for mine, last in zip(tokens, self._last_prompt, strict=False):
            if mine != last:
                break
            shared += 1
        self._last_prompt = tokens
        self.counters.prompt_tokens_reused += shared
        self.counters.prompt_tokens_read += len(tokens) - shared
        if self.config.read_s_per_token > 0:
            await asyncio.sleep(self.config.read_s_per_token * (len(tokens) - shared))

    def _context_style(self) -> str:
        if self.config.context_style is not None:
            return self.config.context_style
        return "llama_cpp_python" if self.config.llama_cpp else "llama_server"

    async def _refuse_context(self, send: Send, body: dict[str, Any], prompt_tokens: int) -> None:
        """A prompt longer than ``n_ctx``, refused in the words of ``context_style``."""
        n_ctx, style = self.config.n_ctx, self._context_style()
        streamed = bool(body.get("stream"))
        if style == "llama_cpp_python":
            if streamed:  # llama-cpp-python logs "Requested tokens (P) exceed context window
                # of N" and ends the stream before its first chunk
                events = [(b"content-type", b"text/event-stream")]
                await send({"type": "http.response.start", "status": 200, "headers": events})
                return await send({"type": "http.response.body", "body": b""})
            limit = body.get("max_tokens") or body.get("max_completion_tokens") or 0
            message = (
                f"This model's maximum context length is {n_ctx} tokens. However, you requested "
                f"{prompt_tokens + limit} tokens ({prompt_tokens} in the messages, {limit} in the "
                "completion). Please reduce the length of the messages or completion."
            )
            error = _error(message, "invalid_request_error", param="messages",
                           code="context_length_exceeded")  # fmt: skip
            return await _respond(send, 400, error)
        refusal = {"error": {"code": 400, "message": "the request exceeds the available context "
                             "size, try increasing it", "type": "exceed_context_size_error",
                             "n_prompt_tokens": prompt_tokens, "n_ctx": n_ctx}}  # fmt: skip
        if streamed and style == "llama_server_event":
            events = [(b"content-type", b"text/event-stream")]
            await send({"type": "http.response.start", "status": 200, "headers": events})
            data = b"data: " + orjson.dumps(refusal) + b"\n\n"
            return await send({"type": "http.response.body", "body": data})
        return await _respond(send, 400, refusal)

    async def _stream(self, send: Send, answer: dict[str, Any], include_usage: bool) -> None:
        """``answer`` as chat-completion chunks, ``config.chunk_delay_s`` apart."""
        config = self.config
        choice = answer["choices"][0]
        content, finish = choice["message"]["content"], choice["finish_reason"]
        head = {k: answer[k] for k in ("id", "created", "model", "system_fingerprint")}
        head["object"] = "chat.completion.chunk"

        def event(delta: dict[str, Any], finish_reason: str | None) -> bytes:
            chunk = {**head, "choices": [{"index": 0, "delta": delta,
                                          "finish_reason": finish_reason}]}  # fmt: skip
            return b"data: " + orjson.dumps(chunk) + b"\n\n"

        size = max(1, config.chunk_chars)
        pieces = [content[i : i + size] for i in range(0, len(content), size)] or [""]
        events = [event({"role": "assistant", "content": pieces[0]}, None)]
        events += [event({"content": piece}, None) for piece in pieces[1:]]
        events.append(event({}, finish))
        if include_usage and not config.llama_cpp:  # llama-cpp-python sends no usage chunk
            usage = {**head, "choices": [], "usage": answer["usage"]}
            events.append(b"data: " + orjson.dumps(usage) + b"\n\n")
        events.append(b"data: [DONE]\n\n")
        headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        if config.chunk_delay_s <= 0 and not config.llama_cpp:
            await send({"type": "http.response.body", "body": b"".join(events)})
            return
        for number, data in enumerate(events):
            if config.llama_cpp and number > 0 and self._waiting > 0 and data is not events[-1]:
                # llama-cpp-python's interrupt_requests: a waiting request ends this stream
                self.counters.cut_short += 1
                await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})
                return
            await send({"type": "http.response.body", "body": data, "more_body": True})
            if config.chunk_delay_s > 0:
                await asyncio.sleep(config.chunk_delay_s)
        await send({"type": "http.response.body", "body": b""})


def _metric_of(response_format: dict[str, Any], system: str, user: str) -> str | None:
    known = metric_names()
    name = (response_format.get("json_schema") or {}).get("name")
    if name in known:
        return str(name)
    words = _metric_words()
    for text in (system, user):
        hint = _METRIC_HINT.search(text)
        if hint is not None and hint.group(1).lower() in known:
            return hint.group(1).lower()
        word = words.search(text)
        if word is not None:
            return word.group().lower().replace(" ", "_")
    return None


# What llama-cpp-python 0.3 answers a ``json_schema`` response format with: FastAPI's validation
# error, turned into an internal server error by its route handler.
_LLAMA_CPP_REFUSAL = (
    "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', "
    "'type'), 'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema', 'ctx': "
    "{'expected': \"'text' or 'json_object'\"}}\n\n  File \"llama_cpp/server/app.py\", line "
    "376, in create_chat_completion\n    POST /v1/chat/completions"
)


def _append(path: str, text: str) -> None:
    # one short line a request: writing it in the loop costs less than a thread hop
    with open(path, "a", encoding="utf-8") as log:
        log.write(text)


def _format_label(response_format: dict[str, Any]) -> str:
    kind = response_format.get("type")
    if kind == "json_object" and isinstance(response_format.get("schema"), dict):
        return "json_object+schema"
    return str(kind) if kind else "none"


def _error(message: str, kind: str, *, param: str | None = None, code: str | None = None) -> Any:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


async def _respond(
    send: Send, status: int, payload: Any, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = orjson.dumps(payload)
    all_headers = [*_JSON, (b"content-length", str(len(body)).encode()), *(headers or [])]
    await send({"type": "http.response.start", "status": status, "headers": all_headers})
    await send({"type": "http.response.body", "body": body})


async def _wait_for_disconnect(receive: Receive, seconds: float) -> bool:
    """Wait up to ``seconds`` for the client to go away; True when it did."""
    try:
        async with asyncio.timeout(seconds):
            while (await receive())["type"] != "http.disconnect":
                pass
    except TimeoutError:
        return False
    return True


async def _abort(receive: Receive, send: Send) -> None:
    """Close the connection with no response at all (the client sees a connection error)."""
    transport = getattr(getattr(send, "__self__", None), "transport", None)
    if transport is None:  # not uvicorn's protocol: half a response, then an exception
        await send({"type": "http.response.start", "status": 200, "headers": _JSON})
        raise ConnectionAbortedError("fake drop")
    transport.abort()
    # Let uvicorn notice the lost connection, so it does not try to send a 500 on it.
    await _wait_for_disconnect(receive, 5.0)


@dataclass
class FakeJudge:
    """Handle on a running fake: where it listens and what it saw."""

    app: FakeJudgeApp
    host: str
    port: int

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    @property
    def config(self) -> FakeJudgeConfig:
        return self.app.config

    @property
    def counters(self) -> FakeCounters:
        return self.app.counters

    @property
    def requests(self) -> list[dict[str, Any]]:
        return list(self.app.requests)

    def reset(self) -> None:
        self.app.reset()


def _server(app: Any) -> uvicorn.Server:
    config = uvicorn.Config(
        app,
        loop="auto",  # uvloop when installed: the fake must not be the bottleneck
        http="httptools" if importlib.util.find_spec("httptools") else "h11",
        lifespan="off",
        log_level="warning",
        log_config=None,
        access_log=False,
        proxy_headers=False,
        server_header=False,
        date_header=False,
        backlog=4096,
        timeout_graceful_shutdown=2,
    )
    return uvicorn.Server(config)


def _listen(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(4096)
    sock.set_inheritable(True)
    return sock


@contextmanager
def serving(app: Any, *, host: str, port: int, name: str) -> Iterator[int]:
    """Serve the ASGI ``app`` from a background thread for the block; yields the bound port."""
    sock = _listen(host, port)
    server = _server(app)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            sock.close()
            raise RuntimeError(f"the {name} did not start")
        time.sleep(0.005)
    try:
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


@contextmanager
def run_fake_judge(
    config: FakeJudgeConfig | None = None, *, host: str = "127.0.0.1", port: int = 0
) -> Iterator[FakeJudge]:
    """Serve a fake judge from a background thread for the duration of the block."""
    app = FakeJudgeApp(config)
    for metric in metric_names():
        # derive each answer's fields before serving: done on a first request, loading and
        # compiling the schemas takes longer than the short timeouts tests give their clients
        with contextlib.suppress(ValueError):  # a metric it cannot answer says so when asked
            normal_reply(metric)
    with serving(app, host=host, port=port, name="fake judge server") as bound:
        yield FakeJudge(app=app, host=host, port=bound)


def main(argv: list[str] | None = None) -> None:
    """Run the fake as a process (for benchmarks): prints its base URL, serves until killed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--hang-s", type=float, default=30.0)
    parser.add_argument("--quote-mode", choices=("none", "first_sentence"), default="none")
    parser.add_argument("--reject-json-schema", action="store_true")
    parser.add_argument("--request-log", default=None, help="append each chat request's key")
    parser.add_argument("--arrival-log", default=None, help="append each chat request's time")
    parser.add_argument("--last-prompt", action="store_true", help="one slot, last prompt kept")
    parser.add_argument("--read-ms-per-token", type=float, default=0.0)
    args = parser.parse_args(argv)
    config = FakeJudgeConfig(
        latency_s=args.latency_ms / 1000,
        hang_s=args.hang_s,
        quote_mode=args.quote_mode,
        reject_json_schema=args.reject_json_schema,
        request_log=args.request_log,
        arrival_log=args.arrival_log,
        last_prompt=args.last_prompt,
        read_s_per_token=args.read_ms_per_token / 1000,
    )
    app = FakeJudgeApp(config)
    sock = _listen(args.host, args.port)
    print(f"http://{args.host}:{sock.getsockname()[1]}/v1", flush=True)
    _server(app).run(sockets=[sock])


if __name__ == "__main__":
    main()
