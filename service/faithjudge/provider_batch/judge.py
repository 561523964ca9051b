"""The ``openai-batch`` judge: the judge as the provider's Batch API route reaches it.

It builds exactly the requests of ``openai:MODEL`` under the same cache keys and never calls
the provider itself: a batch phase (``faithjudge.provider_batch.file_route`` for the CLI, the
job worker's for the service) sends them and records the answers, and ``judge`` reads what it
recorded. The CLI's ledger of parts, files and batches lives in the data directory; the
service's in the job store (``bind`` points the judge there). ``build`` is the backend's
factory, registered by reference in ``faithjudge.judges``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from faithjudge.errors import JudgeError
from faithjudge.judges.base import Judge, JudgeRequest
from faithjudge.provider_batch.file_ledger import BatchLedger
from faithjudge.settings import Settings
from faithjudge.transport.base import JudgeResponse
from faithjudge.transport.cache import cache_key

if TYPE_CHECKING:
    from openai import AsyncOpenAI

    from faithjudge.judges.openai import OpenAIJudge

__all__ = [
    "CLI_RETRY_HINT",
    "AnswerSource",
    "OpenAIBatchJudge",
    "build",
    "ledger_path",
    "open_ledger",
]


class AnswerSource(Protocol):
    """Where the batch phase left its answers and its final failures, by cache key."""

    async def answer_of(self, key: str) -> JudgeResponse | None: ...
    async def failure_of(self, key: str) -> tuple[int, int | None, str] | None: ...


CLI_RETRY_HINT = "a rerun into the same output with --retry-failed asks again"
"""A failure for good is kept by the plain reruns of the run that met it (its output)."""


def ledger_path(settings: Settings) -> Path:
    return settings.data_dir / "batch_ledger.sqlite3"


class OpenAIBatchJudge:
    """The judge as the batch route reaches it: same requests and keys as ``openai:MODEL``.

    ``judge`` is reached only for a request the response cache does not answer; it returns the
    answer the batch phase recorded, or its provider status and message as the transport
    failure, or says the phase never sent the request.
    """

    route = "batch"

    def __init__(self, inner: OpenAIJudge, ledger: BatchLedger) -> None:
        self.inner = inner
        self.ledger = ledger
        self.answers: AnswerSource = ledger
        self.retry_hint: str | None = CLI_RETRY_HINT
        """How the user asks a failed request again, said in its failure detail."""

    def bind(self, answers: AnswerSource, *, retry_hint: str | None = None) -> None:
        """Read answers from ``answers`` instead of the file ledger: in the service, the job
        store as the worker sees it (scoped to the job being scored, waiting out outages)."""
        self.answers = answers
        self.retry_hint = retry_hint

    @property
    def id(self) -> str:
        return "openai-batch:" + self.inner.id.partition(":")[2]

    @property
    def client(self) -> AsyncOpenAI:
        return self.inner.client

    @property
    def response_format(self) -> str:
        """The response format the batch lines are written in (the live backend's)."""
        return self.inner.response_format

    def settings(self) -> Mapping[str, Any]:
        return self.inner.settings()

    def cache_key_material(self, request: JudgeRequest) -> Mapping[str, Any] | None:
        return self.inner.cache_key_material(request)

    def request_body(self, request: JudgeRequest) -> dict[str, Any]:
        return self.inner.request_body(request)

    def should_retry(self, exc: BaseException) -> bool:
        return False  # retries happen as follow-up batches, never as live calls

    def retry_after(self, exc: BaseException) -> float | None:
        return None

    async def judge(self, request: JudgeRequest) -> JudgeResponse:
        material = self.inner.cache_key_material(request)
        key = cache_key(material) if material is not None else ""
        answer = await self.answers.answer_of(key)
        if answer is not None:
            return answer
        failure = await self.answers.failure_of(key)
        if failure is not None:
            tries, status, message = failure
            hint = f"; {self.retry_hint}" if self.retry_hint else ""
            raise JudgeError(
                f"batch API: {message} (after {tries} batch submission{'s' if tries != 1 else ''})"
                + hint,
                status=status,
                attempts=tries,
            )
        raise JudgeError("no batch answer for this request: the batch phase did not send it")

    async def aclose(self) -> None:
        self.ledger.close()
        await self.inner.aclose()


def open_ledger(settings: Settings) -> BatchLedger:
    return BatchLedger(ledger_path(settings))


def build(target: str, settings: Settings) -> Judge:
    """The ``openai-batch:MODEL`` backend: the live ``openai`` judge's requests, read from
    the CLI's ledger (the service binds it to the job store)."""
    # the live backend's module loads the OpenAI SDK: only a spec that names this backend pays
    from faithjudge.judges.builtin import openai
    from faithjudge.judges.openai import OpenAIJudge

    inner = openai(target, settings)
    assert isinstance(inner, OpenAIJudge)
    return OpenAIBatchJudge(inner, open_ledger(settings))
