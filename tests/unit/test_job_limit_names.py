"""The per-tenant job limits under their new names, and their older ``batch`` names.

``max_active_jobs`` and ``max_job_lines`` were ``max_active_batches`` and ``max_batch_lines``,
as settings (``FAITHJUDGE_*``, ``Settings(...)``) and as the keys file's per-tenant limits: the
older names are still read with a deprecation warning, and both names at once are refused.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from faithjudge.api.keys import LIMIT_NAMES, KeyRing
from faithjudge.errors import ConfigError
from faithjudge.settings import Settings


def test_the_limits_go_by_their_job_names() -> None:
    settings = Settings(max_active_jobs=3, max_job_lines=40)
    assert (settings.max_active_jobs, settings.max_job_lines) == (3, 40)
    assert set(LIMIT_NAMES) == {"max_active_jobs", "max_job_lines", "max_body_bytes"}


def test_the_older_variables_set_the_limits_and_warn(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAITHJUDGE_MAX_ACTIVE_BATCHES", "2")
    monkeypatch.setenv("FAITHJUDGE_MAX_BATCH_LINES", "30")
    with pytest.warns(DeprecationWarning) as seen:
        settings = Settings()
    said = {str(warning.message) for warning in seen}
    assert "FAITHJUDGE_MAX_ACTIVE_BATCHES is deprecated: use FAITHJUDGE_MAX_ACTIVE_JOBS" in said
    assert "FAITHJUDGE_MAX_BATCH_LINES is deprecated: use FAITHJUDGE_MAX_JOB_LINES" in said
    assert (settings.max_active_jobs, settings.max_job_lines) == (2, 30)
    assert "max_active_batches" not in (settings.__pydantic_extra__ or {})


def test_an_older_and_a_newer_variable_together_are_refused_naming_both(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FAITHJUDGE_MAX_ACTIVE_JOBS", "2")
    monkeypatch.setenv("FAITHJUDGE_MAX_ACTIVE_BATCHES", "3")
    with pytest.raises(
        ConfigError, match="FAITHJUDGE_MAX_ACTIVE_JOBS and FAITHJUDGE_MAX_ACTIVE_BATCHES"
    ):
        Settings()


def test_the_older_keywords_set_the_limits_and_warn() -> None:
    with pytest.warns(DeprecationWarning, match=r"Settings\(max_batch_lines=...\) is deprecated"):
        assert Settings(max_batch_lines=7).max_job_lines == 7
    with pytest.raises(ConfigError, match=r"Settings\(max_active_jobs=...\) and Settings\(max_a"):
        Settings(max_active_jobs=1, max_active_batches=2)


def _keys_file(tmp_path: Path, limits: dict[str, int]) -> Settings:
    document = {"keys": [{"sha256": "a" * 64, "tenant": "lab"}], "tenants": {"lab": limits}}
    (tmp_path / "api_keys.json").write_text(json.dumps(document))
    return Settings(data_dir=tmp_path)


def test_the_keys_files_older_limit_names_are_read_and_warn(tmp_path: Path) -> None:
    settings = _keys_file(tmp_path, {"max_active_batches": 2, "max_batch_lines": 9})
    with pytest.warns(DeprecationWarning) as seen:
        ring = KeyRing.from_settings(settings)
    said = {str(warning.message) for warning in seen}
    assert "tenants.lab.max_active_batches is deprecated: use tenants.lab.max_active_jobs" in said
    assert ring.limits_for("lab") == {"max_active_jobs": 2, "max_job_lines": 9}


def test_a_keys_file_giving_a_limit_under_both_names_is_refused(tmp_path: Path) -> None:
    settings = _keys_file(tmp_path, {"max_job_lines": 5, "max_batch_lines": 9})
    with pytest.raises(ConfigError) as refused:
        KeyRing.from_settings(settings)
    message = str(refused.value)
    assert str(tmp_path / "api_keys.json") in message
    assert "tenants.lab.max_job_lines and tenants.lab.max_batch_lines" in message
