"""The jobs API end to end on the offline judge, on SQLite and on PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import orjson
import pytest
from faithjudge.pipeline.request_lines import parse_line
from faithjudge.settings import Settings
from faithjudge_client.lines import ItemResult

from tests import fixtures_service
from tests.fixtures_service import Backend, running_app, wait_for_status

pytestmark = pytest.mark.anyio
store_backend = fixtures_service.store_backend

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo.jsonl"
NDJSON = {"content-type": "application/x-ndjson"}


def demo_lines(count: int) -> list[bytes]:
    """``count`` valid request lines: the demo lines with distinct item ids."""
    base = [json.loads(x) for x in DEMO.read_bytes().splitlines() if x.strip()]
    out = []
    for i in range(count):
        line = dict(base[i % len(base)])
        line["item_id"] = f"item-{i:05d}"
        out.append(orjson.dumps(line))
    return out


def settings_for(backend: Backend, tmp_path: Path, **extra: object) -> Settings:
    values: dict[str, object] = {"data_dir": tmp_path / "data", "concurrency": 16}
    values.update(backend.overrides)
    values.update(extra)
    return Settings(**values)


async def submit(client: httpx.AsyncClient, lines: list[bytes], **kwargs: object) -> httpx.Response:
    return await client.post("/v1/jobs", content=b"\n".join(lines) + b"\n", **kwargs)  # type: ignore[arg-type]


async def test_a_job_is_scored_and_results_come_back_in_line_order(
    store_backend: Backend, tmp_path: Path
) -> None:
    lines = demo_lines(60)
    body = [*lines[:10], b"", b'{"question": 1}', b"{not json", *lines[10:]]
    async with running_app(settings_for(store_backend, tmp_path)) as (_, client):
        response = await submit(client, body, headers=NDJSON, params={"name": "first run"})
        assert response.status_code == 202, response.text
        accepted = response.json()
        assert accepted["status"] == "queued"
        assert accepted["accepted"] == 60
        rejected = {r["line"]: r for r in accepted["rejected"]}
        assert sorted(rejected) == [12, 13]  # the blank line 11 is skipped, as in a JSONL file
        assert rejected[12]["field"] == "question"
        assert "not valid JSON" in rejected[13]["reason"]

        status = await wait_for_status(client, accepted["id"])
        assert status["name"] == "first run"
        assert status["total"] == 60 and status["done"] == 60 and status["pending"] == 0
        assert status["progress"] == 1.0 and status["rejected"] == 2
        assert sum(status["counts"].values()) >= 60
        assert status["counts"]["error"] == 0

        results = await client.get(f"/v1/jobs/{accepted['id']}/results")
        assert results.headers["content-type"].startswith("application/x-ndjson")
        parsed = [ItemResult.model_validate_json(x) for x in results.content.splitlines()]
        # one result per uploaded line: the rejected ones as error results at their lines
        scored = [r for r in parsed if r.error is None]
        assert [r.item_id for r in scored] == [f"item-{i:05d}" for i in range(60)]
        expected_lines = [n for n in range(1, len(body) + 1) if n != 11]
        assert [r.line for r in parsed] == expected_lines
        errors = {r.line: r.error for r in parsed if r.error is not None}
        assert sorted(errors) == [12, 13] and all(e.stage == "input" for e in errors.values())
        tail = await client.get(f"/v1/jobs/{accepted['id']}/results", params={"offset": 57})
        assert [json.loads(x)["item_id"] for x in tail.content.splitlines()] == [
            f"item-{i:05d}" for i in range(55, 60)
        ]
        metrics = (await client.get("/metrics")).text
        assert 'faithjudge_lines_scored_total{source="job"} 60.0' in metrics
        assert "faithjudge_queue_depth 0.0" in metrics
        assert 'faithjudge_http_requests_total{method="POST",route="/v1/jobs",status="202"}' in (
            metrics
        )


async def test_rejections_match_the_file_scorer_messages(
    store_backend: Backend, tmp_path: Path
) -> None:
    bad = [
        b'{"question": "q", "ground_truth": "yes", "cot": "c", "metrics": ["nope"]}',
        b'{"question": "q", "ground_truth": "yes", "cot": 5}',
        b"[1, 2]",
        b'{"question": "q", "ground_truth": "yes", "cot": "c", "extra": true}',
    ]
    async with running_app(settings_for(store_backend, tmp_path)) as (_, client):
        response = await submit(client, [*demo_lines(1), *bad], headers=NDJSON)
        assert response.status_code == 202
        reasons = {r["line"]: r["reason"] for r in response.json()["rejected"]}
    for number, raw in enumerate(bad, start=2):
        error = parse_line(raw, number).error  # type: ignore[union-attr]
        assert error is not None
        assert error.detail == f"line {number}: {reasons[number]}"


async def test_zero_accepted_lines_is_422_listing_every_rejection(
    store_backend: Backend, tmp_path: Path
) -> None:
    async with running_app(settings_for(store_backend, tmp_path)) as (_, client):
        response = await submit(client, [b"{}", b"nope"], headers=NDJSON)
        assert response.status_code == 422
        assert response.headers["content-type"] == "application/problem+json"
        problem = response.json()
        assert [e["line"] for e in problem["errors"]] == [1, 2]
        empty = await client.post("/v1/jobs", content=b"\n\n", headers=NDJSON)
        assert empty.status_code == 422
        listing = await client.get("/v1/jobs")
        assert listing.json()["items"] == []  # nothing half-made is left behind


async def test_multipart_upload_and_idempotency(store_backend: Backend, tmp_path: Path) -> None:
    lines = demo_lines(5)
    body = b"\n".join(lines)
    async with running_app(settings_for(store_backend, tmp_path)) as (_, client):
        first = await client.post(
            "/v1/jobs",
            files={"file": ("job.jsonl", body, "application/x-ndjson")},
            data={"note": "ignored"},
            headers={"Idempotency-Key": "run-42"},
        )
        assert first.status_code == 202, first.text
        again = await client.post(
            "/v1/jobs", content=body, headers={**NDJSON, "Idempotency-Key": "run-42"}
        )
        assert again.status_code == 200
        assert again.json() == first.json()
        other = await client.post(
            "/v1/jobs",
            content=body + b"\n" + lines[0],
            headers={**NDJSON, "Idempotency-Key": "run-42"},
        )
        assert other.status_code == 409
        assert other.headers["content-type"] == "application/problem+json"
        page = (await client.get("/v1/jobs")).json()
        assert [b["id"] for b in page["items"]] == [first.json()["id"]]
        no_file = await client.post("/v1/jobs", files={"other": ("x", body)})
        assert no_file.status_code == 422
        two_files = await client.post(
            "/v1/jobs", files=[("file", ("a.jsonl", body)), ("file", ("b.jsonl", body))]
        )
        assert two_files.status_code == 422, two_files.text
        assert "more than one 'file'" in two_files.json()["detail"]
        page = (await client.get("/v1/jobs")).json()
        assert [b["id"] for b in page["items"]] == [first.json()["id"]]  # nothing half-stored


async def test_wrong_content_type_and_oversized_bodies(
    store_backend: Backend, tmp_path: Path
) -> None:
    settings = settings_for(
        store_backend,
        tmp_path,
        max_body_bytes=20_000,
        max_job_lines=30,
        max_score_body_bytes=4_096,
    )
    line = demo_lines(1)[0]

    async def chunked(data: bytes) -> AsyncIterator[bytes]:
        for start in range(0, len(data), 1000):
            yield data[start : start + 1000]

    async with running_app(settings) as (_, client):
        wrong = await client.post("/v1/jobs", content=line, headers={"content-type": "text/csv"})
        assert wrong.status_code == 415
        padded = [
            orjson.dumps({**json.loads(x), "metadata": {"pad": "p" * 1500}}) for x in demo_lines(15)
        ]
        big = b"\n".join(padded)
        assert len(big) > 20_000
        # no Content-Length: the limit must hold while the body streams
        streamed = await client.post("/v1/jobs", content=chunked(big), headers=NDJSON)
        assert streamed.status_code == 413
        assert "20000 bytes" in streamed.json()["detail"]
        declared = await client.post("/v1/jobs", content=big, headers=NDJSON)
        assert declared.status_code == 413
        too_many = await client.post("/v1/jobs", content=b"\n".join([b"{}"] * 31), headers=NDJSON)
        assert too_many.status_code == 413
        assert "at most 30 lines" in too_many.json()["detail"]
        long_line = await client.post(
            "/v1/jobs", content=line + b"\n" + b'{"cot": "' + b"x" * 5000 + b'"}', headers=NDJSON
        )
        assert long_line.status_code == 202
        assert long_line.json()["rejected"][0]["line"] == 2
        assert "longer than" in long_line.json()["rejected"][0]["reason"]
        score = await client.post(
            "/v1/score",
            content=chunked(b" " * 5000 + line),
            headers={"content-type": "application/json"},
        )
        assert score.status_code == 413
        assert score.headers["content-type"] == "application/problem+json"
        listing = (await client.get("/v1/jobs")).json()["items"]
        assert len(listing) == 1  # only the accepted upload exists


async def test_tenant_limit_on_unfinished_jobs_is_429(
    store_backend: Backend, tmp_path: Path
) -> None:
    settings = settings_for(store_backend, tmp_path, max_active_jobs=2, workers=False)
    async with running_app(settings) as (_, client):
        for _ in range(2):
            assert (await submit(client, demo_lines(2), headers=NDJSON)).status_code == 202
        third = await submit(client, demo_lines(2), headers=NDJSON)
        assert third.status_code == 429
        assert third.headers["retry-after"] == "30"
        page = (await client.get("/v1/jobs")).json()
        await client.delete(f"/v1/jobs/{page['items'][0]['id']}")
        assert (await submit(client, demo_lines(2), headers=NDJSON)).status_code == 202


async def test_a_retry_needs_a_free_job_slot_like_an_upload(tmp_path: Path) -> None:
    from faithjudge.jobs.interface import JobStore
    from faithjudge.jobs.worker import done_line
    from faithjudge_client.lines import Failure

    settings = settings_for(Backend("sqlite", {}), tmp_path, max_active_jobs=1, workers=False)
    async with running_app(settings) as (app, client):
        first = (await submit(client, demo_lines(1), headers=NDJSON)).json()["id"]
        store: JobStore = app.state.faithjudge.store
        held = await store.claim("test-owner", job_ids=[first], limit=1, lease_s=60)
        down = ItemResult(line=held[0].line, error=Failure(stage="transport", detail="refused"))
        await store.complete("test-owner", [done_line(first, held[0].seq, down)])
        second = await submit(client, demo_lines(1), headers=NDJSON)
        assert second.status_code == 202  # the completed job freed the one slot

        refused = await client.post(f"/v1/jobs/{first}/retry")
        assert refused.status_code == 429, refused.text
        assert refused.headers["retry-after"] == "30"
        assert "1 unfinished jobs" in refused.json()["detail"]
        assert (await client.get(f"/v1/jobs/{first}")).json()["status"] == "completed"

        await client.delete(f"/v1/jobs/{second.json()['id']}")
        retried = await client.post(f"/v1/jobs/{first}/retry")
        assert retried.status_code == 202 and retried.json()["requeued"] == 1


async def test_results_while_running_are_the_done_prefix_and_cancel_keeps_them(
    store_backend: Backend, tmp_path: Path
) -> None:
    from faithjudge.jobs.interface import JobStore
    from faithjudge.jobs.worker import done_line
    from faithjudge.pipeline.request_lines import input_error_result

    settings = settings_for(store_backend, tmp_path, workers=False)
    async with running_app(settings) as (app, client):
        accepted = (await submit(client, demo_lines(10), headers=NDJSON)).json()
        job_id = accepted["id"]
        store: JobStore = app.state.faithjudge.store
        ids = await store.active_job_ids()
        claimed = await store.claim("test-owner", job_ids=ids, limit=10, lease_s=60)
        # lines 0, 1, 2 and 5 are done; the prefix a client may read is lines 0-2
        finished = [c for c in claimed if c.seq in (0, 1, 2, 5)]
        await store.complete(
            "test-owner",
            [done_line(c.job_id, c.seq, input_error_result(c.line, "x")) for c in finished],
        )
        status = (await client.get(f"/v1/jobs/{job_id}")).json()
        assert status["status"] == "running" and status["done"] == 4 and status["pending"] == 6
        assert status["failure_stages"] == {"input": 4} and status["counts"]["error"] == 4
        prefix = (await client.get(f"/v1/jobs/{job_id}/results")).content.splitlines()
        assert [json.loads(x)["line"] for x in prefix] == [1, 2, 3]
        resumed = await client.get(f"/v1/jobs/{job_id}/results", params={"offset": 3})
        assert resumed.content == b""

        cancelled = await client.delete(f"/v1/jobs/{job_id}")
        assert cancelled.status_code == 200
        assert cancelled.json()["status"] == "cancelled" and cancelled.json()["pending"] == 0
        after = (await client.get(f"/v1/jobs/{job_id}/results")).content.splitlines()
        assert [json.loads(x)["line"] for x in after] == [1, 2, 3, 6]
        assert await store.claim("other", job_ids=[job_id], limit=10, lease_s=1) == []
        report = await client.get(
            f"/v1/jobs/{job_id}/report", params={"format": "json", "bootstrap": 20}
        )
        assert report.status_code == 200
        assert report.json()["summary"]["lines"] == 4


async def test_events_report_listing_and_configuration(
    store_backend: Backend, tmp_path: Path
) -> None:
    async with running_app(settings_for(store_backend, tmp_path)) as (_, client):
        ids = []
        for _ in range(3):
            ids.append((await submit(client, demo_lines(6), headers=NDJSON)).json()["id"])
        for job_id in ids:
            await wait_for_status(client, job_id)
        events = await client.get(f"/v1/jobs/{ids[0]}/events")
        assert events.headers["content-type"].startswith("text/event-stream")
        blocks = [b for b in events.text.split("\n\n") if b.strip()]
        assert blocks[0].startswith("event: progress\ndata: ")
        assert blocks[-1].startswith("event: end\ndata: ")
        assert json.loads(blocks[-1].split("data: ", 1)[1])["status"] == "completed"

        first = (await client.get("/v1/jobs", params={"limit": 2})).json()
        assert [b["id"] for b in first["items"]] == ids[::-1][:2]
        second = (
            await client.get("/v1/jobs", params={"limit": 2, "cursor": first["next_cursor"]})
        ).json()
        assert [b["id"] for b in second["items"]] == [ids[0]] and second["next_cursor"] is None
        bad_cursor = await client.get("/v1/jobs", params={"cursor": "%%%"})
        assert bad_cursor.status_code == 422

        for fmt, marker in (("md", "# FaithJudge report"), ("html", "<html")):
            report = await client.get(
                f"/v1/jobs/{ids[0]}/report", params={"format": fmt, "bootstrap": 20}
            )
            assert report.status_code == 200 and marker in report.text
            assert "Judge: lexicon:v1" in report.text  # every report names its judge
        judge = (await client.get("/v1/judge")).json()
        assert judge["judge"] == "lexicon:v1" and len(judge["prompt_sha256"]) == 64
        result = ItemResult.model_validate_json(
            (await client.get(f"/v1/jobs/{ids[0]}/results")).content.splitlines()[0]
        )
        assert result.provenance is not None
        assert result.provenance.judge_settings_sha256 == judge["settings_sha256"]
        kb = (await client.get("/v1/knowledge-base")).json()
        assert kb["sha256"] == judge["kb_sha256"] and len(kb["questions"]) > 0
        catalogue = (await client.get("/v1/modifications")).json()
        assert "TB-RAD" in {m["code"] for m in catalogue["items"]}
        assert (await client.get("/readyz")).json()["status"] == "ready"
        missing = await client.get("/v1/jobs/b_doesnotexist/results")
        assert missing.status_code == 404
        assert missing.headers["content-type"] == "application/problem+json"


async def test_score_endpoint_returns_a_verified_result_and_422_names_the_field(
    store_backend: Backend, tmp_path: Path
) -> None:
    line = json.loads(demo_lines(1)[0])
    async with running_app(settings_for(store_backend, tmp_path)) as (_, client):
        ok = await client.post("/v1/score", json=line)
        assert ok.status_code == 200
        result = ItemResult.model_validate_json(ok.content)
        assert result.item_id == "item-00000" and result.metrics
        unflipped = await client.post("/v1/score", json={**line, "baseline": None})
        assert unflipped.json()["flip"] == {"value": None, "reason": "no baseline"}
        assert ItemResult.model_validate_json(unflipped.content).flip is not None
        bad = await client.post("/v1/score", json={**line, "cot": 7, "surprise": 1})
        assert bad.status_code == 422
        fields = {e["field"] for e in bad.json()["errors"]}
        assert {"cot", "surprise"} <= fields
        not_json = await client.post(
            "/v1/score", content=b"{", headers={"content-type": "application/json"}
        )
        assert not_json.status_code == 422
