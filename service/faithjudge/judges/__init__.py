"""Judge backends and the factory that builds one from a ``backend:target`` spec.

Specs: ``openai:MODEL``, ``openai-batch:MODEL`` (the provider's Batch API), ``litellm:MODEL``,
``replay:PATH[#judge]``, ``lexicon:v1`` (offline, no API key). Each backend is a
``JudgeBackend`` in the ``JUDGES`` registry: how its spec is written, its factory and the
settings it reads (a pydantic model; ``Settings.options`` fills it from ``FAITHJUDGE_<FIELD>``).
Factories and settings models may be registered as lazy ``"module:object"`` references, and
factories import their SDKs themselves, so an optional extra is needed only when its backend is
used. A plugin adds a backend with ``register_judge``, or as an entry point of its installed
package in the ``faithjudge.judges`` group (``NAME = package.module:object``, the object a
``JudgeBackend`` or a factory), imported only when a spec names it (the group's earlier name,
``faithjudge.evaluators``, is still read, with a ``DeprecationWarning``); the ``--judge`` help
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
from faithjudge.judges.base import Judge, JudgeRequest
from faithjudge.settings import Settings
from faithjudge.transport.base import JudgeResponse, Usage
from faithjudge.transport.chat import Message

__all__ = [
    "JUDGES",
    "Judge",
    "JudgeBackend",
    "JudgeFactory",
    "JudgeRequest",
    "JudgeResponse",
    "Message",
    "Usage",
    "is_batch_route",
    "judge_forms",
    "judge_help",
    "live_spec",
    "make_judge",
    "register_judge",
]

_BATCH_ROUTE = "faithjudge.provider_batch.judge"
_BATCH_JUDGE = f"{_BATCH_ROUTE}:OpenAIBatchJudge"
"""The Batch API route sits above this package (it drives the pipeline): named by reference
only, so this package never imports it and no circle forms."""

JudgeFactory = Callable[[str, Settings], Judge]
"""Builds a backend from the part of the spec after ``backend:`` and the service settings."""


@dataclass(frozen=True, slots=True)
class JudgeBackend:
    """One backend: how its spec is written, what builds it and which settings it reads."""

    form: str
    """How a spec is written (``openai:MODEL``), for help texts and error messages."""
    factory: JudgeFactory | str
    """The factory, or a lazy ``"module:function"`` reference imported on first build."""
    options: type[BaseModel] | str | None = None
    """The pydantic model of its own settings (credentials, endpoints), or a lazy reference to
    it: each field ``NAME`` is ``FAITHJUDGE_<NAME>`` or ``Settings(NAME=...)``. The factory reads
    them with ``settings.options(Model)``; ``make_judge`` checks them first."""
    batch_route: bool = False
    """Its requests go through the provider's Batch API: a batch phase sends them before the
    run (``faithjudge score``, the service's jobs) and the judge, an
    ``OpenAIBatchJudge``, reads the answers it recorded."""
    live_twin: str | None = None
    """The backend that sends the same requests live, answering at once (``openai`` for
    ``openai-batch``): what ``check-judge`` probes before a batch is paid."""

    def options_model(self) -> type[BaseModel] | None:
        model = _resolved(self.options)
        if model is not None and not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise ConfigError(f"judge {self.form}: options {self.options!r} is no model")
        return model

    def variables(self) -> tuple[str, ...]:
        """The ``FAITHJUDGE_*`` variables of its settings."""
        model = self.options_model()
        return tuple(f"FAITHJUDGE_{name.upper()}" for name in model.model_fields) if model else ()

    def build(self, target: str, settings: Settings) -> Judge:
        model = self.options_model()
        if model is not None:
            settings.options(model)  # a bad value fails here, naming its variable
        factory = _resolved(self.factory)
        if not callable(factory):
            raise ConfigError(f"judge {self.form}: factory {self.factory!r} is not callable")
        judge = cast(JudgeFactory, factory)(target, settings)
        if self.batch_route:
            # the batch phases drive this class alone; another would be scored as never sent
            batch_judge = _resolved(_BATCH_JUDGE)
            if not isinstance(judge, cast(type, batch_judge)):
                raise ConfigError(
                    f"judge {self.form} is a Batch API route, but its factory built a "
                    f"{type(judge).__name__}, not an OpenAIBatchJudge"
                )
        return judge


def _resolved(entry: object) -> object:
    if not isinstance(entry, str):
        return entry
    try:
        return resolve_ref(entry)
    except RegistryError as exc:
        raise ConfigError(f"cannot load a judge backend: {exc}") from exc


def _installed_backend(name: str, found: object) -> JudgeBackend:
    """The backend an installed package's ``faithjudge.judges`` entry point names: a
    ``JudgeBackend``, or a factory (written ``NAME:TARGET``, declaring no settings)."""
    if ":" in name or name != name.strip():
        raise ValueError(f"{name!r} is no backend name (no ':' or surrounding spaces)")
    if isinstance(found, JudgeBackend):
        return found
    if callable(found):
        return JudgeBackend(form=f"{name}:TARGET", factory=cast(JudgeFactory, found))
    raise TypeError(f"names a {type(found).__name__}, not a JudgeBackend or a factory")


JUDGES: Registry[JudgeBackend] = Registry(
    "judge backend",
    group="faithjudge.judges",
    adapt=_installed_backend,
    old_groups=("faithjudge.evaluators",),
)
"""Every backend by name (the part of a spec before ``:``), in help order: those registered
here, then those of installed packages."""


def register_judge(
    name: str,
    factory: JudgeFactory | str,
    spec: str | None = None,
    *,
    options: type[BaseModel] | str | None = None,
    batch_route: bool = False,
    live_twin: str | None = None,
    replace: bool = False,
) -> JudgeBackend:
    """Make ``name:TARGET`` specs build judges with ``factory`` (``spec`` shows the form;
    ``options`` is the model of the settings the backend reads; ``batch_route`` and
    ``live_twin`` as ``JudgeBackend`` says).

    Raises:
        ValueError: an invalid name, or ``name`` already taken by another backend (unless
            ``replace``).
    """
    if not name or ":" in name or name != name.strip():
        raise ValueError(f"invalid backend name {name!r}")
    backend = JudgeBackend(
        form=spec or f"{name}:TARGET",
        factory=factory,
        options=options,
        batch_route=batch_route,
        live_twin=live_twin,
    )
    JUDGES.register(name, backend, replace=replace)
    return backend


_BUILTIN = "faithjudge.judges.builtin"
_OPENAI_OPTIONS = f"{_BUILTIN}:OpenAIOptions"
register_judge("lexicon", f"{_BUILTIN}:lexicon", "lexicon:v1 (offline, the default)")
register_judge("openai", f"{_BUILTIN}:openai", "openai:MODEL", options=_OPENAI_OPTIONS)
register_judge(
    "openai-batch",
    f"{_BATCH_ROUTE}:build",
    "openai-batch:MODEL (the provider's Batch API, half price)",
    options=_OPENAI_OPTIONS,
    batch_route=True,
    live_twin="openai",
)
register_judge("litellm", f"{_BUILTIN}:litellm", "litellm:MODEL")
register_judge("replay", f"{_BUILTIN}:replay", "replay:FILE[#judge]")


def judge_forms() -> tuple[str, ...]:
    """How each registered backend's spec is written, in registration order. An installed
    package's backend is shown as ``NAME:TARGET``: listing it imports nothing of the package,
    so a slow or broken plugin costs nothing until a spec names it."""
    return tuple(
        f"{name}:TARGET" if JUDGES.plugin(name) is not None else JUDGES.get(name).form
        for name in JUDGES.names()
    )


def _backend_of(spec: str) -> JudgeBackend | None:
    """The backend ``spec`` names (loaded), or None when it names none.

    Raises:
        ConfigError: an installed package's backend that cannot be loaded.
    """
    name, sep, _ = spec.strip().partition(":")
    if not sep:
        return None
    try:
        return JUDGES.get(name.strip())
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


def judge_help() -> str:
    """The ``--judge`` help text: every registered backend's spec."""
    return "Judge: " + ", ".join(judge_forms()) + "."


def make_judge(spec: str, *, settings: Settings | None = None) -> Judge:
    """Build the judge named by ``spec`` (``backend:target``) with ``settings``.

    Without ``settings`` the defaults apply (no environment is read here; the OpenAI client
    still follows ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``, as its factory documents).

    Raises:
        UserInputError: an unknown backend (the message lists the registered ones) or no target.
        ConfigError: a backend setting the backend's model refuses, or a backend that cannot
            be loaded (an installed package's: the message names it and its entry point).
    """
    backend_name, sep, target = spec.partition(":")
    try:
        backend = JUDGES.get(backend_name.strip()) if sep else None
    except UnknownName:
        backend = None
    except PluginError as exc:
        raise ConfigError(str(exc)) from exc
    if backend is None:
        known = ", ".join(judge_forms())
        raise UserInputError(f"unknown judge {spec!r}: use one of {known}", field="judge")
    target = target.strip()
    if not target:
        raise UserInputError(
            f"judge {spec!r} names no model or file after '{backend_name}:'",
            field="judge",
        )
    return backend.build(target, settings if settings is not None else Settings.model_construct())
