"""Evaluator backends and the factory that builds one from a ``backend:target`` spec.

Specs: ``openai:MODEL``, ``openai-batch:MODEL`` (the provider's Batch API), ``litellm:MODEL``,
``replay:PATH[#judge]``, ``lexicon:v1`` (offline, no API key). Each backend is an
``EvaluatorBackend`` in the ``EVALUATORS`` registry: how its spec is written, its factory and the
settings it reads (a pydantic model; ``Settings.options`` fills it from ``FAITHJUDGE_<FIELD>``).
Factories and settings models may be registered as lazy ``"module:object"`` references, and
factories import their SDKs themselves, so an optional extra is needed only when its backend is
used. A plugin adds a backend with ``register_evaluator``; the ``--evaluator`` help of every
command and the error for an unknown backend list the registry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from faithjudge_client.registry import Registry, RegistryError, UnknownName, resolve_ref
from pydantic import BaseModel

from faithjudge.errors import ConfigError, UserInputError
from faithjudge.evaluators.base import Evaluator, JudgeRequest
from faithjudge.settings import Settings
from faithjudge.transport.base import JudgeResponse, Usage
from faithjudge.transport.chat import Message

__all__ = [
    "EVALUATORS",
    "Evaluator",
    "EvaluatorBackend",
    "EvaluatorFactory",
    "JudgeRequest",
    "JudgeResponse",
    "Message",
    "Usage",
    "evaluator_forms",
    "evaluator_help",
    "make_evaluator",
    "register_evaluator",
]

EvaluatorFactory = Callable[[str, Settings], Evaluator]
"""Builds a backend from the part of the spec after ``backend:`` and the service settings."""


@dataclass(frozen=True, slots=True)
class EvaluatorBackend:
    """One backend: how its spec is written, what builds it and which settings it reads."""

    form: str
    """How a spec is written (``openai:MODEL``), for help texts and error messages."""
    factory: EvaluatorFactory | str
    """The factory, or a lazy ``"module:function"`` reference imported on first build."""
    options: type[BaseModel] | str | None = None
    """The pydantic model of its own settings (credentials, endpoints), or a lazy reference to
    it: each field ``NAME`` is ``FAITHJUDGE_<NAME>`` or ``Settings(NAME=...)``. The factory reads
    them with ``settings.options(Model)``; ``make_evaluator`` checks them first."""

    def options_model(self) -> type[BaseModel] | None:
        model = _resolved(self.options)
        if model is not None and not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise ConfigError(f"evaluator {self.form}: options {self.options!r} is no model")
        return model

    def variables(self) -> tuple[str, ...]:
        """The ``FAITHJUDGE_*`` variables of its settings."""
        model = self.options_model()
        return tuple(f"FAITHJUDGE_{name.upper()}" for name in model.model_fields) if model else ()

    def build(self, target: str, settings: Settings) -> Evaluator:
        model = self.options_model()
        if model is not None:
            settings.options(model)  # a bad value fails here, naming its variable
        factory = _resolved(self.factory)
        if not callable(factory):
            raise ConfigError(f"evaluator {self.form}: factory {self.factory!r} is not callable")
        return cast(EvaluatorFactory, factory)(target, settings)


def _resolved(entry: object) -> object:
    if not isinstance(entry, str):
        return entry
    try:
        return resolve_ref(entry)
    except RegistryError as exc:
        raise ConfigError(f"cannot load an evaluator backend: {exc}") from exc


EVALUATORS: Registry[EvaluatorBackend] = Registry("evaluator backend")
"""Every backend by name (the part of a spec before ``:``), in help order."""


def register_evaluator(
    name: str,
    factory: EvaluatorFactory | str,
    spec: str | None = None,
    *,
    options: type[BaseModel] | str | None = None,
    replace: bool = False,
) -> EvaluatorBackend:
    """Make ``name:TARGET`` specs build evaluators with ``factory`` (``spec`` shows the form;
    ``options`` is the model of the settings the backend reads).

    Raises:
        ValueError: an invalid name, or ``name`` already taken by another backend (unless
            ``replace``).
    """
    if not name or ":" in name or name != name.strip():
        raise ValueError(f"invalid backend name {name!r}")
    backend = EvaluatorBackend(form=spec or f"{name}:TARGET", factory=factory, options=options)
    EVALUATORS.register(name, backend, replace=replace)
    return backend


_BUILTIN = "faithjudge.evaluators.builtin"
_OPENAI_OPTIONS = f"{_BUILTIN}:OpenAIOptions"
register_evaluator("lexicon", f"{_BUILTIN}:lexicon", "lexicon:v1 (offline, the default)")
register_evaluator("openai", f"{_BUILTIN}:openai", "openai:MODEL", options=_OPENAI_OPTIONS)
register_evaluator(
    "openai-batch",
    f"{_BUILTIN}:openai_batch",
    "openai-batch:MODEL (the provider's Batch API, half price)",
    options=_OPENAI_OPTIONS,
)
register_evaluator("litellm", f"{_BUILTIN}:litellm", "litellm:MODEL")
register_evaluator("replay", f"{_BUILTIN}:replay", "replay:FILE[#judge]")


def evaluator_forms() -> tuple[str, ...]:
    """How each registered backend's spec is written, in registration order."""
    return tuple(EVALUATORS.get(name).form for name in EVALUATORS.names())


def evaluator_help() -> str:
    """The ``--evaluator`` help text: every registered backend's spec."""
    return "Evaluator: " + ", ".join(evaluator_forms()) + "."


def make_evaluator(spec: str, *, settings: Settings | None = None) -> Evaluator:
    """Build the evaluator named by ``spec`` (``backend:target``) with ``settings``.

    Without ``settings`` the defaults apply (no environment is read here; the OpenAI client
    still follows ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``, as its factory documents).

    Raises:
        UserInputError: an unknown backend (the message lists the registered ones) or no target.
        ConfigError: a backend setting the backend's model refuses, or a backend that cannot
            be loaded.
    """
    backend_name, sep, target = spec.partition(":")
    try:
        backend = EVALUATORS.get(backend_name.strip()) if sep else None
    except UnknownName:
        backend = None
    if backend is None:
        known = ", ".join(evaluator_forms())
        raise UserInputError(f"unknown evaluator {spec!r}: use one of {known}", field="evaluator")
    target = target.strip()
    if not target:
        raise UserInputError(
            f"evaluator {spec!r} names no model or file after '{backend_name}:'",
            field="evaluator",
        )
    return backend.build(target, settings if settings is not None else Settings.model_construct())
