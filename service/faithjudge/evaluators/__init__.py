"""Evaluator backends and the factory that builds one from a ``backend:target`` spec.

Specs: ``openai:MODEL``, ``openai-batch:MODEL`` (the provider's Batch API), ``litellm:MODEL``,
``replay:PATH[#judge]``, ``lexicon:v1`` (offline, no API key). Each backend registers a factory
under its name in ``EVALUATOR_FACTORIES`` (or through ``register_evaluator``); factories import
their SDKs lazily, so an optional extra is needed only when its backend is used.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from faithjudge.errors import UserInputError
from faithjudge.evaluators.base import Evaluator, JudgeRequest, Message
from faithjudge.settings import Settings
from faithjudge.transport.base import JudgeResponse, Usage

__all__ = [
    "EVALUATOR_FACTORIES",
    "EVALUATOR_SPECS",
    "Evaluator",
    "EvaluatorFactory",
    "JudgeRequest",
    "JudgeResponse",
    "Message",
    "Usage",
    "evaluator_help",
    "make_evaluator",
    "register_evaluator",
]

EvaluatorFactory = Callable[[str, Settings], Evaluator]
"""Builds a backend from the part of the spec after ``backend:`` and the service settings."""


def _openai(target: str, settings: Settings) -> Evaluator:
    from faithjudge.evaluators.openai import OpenAIEvaluator
    from faithjudge.transport.providers import HttpTransport, make_openai_client

    key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
    client = make_openai_client(
        base_url=settings.openai_base_url,
        api_key=key,
        timeout=settings.timeout_s,
        transport=cast(HttpTransport, settings.http_transport),  # checked by the factory
    )
    return OpenAIEvaluator(
        target,
        client=client,
        temperature=settings.temperature,
        seed=settings.seed,
        max_tokens=settings.max_tokens,
    )


def _openai_batch(target: str, settings: Settings) -> Evaluator:
    from faithjudge.evaluators.openai import OpenAIEvaluator
    from faithjudge.evaluators.openai_batch import OpenAIBatchEvaluator, open_ledger

    inner = _openai(target, settings)
    assert isinstance(inner, OpenAIEvaluator)
    return OpenAIBatchEvaluator(inner, open_ledger(settings))


def _litellm(target: str, settings: Settings) -> Evaluator:
    from faithjudge.evaluators.litellm import LiteLLMEvaluator

    return LiteLLMEvaluator(
        target,
        temperature=settings.temperature,
        seed=settings.seed,
        max_tokens=settings.max_tokens,
        timeout=settings.timeout_s,
    )


def _replay(target: str, settings: Settings) -> Evaluator:
    from faithjudge.evaluators.replay import ReplayEvaluator

    path, sep, judge = target.rpartition("#")
    if not sep:
        path, judge = target, ""
    return ReplayEvaluator(path, judge=judge or None)


def _lexicon(target: str, settings: Settings) -> Evaluator:
    from faithjudge.evaluators.lexicon import LexiconEvaluator

    return LexiconEvaluator(target)


EVALUATOR_FACTORIES: dict[str, EvaluatorFactory] = {
    "lexicon": _lexicon,
    "openai": _openai,
    "openai-batch": _openai_batch,
    "litellm": _litellm,
    "replay": _replay,
}
# How each backend's spec is written, for help texts and error messages.
EVALUATOR_SPECS: dict[str, str] = {
    "lexicon": "lexicon:v1 (offline, the default)",
    "openai": "openai:MODEL",
    "openai-batch": "openai-batch:MODEL (the provider's Batch API, half price)",
    "litellm": "litellm:MODEL",
    "replay": "replay:FILE[#judge]",
}


def register_evaluator(name: str, factory: EvaluatorFactory, spec: str | None = None) -> None:
    """Make ``name:TARGET`` specs build evaluators with ``factory`` (``spec`` shows the form)."""
    if not name or ":" in name:
        raise ValueError(f"invalid backend name {name!r}")
    EVALUATOR_FACTORIES[name] = factory
    EVALUATOR_SPECS[name] = spec or f"{name}:TARGET"


def evaluator_help() -> str:
    """The ``--evaluator`` help text: every registered backend's spec."""
    specs = (EVALUATOR_SPECS.get(name, f"{name}:TARGET") for name in EVALUATOR_FACTORIES)
    return "Evaluator: " + ", ".join(specs) + "."


def make_evaluator(spec: str, *, settings: Settings | None = None) -> Evaluator:
    """Build the evaluator named by ``spec`` (``backend:target``) with ``settings``.

    Without ``settings`` the defaults apply (no environment is read here; the OpenAI client
    still follows ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``, as its factory documents).
    """
    backend, sep, target = spec.partition(":")
    known = ", ".join(EVALUATOR_SPECS.get(name, f"{name}:...") for name in EVALUATOR_FACTORIES)
    factory = EVALUATOR_FACTORIES.get(backend.strip()) if sep else None
    if factory is None:
        raise UserInputError(f"unknown evaluator {spec!r}: use one of {known}", field="evaluator")
    target = target.strip()
    if not target:
        raise UserInputError(
            f"evaluator {spec!r} names no model or file after '{backend}:'", field="evaluator"
        )
    return factory(target, settings if settings is not None else Settings.model_construct())
