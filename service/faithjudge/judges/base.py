"""The judge protocol: one async call in, raw text out.

A judge knows its wire format and nothing else: concurrency, retries and caching wrap it
from outside (``service/faithjudge/transport/``), and verification of what it returns happens in
``service/faithjudge/scoring/grading.py``. The raw response types (``JudgeResponse``, ``Usage``)
and the call-target protocol this one extends belong to the transport
(``service/faithjudge/transport/base.py``), and so does the chat ``Message`` a prompt set
renders (``service/faithjudge/transport/chat.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from faithjudge_client.lines import Metric

from faithjudge.transport.base import CallTarget
from faithjudge.transport.chat import Message

__all__ = ["Judge", "JudgeRequest"]


@dataclass(frozen=True, slots=True)
class JudgeRequest:
    """One grading call: the rendered prompt plus the structured inputs it was rendered from.

    ``messages`` and ``response_schema`` are what an LLM backend sends; ``inputs`` (cot,
    ground truth, KB entry, modification, context) serve offline and replay backends.
    ``item_id`` identifies the item for replay lookups; it never reaches an LLM.
    """

    metric: Metric
    messages: tuple[Message, ...]
    response_schema: Mapping[str, Any]
    schema_name: str
    inputs: Mapping[str, Any] = field(default_factory=dict)
    item_id: str | None = None


@runtime_checkable
class Judge(CallTarget[JudgeRequest], Protocol):
    """A frozen judge: the transport's ``CallTarget`` for ``JudgeRequest``.

    ``id`` looks like ``openai:gpt-5-2025-08-07`` or ``replay:FILE``; ``settings``,
    ``cache_key_material``, ``should_retry``, ``retry_after``, ``judge`` and ``aclose`` are the
    ``CallTarget`` methods.

    Two optional class attributes serve judges that run in the process and grade from
    ``inputs`` (``lexicon``, ``replay``): ``reads_prompt = False`` lets the pipeline skip
    rendering ``messages`` (left empty), and the transport's ``in_process = True`` lets the
    caller skip the concurrency limit, which only costs such a judge (it never asks for a
    retry, so the retry loop is never entered).
    """
