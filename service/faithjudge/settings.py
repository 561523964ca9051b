"""Service settings: one ``BaseSettings``, read from ``FAITHJUDGE_*`` variables at entry points.

Settings are built where a process starts (the CLI, the app factory), never at import time.

The fields are what every deployment shares. A part that is plugged in (a judge backend)
declares its own settings as a pydantic model and reads them with ``settings.options(Model)``:
a field ``openai_base_url`` of that model is ``FAITHJUDGE_OPENAI_BASE_URL`` in the environment
or ``Settings(openai_base_url=...)`` in code, exactly like a field of ``Settings``. Until a part
reads them, such values are kept masked (``SecretStr``), so an API key never shows in a repr.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from faithjudge.errors import ConfigError

__all__ = ["RENAMED_SETTINGS", "Settings", "read_renamed"]

_PREFIX = "FAITHJUDGE_"
OptionsT = TypeVar("OptionsT", bound=BaseModel)

RENAMED_SETTINGS = {
    "evaluator": "judge",
    "evaluators": "judges",
    "max_active_batches": "max_active_jobs",
    "max_batch_lines": "max_job_lines",
}
"""Settings that were renamed (old name: new name): deployments and plugins still set them by
the old name, which is read with a deprecation warning (both names at once is an error, never a
silent pick). The per-tenant limits of the API keys file are read through the same table."""

_log = logging.getLogger(__name__)
_warned: set[str] = set()


def _default_data_dir() -> Path:
    return Path.home() / ".faithjudge"


class Settings(BaseSettings):
    """Everything a deployment may change; each field is ``FAITHJUDGE_<NAME>`` in the env."""

    # extra: the settings that plugged-in parts declare (see ``options``)
    model_config = SettingsConfigDict(env_prefix=_PREFIX, extra="allow")

    judge: str = "lexicon:v1"
    """Judge spec ``backend:TARGET``; ``lexicon:v1`` (offline) by default. The backends are
    those registered in ``faithjudge.judges.JUDGES``."""
    judges: str | None = None
    """The judges the REST service offers, comma-separated (``lexicon:v1,openai:gpt-5``); the
    first is the default. Unset, the service offers ``judge`` alone. A job keeps the judge
    it was uploaded under; see ``offered_judges``."""
    data_dir: Path = Field(default_factory=_default_data_dir)
    """Where the response cache, the SQLite job store and the API keys file live."""
    cache: bool = True
    """Cache judge responses (content-addressed; validation reruns on every read)."""
    concurrency: int = Field(default=100, ge=1, le=10_000)
    """Maximum judge calls in flight."""
    prompt_set: str = "v2"
    knowledge_base: str = "cxr_vqa"

    timeout_s: float = Field(default=60.0, gt=0)
    """Seconds a judge call may stay silent (no byte from the server) before it times out and
    is retried. Slow replies are streamed, so this bounds the wait for the next token, not a
    reply's length; it also bounds the wait of a call queued behind others on the server."""
    max_retries: int = Field(default=5, ge=0, le=20)
    judge_outage_s: float = Field(default=300.0, gt=0)
    """Seconds a run waits for a judge that stopped answering (connection refused or lost, a
    gateway without its backend) before it stops (exit 3) with its unanswered lines unwritten,
    so that the same command run again scores them. Calls meanwhile hold, and none counts as a
    failed grade. The service waits without a bound (its status and ``/readyz`` say so)."""
    retry_base_s: float = Field(default=1.0, ge=0)
    temperature: float = 0.0
    seed: int | None = 0
    max_tokens: int = Field(default=1024, ge=16)
    """Most tokens a judge reply may hold; a reply cut there (``finish_reason: length``) fails
    verification as truncated, and the failure says so."""
    response_format: Literal["auto", "json_schema", "json_object+schema", "json_object", "none"] = (
        "auto"
    )
    """What the judge is asked to answer in: ``auto`` tries ``json_schema``, then
    ``json_object`` with the schema attached (llama.cpp), plain ``json_object``, then none,
    moving on once per server when it refuses one; any other value forces that format."""

    batch_poll_s: float = Field(default=5.0, gt=0)
    """First wait between polls of the ``openai-batch`` route (grows while nothing changes)."""
    batch_file_max_requests: int = Field(default=50_000, ge=1)
    """Requests per Batch API input file (OpenAI's limit; lower it for a provider with a
    smaller one)."""
    batch_file_max_mb: float = Field(default=200.0, gt=0)
    """Megabytes per Batch API input file (OpenAI's limit)."""
    batch_discount: float = Field(default=0.5, ge=0, le=1)
    """The Batch API's price as a fraction of the live price (0.5 at OpenAI)."""
    price_input_per_mtok: float | None = Field(default=None, ge=0)
    """Live price of a million prompt tokens, for the cost lines of runs and batch runs."""
    price_cached_input_per_mtok: float | None = Field(default=None, ge=0)
    """Live price of a million prompt tokens the provider served from its prompt cache
    (``provenance.tokens.cached``); unset, the input price: no saving is claimed that was not
    configured."""
    price_output_per_mtok: float | None = Field(default=None, ge=0)
    """Live price of a million completion tokens."""

    quote_tolerance: float = Field(default=0.02, ge=0, lt=1)
    """Edits allowed per quote character when locating judge quotes in the CoT."""
    cc_alpha: float = Field(default=1.092, ge=0)
    """Over-confidence weight of confidence calibration."""
    cc_beta: float = Field(default=0.728, ge=0)
    """Under-confidence weight of confidence calibration."""
    min_ordinal_flip_grades: int = Field(default=2, ge=1)

    # ---------------------------------------------------------------- the REST service
    database_url: str | None = None
    """Job store: ``postgresql://...`` for several replicas; unset, a SQLite file
    (``jobs.sqlite3``) in the data directory. The URL schemes are those the job stores
    registered in ``faithjudge.jobs.interface.JOB_STORES`` claim, installed packages' stores
    (``faithjudge.job_stores`` entry points) included."""
    database_schema: str | None = None
    """PostgreSQL schema of the job tables (it must exist); unset, the connection's default."""
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65_535)
    api_keys_file: Path | None = None
    """Hashed API keys (``faithjudge keys create``); unset, ``api_keys.json`` in the data dir."""
    api_keys: SecretStr | None = None
    """Extra keys as JSON ``{"KEY": "TENANT", ...}`` (hashed on load, never stored)."""
    insecure_no_auth: bool = False
    """Allow serving beyond loopback without any API key."""
    max_active_jobs: int = Field(default=8, ge=1)
    """Per tenant: queued or running jobs at once (429 beyond); formerly
    ``FAITHJUDGE_MAX_ACTIVE_BATCHES``, still read with a deprecation warning."""
    max_job_lines: int = Field(default=300_000, ge=1)
    """Per tenant: lines in one job (413 beyond); formerly ``FAITHJUDGE_MAX_BATCH_LINES``."""
    max_body_bytes: int = Field(default=1 << 30, ge=1024)
    """Per tenant: bytes of one job upload (413 beyond, checked while the body streams)."""
    upload_read_timeout_s: float = Field(default=30.0, gt=0)
    """A job upload that sends no byte for this long gets 408 and frees its slot."""
    upload_min_bytes_per_s: int = Field(default=10_000, ge=0)
    """Past ``upload_read_timeout_s``, a job upload slower than this on average gets 408 (a
    body trickled byte by byte holds a slot no longer); 0 turns the check off."""
    max_score_body_bytes: int = Field(default=4 << 20, ge=1024)
    """Bytes of one ``POST /v1/score`` body and of one job line. The default admits every
    text field at its longest, written with JSON's ``\\u`` escapes (12 bytes per character
    outside the BMP): two CoTs and two answers at their limits come to about 2.9 MB."""
    workers: bool = True
    """Run job workers in this process (off: an API-only replica)."""
    claim_size: int = Field(default=200, ge=1)
    """Lines a worker claims at a time."""
    lease_s: float = Field(default=60.0, gt=0)
    """How long a claim holds before another replica may take the lines over."""
    commit_every: int = Field(default=200, ge=1)
    """Results written per commit (or sooner, see ``commit_interval_s``)."""
    commit_interval_s: float = Field(default=0.5, gt=0)

    @field_validator("database_url")
    @classmethod
    def _database_url(cls, url: str | None) -> str | None:
        # which schemes a store exists for is the job-store registry's to say, when it opens
        if not url:
            return None
        scheme, sep, _ = url.partition("://")
        if not sep or not scheme:
            raise ValueError(f"not a database URL: {url!r} (postgresql://USER@HOST/DB)")
        return url

    @field_validator("judges")
    @classmethod
    def _judges(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        names = [name.strip() for name in value.split(",")]
        if any(not name for name in names):
            raise ValueError(f"an empty judge name in {value!r} (lexicon:v1,openai:MODEL)")
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"judge named twice: {', '.join(twice)}")
        return ",".join(names)

    @model_validator(mode="after")
    def _mask_undeclared(self) -> Settings:
        extra = self.__pydantic_extra__
        if extra:
            for name, value in extra.items():
                if not isinstance(value, SecretStr):
                    extra[name] = SecretStr(str(value))
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (
            _RenamedInit(settings_cls, init_settings),
            env_settings,
            _RenamedVariables(settings_cls),
            _UndeclaredVariables(settings_cls),
            dotenv_settings,
            file_secret_settings,
        )

    @classmethod
    def from_overrides(cls, overrides: dict[str, Any]) -> Settings:
        """The environment's settings with ``overrides`` on top; bad values raise ``ConfigError``
        naming the setting (``FAITHJUDGE_CONCURRENCY`` / ``--concurrency``), not a traceback."""
        try:
            return cls(**overrides)
        except ValidationError as exc:
            raise ConfigError("invalid setting: " + _problems(exc)) from None

    def options(self, model: type[OptionsT]) -> OptionsT:
        """The settings a plugged-in part declares as ``model``: each field ``NAME`` from
        ``Settings(NAME=...)`` or ``FAITHJUDGE_<NAME>``, else the model's default.

        Raises:
            ConfigError: a value the model refuses, naming its ``FAITHJUDGE_`` variable.
        """
        extra = self.__pydantic_extra__ or {}
        given = {
            name: value.get_secret_value() if isinstance(value, SecretStr) else value
            for name, value in extra.items()
            if name in model.model_fields
        }
        try:
            return model.model_validate(given)
        except ValidationError as exc:
            raise ConfigError("invalid setting: " + _problems(exc)) from None

    @property
    def offered_judges(self) -> tuple[str, ...]:
        """The judges the service offers, the default first: ``judges``, else
        ``judge`` alone."""
        if self.judges:
            return tuple(self.judges.split(","))
        return (self.judge,) if self.judge else ()

    def token_cost(
        self, prompt: int, completion: int, cached: int = 0, *, batch: bool = False
    ) -> float | None:
        """The price in dollars of ``prompt`` tokens (``cached`` of them from the provider's
        prompt cache) and ``completion`` tokens: live, or with ``batch`` at the Batch API's
        discount (which stacks with the cached-input price); None unless the input and output
        prices are set."""
        if self.price_input_per_mtok is None or self.price_output_per_mtok is None:
            return None
        cached_price = self.price_cached_input_per_mtok
        if cached_price is None:
            cached_price = self.price_input_per_mtok
        cached = min(cached, prompt)
        live = (
            (prompt - cached) * self.price_input_per_mtok
            + cached * cached_price
            + completion * self.price_output_per_mtok
        ) / 1e6
        return live * self.batch_discount if batch else live

    @property
    def cache_path(self) -> Path:
        return self.data_dir / "cache.sqlite3"

    @property
    def job_store_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite+aiosqlite:///{self.data_dir / 'jobs.sqlite3'}"

    @property
    def keys_path(self) -> Path:
        return self.api_keys_file or self.data_dir / "api_keys.json"


