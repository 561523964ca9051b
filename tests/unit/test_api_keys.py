"""API keys: hashed at rest, from a file or the environment, reloaded when the file changes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from faithjudge.api.keys import KeyRing, create_key, hash_key
from faithjudge.errors import ConfigError
from faithjudge.settings import Settings


def test_keys_from_file_and_environment_map_to_tenants(tmp_path: Path) -> None:
    key = create_key(tmp_path / "api_keys.json", "alpha")
    ring = KeyRing.from_settings(
        Settings(data_dir=tmp_path, api_keys=json.dumps({"env-key": "beta"}))
    )
    assert ring.configured
    assert ring.tenant_for(key) == "alpha"
    assert ring.tenant_for("env-key") == "beta"
    assert ring.tenant_for("nope") is None
    assert ring.tenant_for(hash_key(key)) is None  # the stored hash is not a key


def test_no_keys_means_dev_mode(tmp_path: Path) -> None:
    assert not KeyRing.from_settings(Settings(data_dir=tmp_path)).configured


def test_a_key_added_later_is_picked_up(tmp_path: Path) -> None:
    ring = KeyRing.from_settings(Settings(data_dir=tmp_path))
    key = create_key(tmp_path / "api_keys.json", "late")
    os.utime(tmp_path / "api_keys.json", (1, 1))  # a different mtime, whatever the clock
    ring.refresh(force=True)
    assert ring.tenant_for(key) == "late"


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ("{", "cannot read"),
        ('{"keys": [{"tenant": "a"}]}', "needs 'sha256'"),
        ('{"keys": [], "tenants": {"a": {"max_lines": 3}}}', "expected one of"),
        ('{"keys": [], "tenants": {"a": {"max_active_jobs": 0}}}', "positive integer"),
    ],
)
def test_a_broken_keys_file_is_a_config_error(tmp_path: Path, document: str, message: str) -> None:
    (tmp_path / "api_keys.json").write_text(document)
    with pytest.raises(ConfigError, match=message):
        KeyRing.from_settings(Settings(data_dir=tmp_path))


@pytest.mark.parametrize("value", ["not json", '["k"]', '{"k": ""}'])
def test_bad_environment_keys_are_a_config_error(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError, match="FAITHJUDGE_API_KEYS"):
        KeyRing.from_settings(Settings(data_dir=tmp_path, api_keys=value))


def test_per_tenant_limits_come_from_the_file(tmp_path: Path) -> None:
    path = tmp_path / "api_keys.json"
    create_key(path, "a")
    document = json.loads(path.read_text())
    document["tenants"] = {"a": {"max_job_lines": 5}}
    path.write_text(json.dumps(document))
    ring = KeyRing.from_settings(Settings(data_dir=tmp_path))
    assert ring.limits_for("a") == {"max_job_lines": 5}
    assert ring.limits_for("b") == {}
