"""Provider factories: the one place that reads judge credentials and endpoints.

Backends (``service/faithjudge/judges/``) get a ready client and never look at the environment.
The
SDK's own retries are switched off here (``max_retries=0``): retries live in
``service/faithjudge/transport/resilience.py``, where they are counted and reported.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import ssl
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Literal
from urllib.parse import urlsplit

from faithjudge.errors import ConfigError

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = [
    "LOCAL_API_KEY",
    "OPENAI_DEFAULT_BASE_URL",
    "HttpTransport",
    "LiteLLMRoute",
    "litellm_route",
    "load_litellm",
    "make_openai_client",
]

HttpTransport = Literal["aiohttp", "httpx"]
OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"
LOCAL_API_KEY = "not-needed"
"""Sent to servers that need no key (vLLM, llama.cpp, Ollama): the SDK insists on one."""


def _is_openai_host(base_url: str) -> bool:
    host = (urlsplit(base_url).hostname or "").lower()
    return host == "api.openai.com" or host.endswith(".api.openai.com")


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    # Loading the CA bundle costs ~50 ms; one context serves every client of the process.
    import httpx2

    return httpx2.create_ssl_context()


def make_openai_client(
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    timeout: float = 60.0,
    transport: HttpTransport = "aiohttp",
    max_connections: int = 1000,
    max_keepalive: int = 200,
) -> AsyncOpenAI:
    """An ``AsyncOpenAI`` for ``base_url`` with SDK retries off.

    ``base_url`` and ``api_key`` fall back to ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` as the SDK
    does. Without any key, a non-OpenAI server gets a dummy key; api.openai.com is refused.
    ``transport`` picks the HTTP stack: ``aiohttp`` (default) or ``httpx``.
    """
    import httpx2
    import openai

    if timeout <= 0:
        raise ConfigError(f"the judge timeout must be positive, got {timeout}")
    resolved_url = base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_DEFAULT_BASE_URL
    key = api_key or os.environ.get("OPENAI_API_KEY")
    if not key:
        if _is_openai_host(resolved_url):
            raise ConfigError(
                "set OPENAI_API_KEY (or FAITHJUDGE_OPENAI_API_KEY) to use the OpenAI API, or "
                "point OPENAI_BASE_URL / FAITHJUDGE_OPENAI_BASE_URL at an OpenAI-compatible server"
            )
        key = LOCAL_API_KEY

    limits = httpx2.Limits(max_connections=max_connections, max_keepalive_connections=max_keepalive)
    http_client: httpx2.AsyncClient
    if transport == "aiohttp":
        http_client = openai.DefaultAioHttpClient(
            timeout=timeout, limits=limits, verify=_ssl_context()
        )
    elif transport == "httpx":
        http_client = openai.DefaultAsyncHttpxClient(
            timeout=timeout, limits=limits, verify=_ssl_context()
        )
    else:
        raise ConfigError(f"unknown HTTP transport {transport!r}: use 'aiohttp' or 'httpx'")
    return openai.AsyncOpenAI(
        base_url=resolved_url,
        api_key=key,
        timeout=timeout,
        max_retries=0,
        http_client=http_client,
    )


def load_litellm() -> ModuleType:
    """Import the optional ``litellm`` package, or explain how to install it."""
    try:
        return importlib.import_module("litellm")
    except ImportError:
        raise ConfigError(
            "the litellm backend needs the optional extra: pip install 'faithjudge[litellm]'"
        ) from None


# The variables LiteLLM reads for an OpenAI-compatible provider's endpoint, in its order.
_LITELLM_OPENAI_BASES = ("OPENAI_BASE_URL", "OPENAI_API_BASE")
_LITELLM_OPENAI_PROVIDERS = ("openai", "text-completion-openai", "custom_openai")


@dataclass(frozen=True, slots=True)
class LiteLLMRoute:
    """Where LiteLLM sends a model's calls: its provider and endpoint (None: the provider's
    default)."""

    provider: str | None
    api_base: str | None


def litellm_route(
    litellm_module: ModuleType, model: str, api_base: str | None = None
) -> LiteLLMRoute:
    """The provider and endpoint LiteLLM calls for ``model``, as it resolves them.

    The provider comes from LiteLLM's own ``get_llm_provider``; the endpoint is ``api_base``
    when given, else the one LiteLLM would take from the environment (``OPENAI_BASE_URL`` /
    ``OPENAI_API_BASE`` for OpenAI-compatible providers, ``<PROVIDER>_API_BASE`` /
    ``<PROVIDER>_BASE_URL`` for the others, ``litellm.api_base`` set in code). The backend passes
    the endpoint on explicitly, so the cache key and the call name the same server.
    """
    provider: str | None = None
    resolved = api_base
    lookup = getattr(litellm_module, "get_llm_provider", None)
    if callable(lookup):
        try:
            _, found, _, dynamic_base = lookup(model=model, api_base=api_base)
        except Exception:  # an unknown provider prefix: LiteLLM itself will say so at call time
            found, dynamic_base = None, None
        provider = found if isinstance(found, str) and found else None
        if resolved is None and isinstance(dynamic_base, str) and dynamic_base:
            resolved = dynamic_base
    if resolved is None:
        module_base = getattr(litellm_module, "api_base", None)
        resolved = module_base if isinstance(module_base, str) and module_base else None
    if resolved is None and provider is not None:
        names: tuple[str, ...] = ()
        if provider in _LITELLM_OPENAI_PROVIDERS:
            names = _LITELLM_OPENAI_BASES
        prefix = provider.upper().replace("-", "_")
        names = (*names, f"{prefix}_API_BASE", f"{prefix}_BASE_URL")
        resolved = next((os.environ[n] for n in names if os.environ.get(n)), None)
    return LiteLLMRoute(provider=provider, api_base=resolved)
