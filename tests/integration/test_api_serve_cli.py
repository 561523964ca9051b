"""``faithjudge serve`` refuses an open bind without keys; ``faithjudge keys create``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from faithjudge.api.keys import hash_key
from faithjudge.cli.main import app
from typer.testing import CliRunner

runner = CliRunner()


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Record what ``uvicorn.run`` would have served instead of serving it."""
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: calls.append({"app": app, **kw}))
    return calls


def test_open_bind_without_keys_is_refused(tmp_path: Path, started: list[dict[str, Any]]) -> None:
    result = runner.invoke(app, ["serve", "--host", "0.0.0.0", "--data-dir", str(tmp_path)])
    assert result.exit_code == 3
    assert "refusing to serve on 0.0.0.0 without API keys" in result.output
    assert started == []


def test_open_bind_with_insecure_flag_or_keys_starts(
    tmp_path: Path, started: list[dict[str, Any]]
) -> None:
    insecure = runner.invoke(
        app, ["serve", "--host", "0.0.0.0", "--data-dir", str(tmp_path), "--insecure-no-auth"]
    )
    assert insecure.exit_code == 0, insecure.output
    assert "NO authentication" in insecure.output
    created = runner.invoke(app, ["keys", "create", "--tenant", "lab", "--data-dir", str(tmp_path)])
    assert created.exit_code == 0
    keyed = runner.invoke(app, ["serve", "--host", "0.0.0.0", "--data-dir", str(tmp_path)])
    assert keyed.exit_code == 0, keyed.output
    assert [c["host"] for c in started] == ["0.0.0.0", "0.0.0.0"]
    assert started[0]["port"] == 8000


def test_loopback_default_needs_no_keys(tmp_path: Path, started: list[dict[str, Any]]) -> None:
    result = runner.invoke(app, ["serve", "--data-dir", str(tmp_path), "--port", "8123"])
    assert result.exit_code == 0, result.output
    assert (started[0]["host"], started[0]["port"]) == ("127.0.0.1", 8123)


def test_keys_create_prints_the_key_once_and_stores_its_hash(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["keys", "create", "--tenant", "lab-a", "--data-dir", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    key = result.stdout.strip().splitlines()[-1]
    assert key.startswith("fj_") and len(key) > 30
    stored = (tmp_path / "api_keys.json").read_text()
    assert key not in stored
    entry = json.loads(stored)["keys"][0]
    assert entry["sha256"] == hash_key(key) and entry["tenant"] == "lab-a"
    assert (tmp_path / "api_keys.json").stat().st_mode & 0o077 == 0
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    bad = runner.invoke(app, ["keys", "create", "--tenant", "x", "--keys-file", str(broken)])
    assert bad.exit_code == 3 and "cannot read the API keys file" in bad.output


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("postgresql://postgres@127.0.0.1:1/test", "cannot open the job store at "
         "postgresql://postgres@127.0.0.1:1/test: ConnectionRefusedError"),
        ("mysql://root@127.0.0.1/test", "unsupported database 'mysql'"),
        ("no-scheme-at-all", "not a database URL"),
    ],
)  # fmt: skip
def test_a_database_that_cannot_be_opened_ends_serve_with_one_line(
    tmp_path: Path, started: list[dict[str, Any]], url: str, message: str
) -> None:
    result = runner.invoke(app, ["serve", "--data-dir", str(tmp_path), "--database-url", url])
    assert result.exit_code == 3, result.output
    assert message in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1
    assert started == []


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--judges", "lexicon:v1,nosuch:x"], "unknown judge 'nosuch:x'"),
        (["--judge", "openai:gpt-x"], "set OPENAI_API_KEY"),
    ],
    ids=["unknown-backend", "missing-key"],
)
def test_a_judge_that_cannot_be_built_ends_serve_with_one_line(
    tmp_path: Path,
    started: list[dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    message: str,
) -> None:
    for name in ("OPENAI_API_KEY", "FAITHJUDGE_OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    result = runner.invoke(app, ["serve", "--data-dir", str(tmp_path), *argv])
    assert result.exit_code == 3, result.output
    assert message in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1
    assert started == []


def test_a_plain_postgresql_url_gets_the_shipped_driver() -> None:
    from faithjudge.jobs.sql.store import driver_url
    from faithjudge.settings import Settings

    settings = Settings(database_url="postgresql://postgres@127.0.0.1:5432/test")
    assert driver_url(settings.job_store_url) == (
        "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
    )
    assert driver_url("postgres://h/db") == "postgresql+asyncpg://h/db"
    assert driver_url("sqlite:////tmp/x.db") == "sqlite+aiosqlite:////tmp/x.db"
    assert driver_url("sqlite+aiosqlite:////tmp/x.db") == "sqlite+aiosqlite:////tmp/x.db"