def _problems(exc: ValidationError) -> str:
    problems = []
    for error in exc.errors(include_url=False)[:5]:
        name = ".".join(str(part) for part in error["loc"]) or "settings"
        problems.append(f"{name} ({_PREFIX}{name.upper()}): {error['msg']}")
    return "; ".join(problems)


class _UndeclaredVariables(PydanticBaseSettingsSource):
    """``FAITHJUDGE_*`` variables that name no field of ``Settings``: kept as extra values for the
    plugged-in parts that declare them (``Settings.options``); the rest are never read."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        fields = set(self.settings_cls.model_fields)
        found: dict[str, Any] = {}
        for key, value in os.environ.items():
            if key.upper().startswith(_PREFIX):
                name = key[len(_PREFIX) :].lower()
                if name and name not in fields and name not in RENAMED_SETTINGS:
                    found[name] = value
        return found


def read_renamed(
    values: dict[str, Any],
    named: Callable[[str], str],
    renamed: Mapping[str, str] = RENAMED_SETTINGS,
) -> dict[str, Any]:
    """``values`` with each old name of ``renamed`` moved to its new one, warning once per name;
    ``named`` says how the user wrote a setting (a variable, a keyword, a key of a file).

    Raises:
        ConfigError: an old name and its new one are both given.
    """
    out = dict(values)
    for old, new in renamed.items():
        if old not in out:
            continue
        if new in out:
            raise ConfigError(
                f"both {named(new)} and {named(old)} are set: {named(old)} is the deprecated "
                f"name of {named(new)}; keep {named(new)} alone"
            )
        message = f"{named(old)} is deprecated: use {named(new)}"
        warnings.warn(message, DeprecationWarning, stacklevel=2)
        if message not in _warned:  # settings are read more than once per process
            _warned.add(message)
            _log.warning("%s", message)
        out[new] = out.pop(old)
    return out


class _RenamedInit(PydanticBaseSettingsSource):
    """The keyword arguments of ``Settings(...)``, their deprecated names read as the new ones."""

    def __init__(self, settings_cls: type[BaseSettings], inner: PydanticBaseSettingsSource):
        super().__init__(settings_cls)
        self._inner = inner

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        return read_renamed(self._inner(), lambda name: f"Settings({name}=...)")


class _RenamedVariables(PydanticBaseSettingsSource):
    """The variables of renamed settings (``FAITHJUDGE_EVALUATOR``) under their new names; one
    set with its new name too is refused, whichever the environment would have let win."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        given: dict[str, Any] = {}
        for key, value in os.environ.items():
            name = key[len(_PREFIX) :].lower() if key.upper().startswith(_PREFIX) else ""
            if name in RENAMED_SETTINGS or name in RENAMED_SETTINGS.values():
                given[name] = value
        found = read_renamed(given, lambda name: _PREFIX + name.upper())
        return {name: value for name, value in found.items() if name not in given}
