"""VLM backends behind one protocol (``base.VLMBackend``) and the factory that builds them.

``transformers`` (local model; needs the ``sidecar`` extra and torch), ``openai`` (any
OpenAI-compatible server) and ``litellm`` (hosted VLMs; the ``litellm`` extra). Heavy imports
happen only inside :func:`make_backend`, for the backend asked for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from faithjudge.errors import ConfigError
from faithjudge.sidecar.backends.base import Conversation, Generation, Turn, VLMBackend

__all__ = [
    "BACKENDS",
    "BackendConfig",
    "BackendName",
    "Conversation",
    "Generation",
    "Turn",
    "VLMBackend",
    "make_backend",
]

BackendName = Literal["transformers", "openai", "litellm"]
BACKENDS: tuple[BackendName, ...] = ("transformers", "openai", "litellm")


@dataclass(frozen=True, slots=True)
class BackendConfig:
    """Everything needed to build one backend (CLI flags and app settings map onto this)."""

    backend: BackendName
    model: str
    max_new_tokens: int = 2048
    batch_size: int = 8
    device: str = "auto"
    dtype: str = "auto"
    base_url: str | None = None
    api_key: str | None = None
    concurrency: int = 100
    timeout: float = 300.0
    seed: int | None = 0
    trust_remote_code: bool = False


def make_backend(config: BackendConfig) -> VLMBackend:
    """Build the backend ``config`` names; ConfigError says what is missing or wrong."""
    if not config.model:
        raise ConfigError("a model is required (--model)")
    if config.backend == "transformers":
        from faithjudge.sidecar.backends.hf import TransformersBackend

        return TransformersBackend(
            config.model,
            device=config.device,
            max_new_tokens=config.max_new_tokens,
            batch_size=config.batch_size,
            dtype=config.dtype,
            trust_remote_code=config.trust_remote_code,
        )
    if config.backend == "openai":
        from faithjudge.sidecar.backends.openai_chat import OpenAIVLMBackend
        from faithjudge.transport.providers import make_openai_client

        client = make_openai_client(
            base_url=config.base_url, api_key=config.api_key, timeout=config.timeout
        )
        return OpenAIVLMBackend(
            config.model,
            client=client,
            max_tokens=config.max_new_tokens,
            seed=config.seed,
            concurrency=config.concurrency,
        )
    if config.backend == "litellm":
        from faithjudge.sidecar.backends.litellm_chat import LiteLLMVLMBackend

        return LiteLLMVLMBackend(
            config.model,
            max_tokens=config.max_new_tokens,
            seed=config.seed,
            api_base=config.base_url,
            timeout=config.timeout,
            concurrency=config.concurrency,
        )
    raise ConfigError(f"unknown backend {config.backend!r}; use one of {', '.join(BACKENDS)}")
