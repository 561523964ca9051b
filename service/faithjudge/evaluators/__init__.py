"""Evaluator backends and the factory that builds one from a ``backend:target`` spec.

Specs: ``openai:MODEL``, ``openai-batch:MODEL`` (the provider's Batch API), ``litellm:MODEL``,
``replay:PATH[#judge]``, ``lexicon:v1`` (offline, no API key). Each backend is an
``EvaluatorBackend`` in the ``EVALUATORS`` registry: how its spec is written, its factory and the
settings it reads (a pydantic model; ``Settings.options`` fills it from ``FAITHJUDGE_<FIELD>``).
Factories and settings models may be registered as lazy ``"module:object"`` references, and
factories import their SDKs themselves, so an optional extra is needed only when its backend is
used. A plugin adds a backend with ``register_evaluator``, or as an entry point of its installed
package in the ``faithjudge.evaluators`` group (``NAME = package.module:object``, the object an
``EvaluatorBackend`` or a factory), imported only when a spec names it; the ``--evaluator`` help
of every command and the error for an unknown backend list the registry.

A backend says whether it is a Batch API route (``batch_route``: its requests go to the
provider's Batch API, sent by a batch phase before the run) and which live backend answers the
same requests at once (``live_twin``): ``is_batch_route`` and ``live_spec`` read that, so no
caller tells a route by its name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from faithjudge_client.registry import (
    PluginError,
    Registry,
    RegistryError,
    UnknownName,
    resolve_ref,
)
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
    "is_batch_route",
    "live_spec",
    "make_evaluator",
    "register_evaluator",
]

_BATCH_ROUTE = "faithjudge.provider_batch.evaluator"
_BATCH_EVALUATOR = f"{_BATCH_ROUTE}:OpenAIBatchEvaluator"
"""The Batch API route sits above this package (it drives the pipeline): named by reference
only, so this package never imports it and no circle forms."""

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
    batch_route: bool = False
    """Its requests go through the provider's Batch API: a batch phase sends them before the
    run (``faithjudge score``, the service's jobs) and the evaluator, an
    ``OpenAIBatchEvaluator``, reads the answers it recorded."""
    live_twin: str | None = None
    """The backend that sends the same requests live, answering at once (``openai`` for
    ``openai-batch``): what ``check-judge`` probes before a batch is paid."""

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
        evaluator = cast(EvaluatorFactory, factory)(target, settings)
        if self.batch_route:
            # the batch phases drive this class alone; another would be scored as never sent
            batch_evaluator = _resolved(_BATCH_EVALUATOR)
            if not isinstance(evaluator, cast(type, batch_evaluator)):
                raise ConfigError(
                    f"evaluator {self.form} is a Batch API route, but its factory built a "
                    f"{type(evaluator).__name__}, not an OpenAIBatchEvaluator"
                )
        return evaluator


def _resolved(entry: object) -> object:
    if not isinstance(entry, str):
        return entry
    try:
        return resolve_ref(entry)
    except RegistryError as exc:
        raise ConfigError(f"cannot load an evaluator backend: {exc}") from exc


def _installed_backend(name: str, found: object) -> EvaluatorBackend:
    """The backend an installed package's ``faithjudge.evaluators`` entry point names: an
    ``EvaluatorBackend``, or a factory (written ``NAME:TARGET``, declaring no settings)."""
    if ":" in name or name != name.strip():
        raise ValueError(f"{name!r} is no backend name (no ':' or surrounding spaces)")
    if isinstance(found, EvaluatorBackend):
        return found
    if callable(found):
        return EvaluatorBackend(form=f"{name}:TARGET", factory=cast(EvaluatorFactory, found))
    raise TypeError(f"names a {type(found).__name__}, not an EvaluatorBackend or a factory")


EVALUATORS: Registry[EvaluatorBackend] = Registry(
    "evaluator backend", group="faithjudge.evaluators", adapt=_installed_backend
)
"""Every backend by name (the part of a spec before ``:``), in help order: those registered
here, then those of installed packages."""


def register_evaluator(
    name: str,
    factory: EvaluatorFactory | str,
    spec: str | None = None,
    *,
    options: type[BaseModel] | str | None = None,
    batch_route: bool = False,
    live_twin: str | None = None,
    replace: bool = False,
) -> EvaluatorBackend:
    """Make ``name:TARGET`` specs build evaluators with ``factory`` (``spec`` shows the form;
    ``options`` is the model of the settings the backend reads; ``batch_route`` and
    ``live_twin`` as ``EvaluatorBackend`` says).

    Raises:
        ValueError: an invalid name, or ``name`` already taken by another backend (unless
            ``replace``).
    """
    if not name or ":" in name or name != name.strip():
        raise ValueError(f"invalid backend name {name!r}")
    backend = EvaluatorBackend(
        form=spec or f"{name}:TARGET",
        factory=factory,
        options=options,
        batch_route=batch_route,
        live_twin=live_twin,
    )
    EVALUATORS.register(name, backend, replace=replace)
    return backend


_BUILTIN = "faithjudge.evaluators.builtin"
_OPENAI_OPTIONS = f"{_BUILTIN}:OpenAIOptions"
register_evaluator("lexicon", f"{_BUILTIN}:lexicon", "lexicon:v1 (offline, the default)")
register_evaluator("openai", f"{_BUILTIN}:openai", "openai:MODEL", options=_OPENAI_OPTIONS)
register_evaluator(
    "openai-batch",
    f"{_BATCH_ROUTE}:build",
    "openai-batch:MODEL (the provider's Batch API, half price)",
    options=_OPENAI_OPTIONS,
    batch_route=True,
    live_twin="openai",
)
register_evaluator("litellm", f"{_BUILTIN}:litellm", "litellm:MODEL")
register_evaluator("replay", f"{_BUILTIN}:replay", "replay:FILE[#judge]")


def evaluator_forms() -> tuple[str, ...]:
    """How each registered backend's spec is written, in registration order. An installed
    package's backend is shown as ``NAME:TARGET``: listing it imports nothing of the package,
    so a slow or broken plugin costs nothing until a spec names it."""
    return tuple(
        f"{name}:TARGET" if EVALUATORS.plugin(name) is not None else EVALUATORS.get(name).form
        for name in EVALUATORS.names()
    )


def _backend_of(spec: str) -> EvaluatorBackend | None:
    """The backend ``spec`` names (loaded), or None when it names none.

    Raises:
        ConfigError: an installed package's backend that cannot be loaded.
    """
    name, sep, _ = spec.strip().partition(":")
    if not sep:
        return None
    try:
        return EVALUATORS.get(name.strip())
    except UnknownName:
        return None
    except PluginError as exc:
        raise ConfigError(str(exc)) from exc


def is_batch_route(spec: str) -> bool:
    """Whether ``spec``'s backend sends its requests through the provider's Batch API (an
    unknown backend is none; building it says why it is unknown).

    Raises:
        ConfigError: an installed package's backend that cannot be loaded.
    """
    backend = _backend_of(spec)
    return backend is not None and backend.batch_route


def live_spec(spec: str) -> str:
    """The spec that sends ``spec``'s requests live: its backend's live twin with the same
    target (``openai-batch:m`` -> ``openai:m``), or ``spec`` itself.

    Raises:
        ConfigError: an installed package's backend that cannot be loaded.
    """
    backend = _backend_of(spec)
    if backend is None or backend.live_twin is None:
        return spec
    return f"{backend.live_twin}:{spec.partition(':')[2]}"


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
            be loaded (an installed package's: the message names it and its entry point).
    """
    backend_name, sep, target = spec.partition(":")
    try:
        backend = EVALUATORS.get(backend_name.strip()) if sep else None
    except UnknownName:
        backend = None
    except PluginError as exc:
        raise ConfigError(str(exc)) from exc
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
