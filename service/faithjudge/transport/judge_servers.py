"""What this process learnt about each judge server: the response format it takes, whether its
replies are slow enough to stream, and whether it sits on this machine or network.

Response formats, in the order they are tried (``auto``):

======================  =====================================================================
``json_schema``         ``{"type": "json_schema", "json_schema": {name, schema, strict}}``:
                        OpenAI, Azure, vLLM, SGLang, Ollama constrain the reply to the schema
``json_object+schema``  ``{"type": "json_object", "schema": {...}}``: what llama.cpp's server
                        and llama-cpp-python read to constrain the reply to the schema
``json_object``         ``{"type": "json_object"}``: any JSON object
``none``                no ``response_format``: the prompt alone asks for JSON
======================  =====================================================================

A server that does not take a format says so in its answer: OpenAI-style servers answer 400
with ``param: response_format``, FastAPI-based ones 422 with a validation error whose location
names ``response_format``, and llama-cpp-python 500 with that same validation error as its
message (``refuses_response_format``). The next format is then used for every later call to
that server (base URL and model) in the process: ``ServerMemo`` is the small shared memo that
remembers it, so a run learns it once, not once per call. Whatever the format, every reply is
still verified against the full schema.

Streaming is learnt the same way: a server that refuses ``stream: true`` (400 or 422 whose error
names ``stream``: ``refuses_stream``) is asked unstreamed from then on. So is OpenAI's
``prompt_cache_key`` (a hint that routes calls sharing a prompt prefix to the same cache): a
server that refuses it (400, 422 or 500 whose error names it: ``refuses_prompt_cache_key``) is
asked without it from then on.

A prompt longer than the server's context window is refused in words that differ by server
(``context_overflow`` reads them all): llama.cpp's ``llama-server`` answers 400 with
``{"type": "exceed_context_size_error", "n_prompt_tokens": P, "n_ctx": N}``; llama-cpp-python
answers 400 with ``code: context_length_exceeded`` and OpenAI's wording ("This model's maximum
context length is N tokens. However, you requested T tokens (P in the messages, C in the
completion)"), logs ``Requested tokens (P) exceed context window of N`` (the text of the
``ValueError`` behind it, which other wrappers pass on as a 500), and may end a streamed reply
without a word; vLLM uses OpenAI's wording. The memo keeps the context size once a server has
told it.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args
from urllib.parse import urlsplit

__all__ = [
    "CONTEXT_SETTING",
    "RESPONSE_FORMATS",
    "ContextOverflow",
    "ResponseFormat",
    "ResponseFormatSetting",
    "ServerMemo",
    "context_overflow",
    "forget_servers",
    "grammar_schema",
    "is_local_server",
    "refuses_prompt_cache_key",
    "refuses_response_format",
    "refuses_stream",
    "response_format_body",
    "server_memo",
    "server_message",
    "status_of",
]

ResponseFormat = Literal["json_schema", "json_object+schema", "json_object", "none"]
ResponseFormatSetting = Literal["auto", "json_schema", "json_object+schema", "json_object", "none"]
RESPONSE_FORMATS: tuple[ResponseFormat, ...] = get_args(ResponseFormat)
"""Every format, in the order ``auto`` tries them."""

# The statuses a refusal of a request field comes with: 400 (OpenAI), 422 (FastAPI's validation
# error), 500 (llama-cpp-python wraps that validation error in an internal server error).
_REFUSAL_STATUSES = (400, 422, 500)


def response_format_body(
    mode: str, *, name: str, schema: Mapping[str, Any]
) -> dict[str, Any] | None:
    """The ``response_format`` body field of ``mode`` (None: send none).

    The schema is embedded as given (possibly a read-only mapping): encode it with a ``default``
    hook for mappings (``faithjudge.transport.chat.json_default``).
    """
    if mode == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": {"name": name, "schema": schema, "strict": True},
        }
    if mode == "json_object+schema":
        return {"type": "json_object", "schema": grammar_schema(schema)}
    if mode == "json_object":
        return {"type": "json_object"}
    if mode == "none":
        return None
    raise ValueError(f"unknown response format {mode!r}: use one of {', '.join(RESPONSE_FORMATS)}")


_GRAMMAR_SCHEMAS: dict[int, tuple[Mapping[str, Any], Any]] = {}


def grammar_schema(schema: Mapping[str, Any]) -> Any:
    """``schema`` as llama.cpp's grammar builder reads it, with each closed set of values
    written as an ``enum`` alone.

    The builder turns a list-valued ``type`` into "any value of these types" before it looks at
    ``enum``, and ignores ``minimum``/``maximum``: ``{"type": ["string", "null"], "enum": [...,
    null]}`` let a small model write any string (seen: ``abstain_reason: "empty"``) and a score
    of any size, so the reply failed the schema check. Here an enum drops the list of types
    beside it (the enum names every value they allow), and a nullable or plain integer bounded
    on both sides by a few values becomes the enum of those values: the reply is constrained to
    what the published schema accepts. Converted once per schema object.
    """
    known = _GRAMMAR_SCHEMAS.get(id(schema))
    if known is not None and known[0] is schema:
        return known[1]
    converted = _closed_sets_as_enums(schema)
    _GRAMMAR_SCHEMAS[id(schema)] = (schema, converted)
    return converted


_BOUNDS = frozenset({"type", "minimum", "maximum"})
_MAX_ENUMERATED = 20


def _closed_sets_as_enums(node: Any) -> Any:
    if isinstance(node, list | tuple):
        return [_closed_sets_as_enums(v) for v in node]
    if not isinstance(node, Mapping):
        return node
    out = {k: _closed_sets_as_enums(v) for k, v in node.items()}
    types = node.get("type")
    if "enum" in node and isinstance(types, list | tuple):
        del out["type"]
    elif "enum" not in node and _bounded_integer(node):
        low, high = int(node["minimum"]), int(node["maximum"])
        values: list[int | None] = list(range(low, high + 1))
        if isinstance(types, list | tuple) and "null" in types:
            values.append(None)
        out = {k: v for k, v in out.items() if k not in _BOUNDS}
        out["enum"] = values
    return out


def _bounded_integer(node: Mapping[str, Any]) -> bool:
    types = node.get("type")
    kinds = set(types) if isinstance(types, list | tuple) else {types}
    low, high = node.get("minimum"), node.get("maximum")
    return (
        kinds in ({"integer"}, {"integer", "null"})
        and isinstance(low, int)
        and isinstance(high, int)
        and 0 <= high - low < _MAX_ENUMERATED
    )


def status_of(exc: BaseException) -> int | None:
    """The HTTP status an SDK exception carries (OpenAI's and LiteLLM's: ``status_code``)."""
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) and not isinstance(status, bool) else None


def _error_object(exc: BaseException) -> Any:
    """The error document of a failed call: the SDK's parsed ``body`` (``{"error": {...}}`` or
    the inner object), or its text."""
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        return inner if inner is not None else body
    if isinstance(body, str | bytes):
        return body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    return None


def server_message(exc: BaseException, limit: int = 300) -> str | None:
    """The server's own words about a failed call (its error ``message``, or its body), on one
    line and at most ``limit`` characters; None when the server said nothing."""
    error = _error_object(exc)
    text: Any = None
    if isinstance(error, Mapping):
        text = error.get("message") or error.get("detail") or error.get("error")
        if text is None and error:
            text = error
    elif isinstance(error, str):
        text = error
    if text is None:
        text = getattr(exc, "message", None)
    if text is None or text == "":
        return None
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def refuses_response_format(exc: BaseException) -> bool:
    """The server refused the request because of its ``response_format``: a 400, 422 or 500
    whose error names ``response_format`` (a ``param``/``code`` field, or the location of a
    validation error in its message)."""
    if status_of(exc) not in _REFUSAL_STATUSES:
        return False
    for field_name in ("param", "code"):
        value = getattr(exc, field_name, None)
        if isinstance(value, str) and "response_format" in value.lower():
            return True
    error = _error_object(exc)
    if isinstance(error, Mapping):
        for field_name in ("param", "code", "message", "detail"):
            value = error.get(field_name)
            if value is not None and "response_format" in str(value).lower():
                return True
        return False
    if error is None:  # LiteLLM's errors carry the provider's answer as their message
        error = getattr(exc, "message", None)
    return isinstance(error, str) and "response_format" in error.lower()


def _error_texts(exc: BaseException) -> list[str]:
    """Every piece of text a failed call carries: its error object's fields and the SDK's
    message (LiteLLM keeps the provider's answer there)."""
    texts: list[str] = []
    error = _error_object(exc)
    if isinstance(error, Mapping):
        texts += [str(error.get(k)) for k in ("param", "code", "type", "message", "detail")
                  if error.get(k) is not None]  # fmt: skip
    elif isinstance(error, str):
        texts.append(error)
    for field_name in ("param", "code", "message"):
        value = getattr(exc, field_name, None)
        if isinstance(value, str):
            texts.append(value)
    return texts


_STREAM_WORD = re.compile(r"\bstream(?:_options)?\b", re.IGNORECASE)
# The statuses of a refused request field that is not the server's fault (a 500 is: it is the
# server failing, not refusing, unless it names the field; see ``refuses_response_format``).
_STREAM_REFUSALS = (400, 422)


def refuses_stream(exc: BaseException) -> bool:
    """The server refused ``stream: true`` (or its ``stream_options``): a 400 or 422 whose
    error names the field (its ``param``, the location of a validation error, its message)."""
    if status_of(exc) not in _STREAM_REFUSALS or refuses_response_format(exc):
        return False
    return any(_STREAM_WORD.search(text) for text in _error_texts(exc))


def refuses_prompt_cache_key(exc: BaseException) -> bool:
    """The server refused the request because of its ``prompt_cache_key``: a 400, 422 or 500
    whose error names the field (OpenAI's ``param``, a validation error's location, LiteLLM's
    unsupported-parameter message)."""
    if status_of(exc) not in _REFUSAL_STATUSES:
        return False
    return any("prompt_cache_key" in text.lower() for text in _error_texts(exc))


CONTEXT_SETTING = (
    "the server's context size: llama-server -c/--ctx-size (divided among its --parallel "
    "slots), llama-cpp-python --n_ctx, vLLM --max-model-len, Ollama OLLAMA_CONTEXT_LENGTH"
)
"""Where a judge server's context window is set, for messages that point the user at it."""


@dataclass(frozen=True, slots=True)
class ContextOverflow:
    """A prompt the server refused as longer than its context window, with the sizes it said
    (None where it said nothing)."""

    prompt_tokens: int | None
    n_ctx: int | None
    said: str | None

    def describe(self) -> str:
        """The refusal in words that name the sizes and the setting to change."""
        if self.prompt_tokens is not None and self.n_ctx is not None:
            sizes = (f"the prompt is {self.prompt_tokens:,} tokens, the server's context "
                     f"window {self.n_ctx:,}")  # fmt: skip
        elif self.n_ctx is not None:
            sizes = f"the server's context window is {self.n_ctx:,} tokens"
        elif self.prompt_tokens is not None:
            sizes = f"the prompt is {self.prompt_tokens:,} tokens"
        else:
            sizes = "the server did not say the sizes"
        prompt, window = self.prompt_tokens, self.n_ctx
        if prompt is not None and window is not None and prompt < window:
            # vLLM refuses a prompt that leaves less room than the token limit asks for
            return (
                f"the prompt ({prompt:,} tokens) and the reply's token limit do not fit "
                f"together in the judge server's context window ({window:,}): lower "
                f"FAITHJUDGE_MAX_TOKENS below {window - prompt:,} or raise {CONTEXT_SETTING}"
            )
        return (
            f"the prompt does not fit the judge server's context window ({sizes}; the reply "
            f"needs room too): raise {CONTEXT_SETTING}; FAITHJUDGE_MAX_TOKENS cannot help"
        )


# llama-cpp-python's ValueError, as its log and a wrapping 500 show it
_REQUESTED = re.compile(r"Requested tokens \((\d+)\) exceed context window of (\d+)")
# OpenAI's wording, which llama-cpp-python and vLLM copy
_MAXIMUM = re.compile(r"maximum context length is (\d+) tokens", re.IGNORECASE)
_IN_MESSAGES = re.compile(r"\((\d+) in the messages", re.IGNORECASE)
_INPUT_TOKENS = re.compile(r"your request has (\d+) input tokens", re.IGNORECASE)
_CONTEXT_WORDS = re.compile(
    r"exceeds? (?:the )?(?:available )?context|context[_ ]length[_ ]exceeded|"
    r"context window|maximum context length",
    re.IGNORECASE,
)


def _as_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def context_overflow(exc: BaseException) -> ContextOverflow | None:
    """The server refused the call because the prompt does not fit its context window (see the
    module docstring for each server's words), or None for any other failure."""
    error = _error_object(exc)
    said = server_message(exc)
    if isinstance(error, Mapping) and error.get("type") == "exceed_context_size_error":
        return ContextOverflow(
            _as_int(error.get("n_prompt_tokens")), _as_int(error.get("n_ctx")), said
        )
    texts = _error_texts(exc)
    joined = " ".join(texts)
    requested = _REQUESTED.search(joined)
    if requested is not None:
        return ContextOverflow(int(requested.group(1)), int(requested.group(2)), said)
    if not any(_CONTEXT_WORDS.search(text) for text in texts):
        return None
    if status_of(exc) not in (None, *_REFUSAL_STATUSES):
        return None
    maximum = _MAXIMUM.search(joined)
    prompt = _IN_MESSAGES.search(joined) or _INPUT_TOKENS.search(joined)
    return ContextOverflow(
        int(prompt.group(1)) if prompt else None, int(maximum.group(1)) if maximum else None, said
    )


def is_local_server(base_url: str | None) -> bool:
    """A server on this machine or a private network (loopback or private address, a name
    without a dot, ``.local``/``.internal``/``.lan``), where one request at a time is common;
    public APIs serve many at once."""
    if not base_url:
        return False
    host = (urlsplit(base_url).hostname or "").lower().rstrip(".")
    if not host:
        return False
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return (
            host == "localhost"
            or "." not in host
            or host.endswith((".localhost", ".local", ".internal", ".lan", ".home.arpa"))
        )
    return address.is_loopback or address.is_private or address.is_link_local


@dataclass(slots=True)
class ServerMemo:
    """What one server (base URL and model) showed this process."""

    response_format: ResponseFormat = "json_schema"
    """The first format of ``RESPONSE_FORMATS`` the server has not refused."""
    stream: bool | None = None
    """Stream replies: True once a reply took a quarter of the timeout or a call timed out
    (then the timeout bounds silence, not a reply's length); False once a reply came back
    quickly; None before any reply."""
    stream_refused: bool = False
    """The server refused ``stream: true``: every later call is unstreamed, whatever ``stream``
    says."""
    n_ctx: int | None = None
    """The server's context window in tokens, once it said (in a refusal, or its properties)."""
    prompt_cache_key_refused: bool = False
    """The server refused ``prompt_cache_key``: every later call is sent without it."""
    serial: bool = False
    """The server cut a streamed reply when another request arrived (llama-cpp-python does):
    it serves one call at a time, and is sent one at a time from then on
    (``faithjudge.transport.pacing``)."""

    def refused(self, mode: str) -> bool:
        """Note that the server refused ``mode``. True when the memo now holds a later format
        (moved on by this call, or already by a concurrent one): ask again in that format.
        False when no format is left to try."""
        if mode not in RESPONSE_FORMATS:
            return False
        position = RESPONSE_FORMATS.index(mode)
        if RESPONSE_FORMATS.index(self.response_format) > position:
            return True
        if position + 1 >= len(RESPONSE_FORMATS):
            return False
        self.response_format = RESPONSE_FORMATS[position + 1]
        return True

    def replied(self, seconds: float, timeout: float) -> None:
        """Note a reply that took ``seconds``: a slow one makes later calls stream."""
        if seconds >= timeout / 4:
            self.stream = True
        elif self.stream is None:
            self.stream = False


_SERVERS: dict[tuple[str, str], ServerMemo] = {}


def server_memo(base_url: str | None, model: str) -> ServerMemo:
    """The memo of the server at ``base_url`` serving ``model``, shared by the whole process."""
    key = (base_url or "", model)
    memo = _SERVERS.get(key)
    if memo is None:
        memo = _SERVERS[key] = ServerMemo()
    return memo


def forget_servers() -> None:
    """Forget every server (a test that needs a fresh process's view)."""
    _SERVERS.clear()
