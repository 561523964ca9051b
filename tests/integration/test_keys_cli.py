"""``faithjudge keys create|list|revoke``: listing never shows a key; a revoked key gets 401."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import anyio
import pytest
from faithjudge.api.keys import KeyRing, create_key, hash_key, list_keys, revoke_key
from faithjudge.cli.main import app
from faithjudge.errors import UserInputError
from faithjudge.settings import Settings
from typer.testing import CliRunner

from tests.fixtures_service import running_app


def _cli(*args: object) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["keys", *(str(a) for a in args)])
    return result.exit_code, result.stdout, result.stderr


def _create(data_dir: Path, tenant: str) -> str:
    code, out, _ = _cli("create", "--tenant", tenant, "--data-dir", data_dir)
    assert code == 0
    return out.strip()


def test_list_shows_every_key_without_its_secret_and_revoke_marks_one(tmp_path: Path) -> None:
    data = tmp_path / "data"
    alpha, beta = _create(data, "alpha"), _create(data, "beta")

    code, out, _ = _cli("list", "--data-dir", data)
    assert code == 0
    header, *rows = out.splitlines()
    assert header.split() == ["id", "prefix", "tenant", "created", "revoked"]
    assert len(rows) == 2
    for key, row in zip((alpha, beta), rows, strict=True):
        cells = row.split()
        assert cells[0] == hash_key(key)[:12] and cells[1] == key[:7]
        assert cells[3].endswith("Z") and cells[4] == "-"
        assert key not in out and hash_key(key) not in out
    assert [row.split()[2] for row in rows] == ["alpha", "beta"]

    alpha_id = rows[0].split()[0]
    code, _, err = _cli("revoke", alpha_id, "--data-dir", data)
    assert code == 0 and f"key {alpha_id} of tenant 'alpha' revoked" in err
    code, out, _ = _cli("list", "--data-dir", data)
    revoked = {row.split()[2]: row.split()[4] for row in out.splitlines()[1:]}
    assert revoked["alpha"].endswith("Z") and revoked["beta"] == "-"

    code, _, err = _cli("revoke", alpha_id, "--data-dir", data)
    assert code == 0 and "already revoked" in err
    keys_file = data / "api_keys.json"
    assert stat.S_IMODE(os.stat(keys_file).st_mode) == 0o600


@pytest.mark.parametrize(
    ("key_id", "message"),
    [("ffffffffffff", "is no key"), ("ab", "too short"), ("", "too short")],
)
def test_revoke_names_an_unknown_id(tmp_path: Path, key_id: str, message: str) -> None:
    data = tmp_path / "data"
    key = _create(data, "alpha")
    code, _, err = _cli("revoke", key_id, "--data-dir", data)
    assert code == 3
    assert message in err and hash_key(key)[:12] in err  # the ids there are, to pick from
    assert "Traceback" not in err


def test_revoke_refuses_an_ambiguous_id(tmp_path: Path) -> None:
    path = tmp_path / "api_keys.json"
    entries = [
        {"sha256": "abcdef" + "0" * 58, "tenant": "a"},
        {"sha256": "abcdef" + "1" * 58, "tenant": "b"},
    ]
    path.write_text(json.dumps({"keys": entries}))
    with pytest.raises(UserInputError, match="matches several keys"):
        revoke_key(path, "abcdef")
    info, now = revoke_key(path, "abcdef1")
    assert now and info.tenant == "b"
    assert [k.revoked_at is not None for k in list_keys(path)] == [False, True]


def test_list_of_no_keys_file_says_so(tmp_path: Path) -> None:
    code, out, err = _cli("list", "--data-dir", tmp_path / "empty")
    assert code == 0 and out == "" and "no keys in" in err


def test_the_service_refuses_a_revoked_key_with_401(tmp_path: Path) -> None:
    data = tmp_path / "data"
    keys_file = data / "api_keys.json"
    alpha, beta = create_key(keys_file, "alpha"), create_key(keys_file, "beta")

    async def check() -> None:
        async with running_app(Settings(data_dir=data)) as (app_, client):

            async def status(key: str) -> int:
                bearer = {"Authorization": f"Bearer {key}"}
                response = await client.get("/v1/jobs", headers=bearer)
                if response.status_code == 401:
                    assert response.headers["www-authenticate"] == "Bearer"
                    assert response.json()["detail"] == "this API key was revoked"
                return response.status_code

            ring: KeyRing = app_.state.faithjudge.keys
            assert await status(alpha) == 200 and await status(beta) == 200
            revoke_key(keys_file, hash_key(alpha)[:12])
            ring.refresh(force=True)  # the service re-reads the file within a second anyway
            assert await status(alpha) == 401
            assert await status(beta) == 200
            # every key revoked: the service stays closed, it does not fall back to dev mode
            revoke_key(keys_file, hash_key(beta)[:12])
            ring.refresh(force=True)
            assert ring.configured
            assert await status(beta) == 401
            anonymous = await client.get("/v1/jobs")
            assert anonymous.status_code == 401

    anyio.run(check)


def test_a_file_of_only_revoked_keys_closes_a_fresh_service(tmp_path: Path) -> None:
    keys_file = tmp_path / "api_keys.json"
    key = create_key(keys_file, "alpha")
    revoke_key(keys_file, hash_key(key)[:12])
    ring = KeyRing.from_settings(Settings(data_dir=tmp_path))
    assert ring.configured and ring.tenant_for(key) is None and ring.is_revoked(key)
