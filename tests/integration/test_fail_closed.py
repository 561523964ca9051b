"""The service fails closed: keys stay required, files stay private, outages answer 503.

- Once API keys are configured, deleting or emptying the keys file while serving never opens
  the service: 401 without a valid key (503 while the file is unreadable).
- Without keys, only loopback clients are answered, whatever address the process listens on.
- The job and cache databases, their WAL/SHM files and the data directory are private.
- While the job store is unreachable, the batch endpoints answer 503 with Retry-After and a
  problem+json body naming the cause; the batch finishes once it is back, each line once.
- A SQLite file removed under the running service, or result writes that keep failing while
  reads answer, make it unready (503 from ``/readyz`` naming the cause); uploads to a removed
  file are refused, not accepted into a file nobody will open again.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import httpx
import pytest
from faithjudge.api.keys import create_key
from faithjudge.settings import Settings

from tests import fixtures_service
from tests.fakes.tcp_proxy import tcp_proxy
from tests.fixtures_service import Backend, postgres_backend, running_app, wait_for_status
from tests.integration.test_api_jobs import NDJSON, demo_lines, settings_for, submit

pytestmark = pytest.mark.anyio
__all__ = ["postgres_backend"]  # the fixture, re-exported for pytest


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.mark.parametrize("how", ["deleted", "emptied", "no_keys_left", "garbled"])
async def test_removing_the_keys_while_serving_keeps_the_service_closed(
    tmp_path: Path, how: str
) -> None:
    data_dir = tmp_path / "data"
    keys_file = data_dir / "api_keys.json"
    key = create_key(keys_file, "alpha")
    async with running_app(Settings(data_dir=data_dir)) as (app, client):
        assert (await client.get("/v1/jobs", headers=_bearer(key))).status_code == 200
        assert (await client.get("/v1/jobs")).status_code == 401
        if how == "deleted":
            keys_file.unlink()
        elif how == "emptied":
            keys_file.write_text("")
        elif how == "no_keys_left":
            keys_file.write_text('{"keys": []}\n')
        else:
            keys_file.write_text("{not json")
        app.state.faithjudge.keys._checked = 0.0  # look at the file now, not in a second
        anonymous = await client.get("/v1/jobs")
        posted = await client.post("/v1/jobs", content=demo_lines(1)[0], headers=NDJSON)
        expected = 503 if how in ("emptied", "garbled") else 401
        assert anonymous.status_code == expected, anonymous.text
        assert posted.status_code == expected, posted.text
        assert anonymous.headers["content-type"].startswith("application/problem+json")
        # the old key is gone with the file: nobody gets in
        assert (await client.get("/v1/jobs", headers=_bearer(key))).status_code == expected


async def test_without_keys_only_loopback_clients_are_answered(tmp_path: Path) -> None:
    async with running_app(Settings(data_dir=tmp_path / "data")) as (app, _):
        for client_host, status in (("127.0.0.1", 200), ("::1", 200), ("10.1.2.3", 403)):
            transport = httpx.ASGITransport(app=app, client=(client_host, 40000))
            async with httpx.AsyncClient(transport=transport, base_url="http://fj") as client:
                response = await client.get("/v1/jobs")
                assert response.status_code == status, (client_host, response.text)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_databases_and_the_data_directory_are_private_whatever_the_umask(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "fresh" / "data"
    old = os.umask(0o002)  # a permissive umask: group- and world-readable by default
    try:
        async with running_app(Settings(data_dir=data_dir, concurrency=4)) as (_, client):
            response = await submit(client, demo_lines(3), headers=NDJSON)
            assert response.status_code == 202
            await wait_for_status(client, response.json()["id"])
            # while the service runs, with every database and its WAL/SHM files open
            modes = {p.name: _mode(p) for p in data_dir.iterdir() if p.is_file()}
    finally:
        os.umask(old)
    assert {"jobs.sqlite3", "cache.sqlite3", "jobs.sqlite3-wal", "jobs.sqlite3-shm"} <= set(modes)
    assert {name: oct(mode) for name, mode in modes.items() if mode != 0o600} == {}
    assert _mode(data_dir) == 0o700
    assert _mode(data_dir.parent) == 0o700  # created by us too


async def test_a_job_store_outage_answers_503_and_the_batch_finishes_after_it(
    postgres_backend: Backend, tmp_path: Path
) -> None:
    url = urlsplit(postgres_backend.overrides["database_url"])
    with tcp_proxy(url.hostname or "127.0.0.1", url.port or 5432) as proxy:
        proxied = url._replace(netloc=f"{url.username}@127.0.0.1:{proxy.port}").geturl()
        backend = Backend("postgres", {**postgres_backend.overrides, "database_url": proxied})
        lines = demo_lines(40)
        settings = settings_for(backend, tmp_path, concurrency=4, commit_every=5)
        async with running_app(settings) as (_, client):
            response = await submit(client, lines, headers=NDJSON)
            assert response.status_code == 202, response.text
            job_id = response.json()["id"]

            proxy.stop()
            for method, path in (
                ("GET", f"/v1/jobs/{job_id}"),
                ("GET", "/v1/jobs"),
                ("POST", "/v1/jobs"),
            ):
                content = lines[0] if method == "POST" else None
                down = await client.request(method, path, content=content, headers=NDJSON)
                assert down.status_code == 503, (method, path, down.text)
                assert down.headers["retry-after"] == "5"
                assert down.headers["content-type"].startswith("application/problem+json")
                assert "job store is unreachable" in down.json()["detail"]
            await anyio.sleep(1.5)  # the workers meet the outage too
            proxy.start()

            final = await wait_for_status(client, job_id, within=90)
            assert final["done"] == final["total"] == len(lines)
            results = await client.get(f"/v1/jobs/{job_id}/results")
            numbers = [httpx.Response(200, content=x).json()["line"] for x in
                       results.content.splitlines() if x.strip()]  # fmt: skip
            assert sorted(numbers) == list(range(1, len(lines) + 1))  # each line once


store_backend = fixtures_service.store_backend


async def test_405_lists_every_allowed_method_and_non_json_scores_get_415(tmp_path: Path) -> None:
    async with running_app(Settings(data_dir=tmp_path / "data")) as (_, client):
        response = await client.put("/v1/jobs/b_123")
        assert response.status_code == 405
        assert response.headers["allow"] == "DELETE, GET, HEAD"
        response = await client.delete("/v1/jobs")
        assert response.status_code == 405
        assert response.headers["allow"] == "GET, HEAD, POST"
        for content_type in ("text/plain", "application/x-www-form-urlencoded", None):
            headers = {"content-type": content_type} if content_type else {}
            response = await client.post("/v1/score", content=b'{"a": 1}', headers=headers)
            assert response.status_code == 415, (content_type, response.text)
            assert response.headers["content-type"].startswith("application/problem+json")
        json_utf8 = {"content-type": "application/json; charset=utf-8"}
        ok = await client.post("/v1/score", content=demo_lines(1)[0], headers=json_utf8)
        assert ok.status_code == 200, ok.text


async def test_a_removed_sqlite_file_makes_the_service_unready_and_refuse_uploads(
    tmp_path: Path,
) -> None:
    settings = settings_for(fixtures_service.Backend("sqlite", {}), tmp_path)
    async with running_app(settings) as (_, client):
        assert (await client.get("/readyz")).status_code == 200
        database = next((tmp_path / "data").glob("*.sqlite3"))
        database.unlink()  # as `rm -rf` of the data directory does, under a running service

        ready = await client.get("/readyz")
        assert ready.status_code == 503
        assert "removed or replaced" in ready.json()["checks"]["store"]
        upload = await submit(client, demo_lines(3), headers=NDJSON)
        assert upload.status_code == 503, upload.text  # not a 202 for lines that would be lost
        assert "removed or replaced" in upload.json()["detail"]


async def _readiness_turns(client: httpx.AsyncClient, status: int) -> httpx.Response:
    for _ in range(600):
        response = await client.get("/readyz")
        if response.status_code == status:
            return response
        await anyio.sleep(0.05)
    raise AssertionError(f"/readyz never answered {status}: {response.text}")


async def test_failing_result_writes_make_the_service_unready_until_they_succeed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from faithjudge.jobs.interface import StoreUnavailable

    settings = settings_for(fixtures_service.Backend("sqlite", {}), tmp_path, commit_every=1)
    async with running_app(settings) as (app, client):
        store = app.state.faithjudge.store
        complete = store.complete

        async def refused(*args: object, **kwargs: object) -> None:
            raise StoreUnavailable("the job store is unreachable (disk I/O error)")

        monkeypatch.setattr(store, "complete", refused)
        response = await submit(client, demo_lines(3), headers=NDJSON)
        assert response.status_code == 202, response.text
        ready = await _readiness_turns(client, 503)
        assert "writing results" in ready.json()["checks"]["store"]
        assert "disk I/O error" in ready.json()["checks"]["store"]

        monkeypatch.setattr(store, "complete", complete)
        final = await wait_for_status(client, response.json()["id"], within=30)
        assert final["done"] == 3
        await _readiness_turns(client, 200)
