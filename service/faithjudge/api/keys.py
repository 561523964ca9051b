"""API keys: hashed at rest, mapped to tenants, with optional per-tenant limits.

The keys file (``api_keys.json`` in the data directory unless configured) holds only sha256
hashes: ``{"keys": [{"sha256": ..., "tenant": ..., "prefix": "fj_ab12", "created_at": ...}],
"tenants": {"TENANT": {"max_active_jobs": 2, ...}}}``. A key's id is the start of its hash
(``faithjudge keys list`` shows it, ``faithjudge keys revoke ID`` marks the entry
``revoked_at``; a revoked key is refused). ``FAITHJUDGE_API_KEYS`` may add keys as JSON
``{"KEY": "TENANT"}``; they are hashed as they are read. The file is re-read when it changes, so
``faithjudge keys create`` and ``revoke`` take effect on a running service. The limits
renamed with the settings they override (``max_active_batches``, ``max_batch_lines``) are still
read under their old names, with a deprecation warning.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from faithjudge.errors import ConfigError, UserInputError
from faithjudge.private_files import private_dir
from faithjudge.settings import RENAMED_SETTINGS, Settings, read_renamed

__all__ = [
    "LIMIT_NAMES",
    "KeyInfo",
    "KeyRing",
    "create_key",
    "hash_key",
    "is_loopback",
    "list_keys",
    "revoke_key",
]

LIMIT_NAMES = ("max_active_jobs", "max_job_lines", "max_body_bytes")
# a tenant's limit overrides the setting of its name: it was renamed with it
_RENAMED_LIMITS = {old: new for old, new in RENAMED_SETTINGS.items() if new in LIMIT_NAMES}
_KEY_PREFIX = "fj_"
_RECHECK_S = 1.0
# The id is this much of the key's sha256: enough to tell keys apart, nothing to guess the key by.
_ID_CHARS = 12


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (IPv4 127/8, IPv6 ::1, mapped forms)."""
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return address.is_loopback or (mapped is not None and mapped.is_loopback)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass
class KeyRing:
    """Key hashes -> tenants; ``configured`` is False when no key exists at all (dev mode).

    Fails closed: once any key has been seen, ``configured`` stays True for the life of the
    process. A keys file deleted or emptied while serving leaves no valid key (every request is
    401), never an open service; an unreadable one raises ``ConfigError`` (503).
    """

    path: Path
    env_hashes: dict[str, str] = field(default_factory=dict)
    _file_hashes: dict[str, str] = field(default_factory=dict)
    _revoked: frozenset[str] = frozenset()
    _limits: dict[str, dict[str, int]] = field(default_factory=dict)
    _mtime: tuple[int, int] | None = None
    _checked: float = 0.0
    _ever_configured: bool = False
    _broken: ConfigError | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> KeyRing:
        env: dict[str, str] = {}
        if settings.api_keys is not None:
            raw = settings.api_keys.get_secret_value()
            try:
                mapping = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise ConfigError(
                    'FAITHJUDGE_API_KEYS must be a JSON object {"KEY": "TENANT", ...}'
                ) from exc
            if not isinstance(mapping, dict) or not all(
                isinstance(k, str) and k and isinstance(v, str) and v for k, v in mapping.items()
            ):
                raise ConfigError("FAITHJUDGE_API_KEYS must map non-empty keys to tenant names")
            env = {hash_key(k): v for k, v in mapping.items()}
        ring = cls(path=settings.keys_path, env_hashes=env)
        ring.refresh(force=True)
        return ring

    @property
    def configured(self) -> bool:
        self.refresh()
        return self._ever_configured

    def tenant_for(self, key: str) -> str | None:
        self.refresh()
        digest = hash_key(key)
        # hashing first means the lookup never compares secret material directly
        return self.env_hashes.get(digest) or self._file_hashes.get(digest)

    def is_revoked(self, key: str) -> bool:
        """True when ``key`` is in the keys file, revoked (and so refused by ``tenant_for``)."""
        self.refresh()
        return hash_key(key) in self._revoked

    def limits_for(self, tenant: str) -> dict[str, int]:
        self.refresh()
        return dict(self._limits.get(tenant, {}))

    def refresh(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._checked < _RECHECK_S:
            if self._broken is not None:
                raise self._broken
            return
        self._checked = now
        self._broken = None
        self._ever_configured |= bool(self.env_hashes)
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            self._file_hashes, self._limits, self._mtime = {}, {}, None
            self._revoked = frozenset()
            return
        except OSError as exc:  # a keys file we cannot even look at: closed, and say why
            self._file_hashes, self._limits = {}, {}
            self._ever_configured = True
            self._broken = ConfigError(f"cannot read the API keys file {self.path}: {exc}")
            raise self._broken from exc
        mtime = (stat.st_mtime_ns, stat.st_size)
        if not force and mtime == self._mtime:
            return
        try:
            self._file_hashes, self._limits, self._revoked = _read_keys_file(self.path)
        except ConfigError as exc:
            # a broken keys file closes the service (503) until it is mended
            self._file_hashes, self._limits, self._mtime = {}, {}, None
            self._ever_configured, self._broken = True, exc
            raise
        self._mtime = mtime
        # a file whose every key is revoked still has keys: it closes the service, never opens it
        self._ever_configured |= bool(self._file_hashes) or bool(self._revoked)


def _read_keys_file(
    path: Path,
) -> tuple[dict[str, str], dict[str, dict[str, int]], frozenset[str]]:
    """The live key hashes -> tenants, the limits per tenant and the revoked hashes."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"cannot read the API keys file {path}: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("keys", []), list):
        raise ConfigError(f"{path}: expected an object with a 'keys' list")
    hashes: dict[str, str] = {}
    revoked: set[str] = set()
    for i, entry in enumerate(data.get("keys", [])):
        if not (
            isinstance(entry, dict)
            and isinstance(entry.get("sha256"), str)
            and len(entry["sha256"]) == 64
            and isinstance(entry.get("tenant"), str)
            and entry["tenant"]
        ):
            raise ConfigError(f"{path}: keys[{i}] needs 'sha256' (64 hex digits) and 'tenant'")
        if entry.get("revoked_at") is not None:
            if not isinstance(entry["revoked_at"], str):
                raise ConfigError(f"{path}: keys[{i}].revoked_at must be a timestamp string")
            revoked.add(entry["sha256"].lower())
            continue
        hashes[entry["sha256"].lower()] = entry["tenant"]
    limits: dict[str, dict[str, int]] = {}
    for tenant, values in (data.get("tenants") or {}).items():
        if not isinstance(values, dict):
            raise ConfigError(f"{path}: tenants.{tenant} must be an object of limits")
        values = _renamed_limits(path, tenant, values)
        for name, value in values.items():
            if name not in LIMIT_NAMES or not isinstance(value, int) or value < 1:
                raise ConfigError(
                    f"{path}: tenants.{tenant}.{name}: expected one of {list(LIMIT_NAMES)} "
                    "with a positive integer"
                )
        limits[tenant] = dict(values)
    return hashes, limits, frozenset(revoked)


def _renamed_limits(path: Path, tenant: str, values: dict[str, Any]) -> dict[str, Any]:
    """A tenant's limits with their deprecated names read as the new ones."""
    try:
        return read_renamed(values, lambda name: f"tenants.{tenant}.{name}", _RENAMED_LIMITS)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def create_key(path: Path, tenant: str) -> str:
    """Add a new key for ``tenant`` to the keys file and return it (it is not stored)."""
    if not tenant or len(tenant) > 200:
        raise ConfigError("the tenant name must have 1 to 200 characters")
    key = _KEY_PREFIX + secrets.token_urlsafe(32)
    data = _load(path)
    data["keys"].append(
        {
            "sha256": hash_key(key),
            "tenant": tenant,
            "prefix": key[:7],
            "created_at": _now(),
        }
    )
    _write_keys_file(path, data)
    return key


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _write_keys_file(path: Path, data: dict[str, Any]) -> None:
    # whole or not at all: a running service may read the file at any moment
    private_dir(path.parent)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2)
        handle.write("\n")
    os.replace(tmp, path)


