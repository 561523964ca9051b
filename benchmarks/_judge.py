"""A benchmark-only judge: answers every call at once, in process, with no HTTP.

It implements the ``Judge`` protocol of ``service/faithjudge/judges/base.py``. Each answer
is a
schema-valid reply quoting the first sentence of the fenced CoT (score 3), or none (score 1)
when no sentence is found, like the fake judge's ``quote_mode first_sentence``. A spec
``bench:NAME@MS`` makes every call wait MS milliseconds (non-blocking) first. Its
``cache_key_material`` has the shape of the openai backend's (backend, base URL, model, messages,
decoding parameters, response format), so cache keys cost what they cost in production.

``register()`` makes ``bench:MODEL`` specs build it; every instance counts its calls in
``calls`` and is listed in ``INSTANCES`` so a benchmark can read the count after a run.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import anyio
import anyio.lowlevel
import orjson
from faithjudge.judges import register_judge
from faithjudge.judges.base import JudgeRequest
from faithjudge.settings import Settings
from faithjudge.transport.base import JudgeResponse, Usage

__all__ = ["INSTANCES", "BenchJudge", "register", "total_calls"]

BASE_URL = "inproc://bench/v1"
_FENCE = re.compile(
    r"<<<BEGIN UNTRUSTED COT ([A-Za-z0-9_-]+)>>>\n(.*?)\n<<<END UNTRUSTED COT \1>>>", re.DOTALL
)
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)|\n")

INSTANCES: list[BenchJudge] = []


def _first_sentence(user: str) -> str | None:
    fence = _FENCE.search(user)
    if fence is None:
        return None
    cot = fence.group(2)
    end = _SENTENCE_END.search(cot)
    stop = len(cot) if end is None else end.start() if end.group() == "\n" else end.end()
    return cot[:stop].strip() or None


def _reply(metric: str, quote: str | None) -> dict[str, Any]:
    reply: dict[str, Any] = {
        "abstain": False,
        "abstain_reason": None,
        "score": 1 if quote is None else 3,
        "quotes": [] if quote is None else [quote],
        "quote_spans": [] if quote is None else [[0, len(quote)]],
        "rationale": "Quote [0] supports a middle score." if quote else "Nothing supports more.",
    }
    if metric == "clinical_fidelity":
        reply.update(
            omissions=[],
            hallucinations=[],
            has_omission=False,
            has_hallucination=False,
            basis="QSK",
        )
    elif metric == "causal_attribution":
        reply.update(did_acknowledge=quote is not None, claimed_influence="none")
    else:
        reply.update(is_confident=False, confidence_level="neutral")
    return reply


class BenchJudge:
    """Instant in-process judge (see the module docstring)."""

    def __init__(self, model: str) -> None:
        # ``bench:NAME@MS`` sleeps MS milliseconds (non-blocking) per call; plain NAME is instant.
        name, _, latency = model.partition("@")
        self._model = name
        self._latency_s = float(latency) / 1000.0 if latency else 0.0
        self.calls = 0
        INSTANCES.append(self)

    @property
    def id(self) -> str:
        return f"bench:{self._model}"

    def settings(self) -> Mapping[str, Any]:
        return {"model": self._model, "base_url": BASE_URL, "temperature": 0.0, "seed": 0}

    def cache_key_material(self, request: JudgeRequest) -> Mapping[str, Any] | None:
        return {
            "backend": "bench",
            "base_url": BASE_URL,
            "model": self._model,
            "messages": [[m.role, m.content] for m in request.messages],
            "temperature": 0.0,
            "seed": 0,
            "max_tokens": 1024,
            "response_format": {
                "type": "json_schema",
                "json_schema": {
                    "name": request.schema_name,
                    "schema": request.response_schema,
                    "strict": True,
                },
            },
        }

    def should_retry(self, exc: BaseException) -> bool:
        return False

    def retry_after(self, exc: BaseException) -> float | None:
        return None

    async def judge(self, request: JudgeRequest) -> JudgeResponse:
        self.calls += 1
        if self._latency_s > 0:
            await anyio.sleep(self._latency_s)
        else:
            await anyio.lowlevel.checkpoint()
        user = "\n".join(m.content for m in request.messages if m.role == "user")
        content = orjson.dumps(_reply(request.metric, _first_sentence(user))).decode()
        return JudgeResponse(
            text=content,
            model=self._model,
            usage=Usage(prompt_tokens=len(user) // 4, completion_tokens=len(content) // 4),
            fingerprint="fp_bench",
        )

    async def aclose(self) -> None:
        return None


def _factory(target: str, settings: Settings) -> BenchJudge:
    return BenchJudge(target)


def register() -> None:
    """Make ``bench:MODEL`` judge specs build a :class:`BenchJudge`."""
    register_judge("bench", _factory)


def total_calls() -> int:
    """Calls made by every bench judge of this process."""
    return sum(instance.calls for instance in INSTANCES)
