"""Jobs under ``/v1/jobs``, and the same routes under their deprecated ``/v1/batches`` paths:
the same answers, marked deprecated in the OpenAPI document only."""

from __future__ import annotations

from pathlib import Path

import pytest
from faithjudge.settings import Settings

from tests.fixtures_service import running_app, wait_for_status
from tests.integration.test_api_jobs import NDJSON, demo_lines

pytestmark = pytest.mark.anyio


def _settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data", concurrency=4)


async def test_a_job_uploaded_at_the_old_path_is_the_same_job_at_the_new_one(
    tmp_path: Path,
) -> None:
    async with running_app(_settings(tmp_path)) as (_, client):
        body = b"\n".join(demo_lines(3)) + b"\n"
        accepted = await client.post("/v1/batches", content=body, headers=NDJSON)
        assert accepted.status_code == 202, accepted.text
        job_id = accepted.json()["id"]
        await wait_for_status(client, job_id)

        for suffix in ("", "/results", "/report"):
            new = await client.get(f"/v1/jobs/{job_id}{suffix}")
            old = await client.get(f"/v1/batches/{job_id}{suffix}")
            assert new.status_code == old.status_code == 200, suffix
            assert new.content == old.content, suffix
        listed_new = (await client.get("/v1/jobs")).json()
        listed_old = (await client.get("/v1/batches")).json()
        assert (
            [j["id"] for j in listed_new["items"]]
            == [job_id]
            == [j["id"] for j in listed_old["items"]]
        )

        missing = await client.get("/v1/batches/b_nope")
        assert missing.status_code == 404
        assert missing.json()["detail"] == "no job 'b_nope' for this tenant"
        assert missing.json()["instance"] == "/v1/batches/b_nope"

        # a completed job with no transport failure: nothing queued, the status under both
        # names (SDKs from before the rename require ``batch``)
        for root in ("/v1/jobs", "/v1/batches"):
            retried = await client.post(f"{root}/{job_id}/retry")
            assert retried.status_code == 200, retried.text
            answer = retried.json()
            assert answer["requeued"] == 0
            assert answer["job"] == answer["batch"] and answer["job"]["id"] == job_id


async def test_every_old_path_has_a_new_twin_and_only_the_old_ones_are_deprecated(
    tmp_path: Path,
) -> None:
    async with running_app(_settings(tmp_path)) as (app, _):
        paths = app.openapi()["paths"]
    old = {p: ops for p, ops in paths.items() if p.startswith("/v1/batches")}
    new = {p: ops for p, ops in paths.items() if p.startswith("/v1/jobs")}
    assert len(old) == len(new) == 6
    for path, operations in old.items():
        twin = new[path.replace("/v1/batches", "/v1/jobs")]
        assert set(operations) == set(twin)
        for method, operation in operations.items():
            assert operation["deprecated"] is True
            assert "deprecated" not in twin[method]
            assert operation["responses"] == twin[method]["responses"]
            assert operation.get("parameters") == twin[method].get("parameters")
            assert operation["tags"] == twin[method]["tags"] == ["jobs"]