@dataclass(frozen=True, slots=True)
class KeyInfo:
    """What may be shown of a stored key: never the key, nor its whole hash."""

    id: str
    prefix: str | None
    tenant: str
    created_at: str | None
    revoked_at: str | None


def _info(entry: dict[str, Any]) -> KeyInfo:
    return KeyInfo(
        id=entry["sha256"].lower()[:_ID_CHARS],
        prefix=entry.get("prefix") if isinstance(entry.get("prefix"), str) else None,
        tenant=entry["tenant"],
        created_at=entry.get("created_at") if isinstance(entry.get("created_at"), str) else None,
        revoked_at=entry.get("revoked_at"),
    )


def _load(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {"keys": [], "tenants": {}}
    _read_keys_file(path)  # refuse to read on from a broken file
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    data.setdefault("keys", [])
    return data


def list_keys(path: Path) -> list[KeyInfo]:
    """Every key of the keys file, revoked ones included, in the order they were created."""
    return [_info(entry) for entry in _load(path)["keys"]]


def revoke_key(path: Path, key_id: str) -> tuple[KeyInfo, bool]:
    """Mark the key ``key_id`` revoked; returns it and whether it was revoked just now.

    Raises:
        UserInputError: no key, or more than one, has that id.
    """
    wanted = key_id.strip().lower()
    data = _load(path)
    found = [
        entry for entry in data["keys"] if wanted and entry["sha256"].lower().startswith(wanted)
    ]
    if len(wanted) < 6 or len(found) != 1:
        known = ", ".join(_info(entry).id for entry in data["keys"]) or "none"
        why = "matches several keys" if len(found) > 1 else "is no key"
        if len(wanted) < 6:
            why = "is too short to name one key (give at least 6 characters)"
        raise UserInputError(f"{key_id!r} {why} in {path}; key ids: {known}", field="KEY_ID")
    [entry] = found
    if entry.get("revoked_at") is not None:
        return _info(entry), False
    entry["revoked_at"] = _now()
    _write_keys_file(path, data)
    return _info(entry), True
