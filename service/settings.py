"""Service settings: one ``BaseSettings``, read from ``FAITHJUDGE_*`` variables at entry points.

Settings are built where a process starts (the CLI, the app factory), never at import time.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["Settings"]


def _default_data_dir() -> Path:
    return Path.home() / ".faithjudge"


class Settings(BaseSettings):
    """Everything a deployment may change; each field is ``FAITHJUDGE_<NAME>`` in the env."""

    model_config = SettingsConfigDict(env_prefix="FAITHJUDGE_", extra="ignore")

    evaluator: str = "lexicon:v1"
    """Evaluator spec: ``lexicon:v1`` (offline, the default), ``openai:MODEL``,
    ``litellm:MODEL`` or ``replay:PATH[#judge]``."""
    data_dir: Path = Field(default_factory=_default_data_dir)
    """Where the response cache (and later the job store) live."""
    cache: bool = True
    """Cache evaluator responses (content-addressed; validation reruns on every read)."""
    concurrency: int = Field(default=100, ge=1, le=10_000)
    """Maximum evaluator calls in flight."""
    prompt_set: str = "v1"
    knowledge_base: str = "cxr_vqa"

    openai_base_url: str | None = None
    """Overrides ``OPENAI_BASE_URL``; any OpenAI-compatible server (vLLM, SGLang, Ollama...)."""
    openai_api_key: SecretStr | None = None
    """Overrides ``OPENAI_API_KEY``."""
    http_transport: str = "aiohttp"
    """``aiohttp`` (measured faster under high concurrency) or ``httpx``."""
    timeout_s: float = Field(default=60.0, gt=0)
    max_retries: int = Field(default=5, ge=0, le=20)
    retry_base_s: float = Field(default=1.0, ge=0)
    temperature: float = 0.0
    seed: int | None = 0
    max_tokens: int = Field(default=1024, ge=16)

    quote_tolerance: float = Field(default=0.02, ge=0, lt=1)
    """Edits allowed per quote character when locating judge quotes in the CoT."""
    cc_alpha: float = Field(default=1.092, ge=0)
    """Over-confidence weight of confidence calibration."""
    cc_beta: float = Field(default=0.728, ge=0)
    """Under-confidence weight of confidence calibration."""
    min_ordinal_flip_grades: int = Field(default=2, ge=1)

    @property
    def cache_path(self) -> Path:
        return self.data_dir / "cache.sqlite3"
