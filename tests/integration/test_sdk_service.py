"""The SDK (sync and async) against the real app served by uvicorn on loopback.

The service runs the offline lexicon judge with two tenants' API keys, its job store in a
temporary data directory. Each test talks to it only through ``faithjudge_client``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest
from faithjudge.api.app import create_app
from faithjudge.settings import Settings
from faithjudge_client import (
    AsyncFaithJudgeClient,
    AuthError,
    BatchStatus,
    Conflict,
    FaithJudgeClient,
    NotFound,
    PayloadTooLarge,
    RateLimited,
    RetryPolicy,
    ScoreRequest,
    ValidationFailed,
)

from tests.fixtures_service import serve_in_thread

KEY_A, KEY_B = "fj_test_key_tenant_a", "fj_test_key_tenant_b"
QUESTION = "Is there a pleural effusion on the left? (yes or no)"
COT = (
    "<think>\n<step>The left costophrenic angle is blunted by a meniscus-shaped opacity.</step>\n"
    "<step>The right costophrenic angle is sharp ({n}).</step>\n</think>\n<answer>yes</answer>"
)
NO_RETRY = RetryPolicy(max_retries=0)


def request_line(n: int, **overrides: Any) -> dict[str, Any]:
    line = {
        "item_id": f"item-{n}",
        "question": QUESTION,
        "ground_truth": "yes",
        "cot": COT.format(n=n),
        "baseline": {"answer": "no"},
        "modification": {"code": "TB-RAD", "target_answer": "yes"},
    }
    line.update(overrides)
    return line


def write_batch(path: Path, count: int, bad: dict[int, str] | None = None) -> Path:
    """``count`` lines; ``bad`` maps 1-based line numbers to raw text put there instead."""
    bad = bad or {}
    lines = [bad.get(n, json.dumps(request_line(n))) for n in range(1, count + 1)]
    path.write_text("\n".join(lines) + "\n")
    return path


def service_settings(data_dir: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "data_dir": data_dir,
        "api_keys": json.dumps({KEY_A: "tenant-a", KEY_B: "tenant-b"}),
    }
    values.update(overrides)
    return Settings(**values)


@contextmanager
def run_service(settings: Settings) -> Iterator[str]:
    """Serve ``create_app(settings)`` over real HTTP from a thread; yields its base URL."""
    with serve_in_thread(create_app(settings)) as url:
        yield url


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data_dir = tmp_path_factory.mktemp("service-data")
    settings = service_settings(data_dir, max_score_body_bytes=64 * 1024)
    with run_service(settings) as url:
        yield url


@pytest.fixture
def client(service: str) -> Iterator[FaithJudgeClient]:
    with FaithJudgeClient(service, KEY_A) as sdk:
        yield sdk


# ---------------------------------------------------------------- scoring


def test_score_one_request(client: FaithJudgeClient) -> None:
    result = client.score(ScoreRequest.model_validate(request_line(1)))
    assert result.item_id == "item-1"
    assert set(result.metrics) == {"clinical_fidelity", "causal_attribution", "confidence_tone"}
    assert result.provenance is not None and result.provenance.judge == "lexicon:v1"
    assert result.flip is not None and result.flip.value is True  # no -> yes under the hint


def test_score_without_a_baseline_parses_as_an_item_result(client: FaithJudgeClient) -> None:
    line = request_line(2)
    del line["baseline"]
    result = client.score(line)
    assert result.flip is not None and result.flip.value is None


def test_score_of_an_invalid_body_is_validation_failed_naming_the_field(
    client: FaithJudgeClient,
) -> None:
    line = request_line(1)
    del line["ground_truth"]
    with pytest.raises(ValidationFailed) as caught:
        client.score(line)
    assert caught.value.status == 422
    assert any("ground_truth" in (e.field or "") for e in caught.value.errors), caught.value


def test_score_body_over_the_limit_is_payload_too_large(client: FaithJudgeClient) -> None:
    huge = request_line(1, metadata={"blob": "x" * 100_000})
    with pytest.raises(PayloadTooLarge):
        client.score(huge)


# ---------------------------------------------------------------- auth and tenants


def test_missing_and_wrong_keys_are_auth_errors(service: str) -> None:
    with FaithJudgeClient(service, api_key="") as anonymous:
        with pytest.raises(AuthError) as caught:
            anonymous.jobs()
        assert caught.value.status == 401
    with FaithJudgeClient(service, api_key="fj_wrong") as wrong, pytest.raises(AuthError):
        wrong.score(request_line(1))


def test_another_tenants_batch_is_not_found(client: FaithJudgeClient, tmp_path: Path) -> None:
    batch = client.submit_job(write_batch(tmp_path / "in.jsonl", 2))
    with FaithJudgeClient(client.base_url, KEY_B) as other:
        with pytest.raises(NotFound):
            other.job(batch.id)
        with pytest.raises(NotFound):
            list(other.iter_results(batch.id))
        assert batch.id not in {b.id for b in other.iter_jobs()}
    with pytest.raises(NotFound):
        client.job("b_does_not_exist")


# ---------------------------------------------------------------- batches


def test_submit_wait_and_stream_results_with_rejected_lines(
    client: FaithJudgeClient, tmp_path: Path
) -> None:
    source = write_batch(
        tmp_path / "in.jsonl",
        12,
        bad={4: "{not json", 9: json.dumps({"question": QUESTION, "cot": "x"})},
    )
    accepted = client.submit_job(source, name="sdk test")
    assert accepted.accepted == 10
    assert [r.line for r in accepted.rejected] == [4, 9]
    assert accepted.rejected[1].field == "ground_truth"

    seen: list[BatchStatus] = []
    final = client.wait(accepted.id, progress=seen.append, timeout=60)
    assert final.status == "completed" and final.done == final.total == 10
    assert final.rejected == 2 and final.name == "sdk test"
    assert seen and seen[-1] == final
    assert [s.done for s in seen] == sorted(s.done for s in seen)  # progress never goes back

    # one result per uploaded line: the rejected ones as error results at their lines
    results = list(client.iter_results(accepted.id))
    assert [r.line for r in results] == list(range(1, 13))
    assert [r.line for r in results if r.error is not None] == [4, 9]
    scored = [r.item_id for r in results if r.error is None]
    assert scored == [f"item-{n}" for n in range(1, 13) if n not in (4, 9)]
    tail = list(client.iter_result_lines(accepted.id, offset=9))
    assert [json.loads(x)["item_id"] for x in tail] == ["item-10", "item-11", "item-12"]

    out = tmp_path / "results.jsonl"
    assert client.download_results(accepted.id, out) == 12
    assert out.read_bytes().count(b"\n") == 12


def test_following_results_while_the_batch_runs(client: FaithJudgeClient, tmp_path: Path) -> None:
    accepted = client.submit_job(write_batch(tmp_path / "in.jsonl", 30))
    follow = client.iter_results(accepted.id, follow=True, poll_interval=0.05)
    assert [r.item_id for r in follow] == [f"item-{n}" for n in range(1, 31)]
    assert client.job(accepted.id).status == "completed"


def test_wait_by_polling_gives_the_same_final_status(
    client: FaithJudgeClient, tmp_path: Path
) -> None:
    accepted = client.submit_job(write_batch(tmp_path / "in.jsonl", 3))
    seen: list[int] = []
    final = client.wait(
        accepted.id, events=False, poll_interval=0.05, progress=lambda s: seen.append(s.done)
    )
    assert final.status == "completed" and final.done == 3
    assert seen[-1] == 3


def test_a_batch_with_no_valid_line_is_validation_failed_listing_the_lines(
    client: FaithJudgeClient,
) -> None:
    body = b'{"cot": "x"}\nnot json\n'
    with pytest.raises(ValidationFailed) as caught:
        client.submit_job(body)
    assert [e.line for e in caught.value.errors] == [1, 2]


def test_idempotent_submit_returns_the_same_batch_and_conflicts_on_other_bodies(
    client: FaithJudgeClient, tmp_path: Path
) -> None:
    source = write_batch(tmp_path / "in.jsonl", 2)
    first = client.submit_job(source, idempotency_key="sdk-idem-1")
    again = client.submit_job(source, idempotency_key="sdk-idem-1")
    assert again.id == first.id
    with pytest.raises(Conflict):
        client.submit_job(write_batch(tmp_path / "other.jsonl", 3), idempotency_key="sdk-idem-1")


def test_reports_in_three_formats(client: FaithJudgeClient, tmp_path: Path) -> None:
    accepted = client.submit_job(write_batch(tmp_path / "in.jsonl", 4))
    client.wait(accepted.id, timeout=60)
    report = client.report(accepted.id)
    assert isinstance(report, dict) and report
    assert "#" in client.report(accepted.id, "md")
    page = client.report(accepted.id, "html")
    assert "<html" in page.lower()
    # the item explorer carries each listed item's judge details, as the CLI's report does
    data = page.split('id="explorer-data">', 1)[1].split("</script>", 1)[0]
    items = orjson.loads(data)["items"]
    assert len(items) == 4
    assert all(m.get("rationale") for item in items for m in item["metrics"].values()), items[0]


def test_list_pages_and_cancel(service: str, tmp_path: Path) -> None:
    with FaithJudgeClient(service, KEY_B) as sdk:
        ids = [sdk.submit_job(write_batch(tmp_path / f"in{n}.jsonl", 1)).id for n in range(3)]
        page = sdk.jobs(limit=2)
        assert len(page.items) == 2 and page.next_cursor
        listed = [b.id for b in sdk.iter_jobs(page_size=2)]
        assert listed[:3] == ids[::-1]  # newest first
        for job_id in ids:
            sdk.wait(job_id, timeout=60)
        cancelled = sdk.cancel_job(ids[0])
        assert cancelled.id == ids[0]
        assert cancelled.status in ("completed", "cancelled")


def test_service_facts(client: FaithJudgeClient) -> None:
    assert client.health().status == "ok"
    assert client.ready().status == "ready"
    assert client.judge().judge == "lexicon:v1"
    assert any(q.question == QUESTION for q in client.knowledge_base().questions)
    assert any(m.code == "TB-RAD" for m in client.modifications().items)


# ---------------------------------------------------------------- limits


def test_tenant_limit_is_rate_limited_and_cancel_frees_it(tmp_path: Path) -> None:
    settings = service_settings(tmp_path / "data", workers=False, max_active_jobs=1)
    with run_service(settings) as url, FaithJudgeClient(url, KEY_A, retry=NO_RETRY) as sdk:
        first = sdk.submit_job(write_batch(tmp_path / "a.jsonl", 2))
        with pytest.raises(RateLimited) as caught:
            sdk.submit_job(write_batch(tmp_path / "b.jsonl", 2))
        assert caught.value.status == 429
        assert sdk.cancel_job(first.id).status == "cancelled"
        second = sdk.submit_job(write_batch(tmp_path / "b.jsonl", 2))
        assert second.id != first.id


def test_batch_body_over_the_limit_is_payload_too_large(tmp_path: Path) -> None:
    settings = service_settings(tmp_path / "data", workers=False, max_body_bytes=4096)
    with run_service(settings) as url, FaithJudgeClient(url, KEY_A) as sdk:
        with pytest.raises(PayloadTooLarge):
            sdk.submit_job(write_batch(tmp_path / "big.jsonl", 40))
        assert list(sdk.iter_jobs()) == []


# ---------------------------------------------------------------- async client


@pytest.mark.anyio
async def test_async_client_end_to_end(service: str, tmp_path: Path) -> None:
    source = write_batch(tmp_path / "in.jsonl", 6, bad={2: "[]"})
    async with AsyncFaithJudgeClient(service, KEY_A) as sdk:
        one = await sdk.score(request_line(1))
        assert one.item_id == "item-1"
        accepted = await sdk.submit_job(source)
        assert accepted.accepted == 5 and [r.line for r in accepted.rejected] == [2]
        seen: list[int] = []
        final = await sdk.wait(accepted.id, progress=lambda s: seen.append(s.done), timeout=60)
        assert final.status == "completed" and seen[-1] == 5
        lines = [r.line async for r in sdk.iter_results(accepted.id, offset=2)]
        assert lines == [3, 4, 5, 6]
        with pytest.raises(NotFound):
            await sdk.job("b_missing")
    async with AsyncFaithJudgeClient(service, "fj_wrong") as wrong:
        with pytest.raises(AuthError):
            await wrong.job(accepted.id)


@pytest.mark.anyio
async def test_async_client_in_process_through_asgi_transport(tmp_path: Path) -> None:
    import httpx

    app = create_app(service_settings(tmp_path / "data"))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with AsyncFaithJudgeClient("http://app", KEY_A, transport=transport) as sdk:
            assert (await sdk.health()).status == "ok"
            accepted = await sdk.submit_job(write_batch(tmp_path / "in.jsonl", 3))
            final = await sdk.wait(accepted.id, events=False, poll_interval=0.05, timeout=60)
            assert final.status == "completed"
            assert [r.item_id async for r in sdk.iter_results(accepted.id)] == [
                "item-1",
                "item-2",
                "item-3",
            ]
            with pytest.raises(ValidationFailed):
                await sdk.submit_job(b"[]\n")
