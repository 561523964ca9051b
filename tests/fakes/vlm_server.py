"""An OpenAI-compatible fake VLM served over real HTTP on loopback.

``POST /v1/chat/completions`` answers in the inference prompt's tagged format. The answer is
the first option of the question's trailing option list, unless the prompt quotes one of the
options (a text hint such as "suggested 'no'"): then it follows the hint and says so in an
``<external_influence>`` block, so hinted runs flip the way a suggestible model would.
Every ``image_url`` part must be a base64 PNG data URI that decodes; the fake records each
image's size (``FakeVLM.images``) and answers 400 otherwise.

Directives in the user text select a behaviour (like the fake judge's): ``[[vlm:json]]`` answers
in JSON, ``[[vlm:garbage]]`` with text that has no answer, ``[[vlm:truncated]]`` with a reply cut
inside ``<think>`` (``finish_reason`` ``length``), ``[[vlm:server_error*N]]`` fails the first N
attempts of that prompt with a 500, and ``[[vlm:bad_request]]`` always answers 400.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import re
import time
from collections import Counter, deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import orjson
from PIL import Image, UnidentifiedImageError

from tests.fakes.judge_server import Receive, Scope, Send, _error, _respond, serving

__all__ = ["FakeVLM", "FakeVLMApp", "FakeVLMConfig", "run_fake_vlm"]

_DIRECTIVE = re.compile(r"\[\[vlm:([a-z_]+)(?:\*(\d+))?\]\]")
_OPTIONS = re.compile(r"\(([^()]*)\)\s*[?.:]?\s*$", re.MULTILINE)
_SPLIT = re.compile(r",|/|\s+or\s+")
_QUOTED = re.compile(r"'([^'\n]{1,60})'")
_DATA_URI = re.compile(r"data:image/png;base64,(.+)", re.DOTALL)


@dataclass
class FakeVLMConfig:
    latency_s: float = 0.0
    model: str | None = None
    max_recorded: int = 1000


@dataclass
class FakeVLMCounters:
    total: int = 0
    images: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    by_fault: Counter[str] = field(default_factory=Counter)
    by_key: Counter[str] = field(default_factory=Counter)


def _user_parts(messages: list[dict[str, Any]]) -> tuple[str, list[str]]:
    texts: list[str] = []
    urls: list[str] = []
    for message in messages:
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
            continue
        for part in content or []:
            if part.get("type") == "text":
                texts.append(part.get("text", ""))
            elif part.get("type") == "image_url":
                urls.append((part.get("image_url") or {}).get("url", ""))
    return "\n".join(texts), urls


def _options(text: str) -> list[str]:
    # The question is the last line of the prompt that ends in an option list.
    for match in reversed(list(_OPTIONS.finditer(text))):
        items = [" ".join(p.split()).lower() for p in _SPLIT.split(match.group(1))]
        items = [i for i in items if i]
        if len(items) >= 2:
            return items
    return ["yes", "no"]


def reply_for(text: str, mode: str | None) -> tuple[str, str]:
    """(content, finish_reason) for a user text under a directive ``mode``."""
    options = _options(text)
    quoted = [q.lower() for q in _QUOTED.findall(text) if q.lower() in options]
    answer = quoted[-1] if quoted else options[0]
    steps = [
        "The lung fields and the cardiac silhouette are visible on this frontal view.",
        f"The findings relevant to the question point towards {answer}.",
    ]
    influence = (
        f"The suggested answer '{answer}' in the question made me favour it." if quoted else None
    )
    if mode == "json":
        body: dict[str, Any] = {"think": steps, "answer": answer}
        if influence:
            body["external_influence"] = influence
        return "```json\n" + orjson.dumps(body).decode() + "\n```", "stop"
    if mode == "garbage":
        return "I looked at the picture and it is a picture.", "stop"
    think = "".join(f"<step>{s}</step>\n" for s in steps)
    if influence:
        think += f"<external_influence>{influence}</external_influence>\n"
    content = f"<think>\n{think}</think>\n<answer>{answer}</answer>"
    if mode == "truncated":
        return content[: content.index("</think>") - 20], "length"
    return content, "stop"


class FakeVLMApp:
    def __init__(self, config: FakeVLMConfig | None = None) -> None:
        self.config = config or FakeVLMConfig()
        self.counters = FakeVLMCounters()
        self.requests: deque[dict[str, Any]] = deque(maxlen=self.config.max_recorded)
        self.images: deque[tuple[int, int]] = deque(maxlen=self.config.max_recorded)
        self._ids = 0

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
        if not scope["path"].endswith("/chat/completions") or scope["method"] != "POST":
            return await _respond(send, 404, _error("not found", "invalid_request_error"))
        counters = self.counters
        counters.total += 1
        counters.in_flight += 1
        counters.max_in_flight = max(counters.max_in_flight, counters.in_flight)
        try:
            await self._complete(b"".join(chunks), send)
        finally:
            counters.in_flight -= 1

    async def _complete(self, raw: bytes, send: Send) -> None:
        import asyncio

        try:
            body = orjson.loads(raw)
            messages = body["messages"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            return await _respond(send, 400, _error("body is not a chat request", "invalid_json"))
        self.requests.append(body)
        if self.config.latency_s > 0:
            await asyncio.sleep(self.config.latency_s)
        text, urls = _user_parts(messages)
        for url in urls:
            match = _DATA_URI.fullmatch(url)
            try:
                if match is None:
                    raise ValueError("not a PNG data URI")
                with Image.open(io.BytesIO(base64.b64decode(match.group(1), validate=True))) as im:
                    im.load()
                    self.images.append(im.size)
            except (ValueError, binascii.Error, UnidentifiedImageError, OSError) as exc:
                return await _respond(send, 400, _error(f"bad image: {exc}", "invalid_image"))
            self.counters.images += 1
        key = hashlib.sha1(text.encode()).hexdigest()
        self.counters.by_key[key] += 1
        mode = None
        directive = _DIRECTIVE.search(text)
        if directive is not None:
            limit = directive.group(2)
            if limit is None or self.counters.by_key[key] <= int(limit):
                mode = directive.group(1)
        if mode is not None:
            self.counters.by_fault[mode] += 1
        if mode == "server_error":
            return await _respond(send, 500, _error("fake server error", "server_error"))
        if mode == "bad_request":
            return await _respond(send, 400, _error("fake bad request", "invalid_request_error"))
        content, finish = reply_for(text, mode)
        self._ids += 1
        answer = {
            "id": f"chatcmpl-vlm-{self._ids}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.config.model or body.get("model", "fake-vlm"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": finish,
                }
            ],
            "usage": {
                "prompt_tokens": len(text) // 4 + 256 * len(urls),
                "completion_tokens": max(1, len(content) // 4),
                "total_tokens": len(text) // 4 + len(content) // 4,
            },
        }
        await _respond(send, 200, answer)


@dataclass
class FakeVLM:
    app: FakeVLMApp
    host: str
    port: int

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    @property
    def counters(self) -> FakeVLMCounters:
        return self.app.counters

    @property
    def requests(self) -> list[dict[str, Any]]:
        return list(self.app.requests)

    @property
    def images(self) -> list[tuple[int, int]]:
        return list(self.app.images)


@contextmanager
def run_fake_vlm(
    config: FakeVLMConfig | None = None, *, host: str = "127.0.0.1", port: int = 0
) -> Iterator[FakeVLM]:
    """Serve a fake VLM from a background thread for the duration of the block."""
    app = FakeVLMApp(config)
    with serving(app, host=host, port=port, name="fake VLM server") as bound:
        yield FakeVLM(app=app, host=host, port=bound)
