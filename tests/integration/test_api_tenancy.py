"""API keys and tenants: 401 without a valid key, 404 for another tenant's batch on every
endpoint, per-tenant limits, and keys never echoed in responses or logs."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import anyio
import httpx
import pytest
from faithjudge.api.keys import create_key, hash_key
from faithjudge.settings import Settings

from tests import fixtures_service
from tests.fakes.judge_server import run_fake_judge
from tests.fixtures_service import Backend, running_app, wait_for_status
from tests.integration.test_api_jobs import NDJSON, demo_lines

pytestmark = pytest.mark.anyio
store_backend = fixtures_service.store_backend

JOB_PATHS = [
    ("GET", "/v1/jobs/{id}"),
    ("GET", "/v1/jobs/{id}/events"),
    ("GET", "/v1/jobs/{id}/results"),
    ("GET", "/v1/jobs/{id}/report"),
    ("DELETE", "/v1/jobs/{id}"),
]
# the deprecated paths of the same routes guard the same way
BATCH_ENDPOINTS = JOB_PATHS + [(m, p.replace("/v1/jobs", "/v1/batches")) for m, p in JOB_PATHS]
PROTECTED = [
    ("POST", "/v1/score"),
    ("POST", "/v1/jobs"),
    ("GET", "/v1/jobs"),
    ("POST", "/v1/batches"),
    ("GET", "/v1/batches"),
    ("GET", "/v1/judge"),
    ("GET", "/v1/knowledge-base"),
    ("GET", "/v1/modifications"),
    *BATCH_ENDPOINTS,
]


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def test_keys_tenants_and_isolation(
    store_backend: Backend, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    data_dir = tmp_path / "data"
    key_a = create_key(data_dir / "api_keys.json", "alpha")
    env_key = "env-secret-key-for-beta-0123456789"
    settings = Settings(
        data_dir=data_dir,
        api_keys=json.dumps({env_key: "beta"}),
        concurrency=8,
        **store_backend.overrides,
    )
    stored = (data_dir / "api_keys.json").read_text()
    assert key_a not in stored and hash_key(key_a) in stored
    seen: list[str] = []

    async with running_app(settings) as (_, client):
        accepted = await client.post(
            "/v1/jobs", content=b"\n".join(demo_lines(3)), headers={**NDJSON, **_bearer(key_a)}
        )
        assert accepted.status_code == 202
        job_id = accepted.json()["id"]
        await wait_for_status(client, job_id, headers=_bearer(key_a))

        for method, path in PROTECTED:
            url = path.format(id=job_id)
            for headers in ({}, _bearer("wrong-key"), {"Authorization": "Basic abc"}):
                response = await client.request(method, url, headers=headers)
                assert response.status_code == 401, (method, url, headers)
                assert response.headers["content-type"] == "application/problem+json"
                assert response.headers["www-authenticate"] == "Bearer"
                seen.append(response.text)

        for method, path in BATCH_ENDPOINTS:
            other = await client.request(method, path.format(id=job_id), headers=_bearer(env_key))
            assert other.status_code == 404, (method, path)
            assert other.headers["content-type"] == "application/problem+json"
            seen.append(other.text)
        listing = await client.get("/v1/jobs", headers=_bearer(env_key))
        assert listing.json()["items"] == []
        mine = await client.get("/v1/jobs", headers=_bearer(key_a))
        assert [b["id"] for b in mine.json()["items"]] == [job_id]
        own = await client.get(f"/v1/jobs/{job_id}/results", headers=_bearer(key_a))
        assert len(own.content.splitlines()) == 3
        seen += [mine.text, own.text]

        # the same idempotency key in two tenants names two different batches
        for key in (key_a, env_key):
            response = await client.post(
                "/v1/jobs",
                content=demo_lines(1)[0],
                headers={**NDJSON, **_bearer(key), "Idempotency-Key": "shared"},
            )
            assert response.status_code == 202
            seen.append(response.text)

        # a key created while the service runs is picked up
        key_c = create_key(data_dir / "api_keys.json", "gamma")
        await _wait_for_key(client, key_c)
        seen.append((await client.get("/metrics")).text)

    for secret in (key_a, env_key, key_c):
        assert all(secret not in text for text in seen)
        assert secret not in caplog.text
        assert hash_key(secret) not in caplog.text


async def _wait_for_key(client: httpx.AsyncClient, key: str) -> None:
    with anyio.fail_after(10):
        while True:
            response = await client.get("/v1/jobs", headers=_bearer(key))
            if response.status_code == 200:
                return
            await anyio.sleep(0.2)


async def test_per_tenant_limits_from_the_keys_file(store_backend: Backend, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    keys_file = data_dir / "api_keys.json"
    small = create_key(keys_file, "small")
    large = create_key(keys_file, "large")
    document = json.loads(keys_file.read_text())
    document["tenants"] = {"small": {"max_active_jobs": 1, "max_job_lines": 2}}
    keys_file.write_text(json.dumps(document))
    settings = Settings(data_dir=data_dir, workers=False, **store_backend.overrides)
    async with running_app(settings) as (_, client):
        three = b"\n".join(demo_lines(3))
        too_many = await client.post(
            "/v1/jobs", content=three, headers={**NDJSON, **_bearer(small)}
        )
        assert too_many.status_code == 413
        ok = await client.post(
            "/v1/jobs", content=b"\n".join(demo_lines(2)), headers={**NDJSON, **_bearer(small)}
        )
        assert ok.status_code == 202
        busy = await client.post(
            "/v1/jobs", content=demo_lines(1)[0], headers={**NDJSON, **_bearer(small)}
        )
        assert busy.status_code == 429
        for _ in range(2):  # the other tenant has the default limits
            response = await client.post(
                "/v1/jobs", content=three, headers={**NDJSON, **_bearer(large)}
            )
            assert response.status_code == 202


async def test_the_response_cache_answers_a_tenant_only_from_its_own_calls(
    tmp_path: Path,
) -> None:
    """One service, one judge, one response cache: alpha's repeat is a cache hit, while beta's
    identical request is asked of the judge again (it is not handed what alpha paid for)."""
    data_dir = tmp_path / "data"
    alpha = _bearer(create_key(data_dir / "api_keys.json", "alpha"))
    beta = _bearer(create_key(data_dir / "api_keys.json", "beta"))
    line = json.loads(demo_lines(1)[0])
    with run_fake_judge() as fake:
        settings = Settings(
            data_dir=data_dir,
            judge="openai:judge-x",
            openai_base_url=fake.base_url,
            openai_api_key="sk-test",
        )
        async with running_app(settings) as (_, client):

            async def score(headers: dict[str, str]) -> int:
                before = fake.counters.total
                response = await client.post("/v1/score", json=line, headers=headers)
                assert response.status_code == 200, response.text
                assert response.json()["metrics"], response.text
                return fake.counters.total - before

            first = await score(alpha)
            assert first > 0
            assert await score(alpha) == 0  # the same tenant: every grade from the cache
            assert await score(beta) == first  # another tenant asks for itself
            assert await score(beta) == 0
