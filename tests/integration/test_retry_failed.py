"""``score --retry-failed``: failed lines scored again in place, every other result kept byte for
byte; and ``POST /v1/jobs/{id}/retry`` for a batch's transport failures."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from faithjudge.cli.main import app
from faithjudge.pipeline.runtime import open_scorer
from faithjudge.runners.file_runner import score_file
from faithjudge.settings import Settings
from faithjudge_client import FaithJudgeClient
from faithjudge_client.bodies import BatchRetry
from faithjudge_client.errors import NotFound
from faithjudge_client.lines import ItemResult
from typer.testing import CliRunner

from tests import fixtures_service
from tests.fakes.judge_server import FakeJudgeConfig, run_fake_judge
from tests.fixtures_service import Backend, running_app, serve_in_thread, wait_for_status

pytestmark = pytest.mark.anyio
store_backend = fixtures_service.store_backend

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo.jsonl"


def _demo() -> list[dict[str, Any]]:
    return [json.loads(x) for x in DEMO.read_text(encoding="utf-8").splitlines() if x.strip()]


def _score(*args: object, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(app, ["score", *map(str, args), "--no-progress"], env=env)


def _by_line(path: Path) -> dict[int, bytes]:
    lines = path.read_bytes().splitlines(keepends=True)
    return {orjson.loads(raw)["line"]: raw for raw in lines if raw.strip()}


def _torn_case(tmp_path: Path) -> tuple[Path, list[str]]:
    """Line 2 torn, line 3 without cot, line 4 answered off the options, line 6 outside the KB."""
    demo = _demo()
    off_options = demo[0] | {
        "item_id": "off-options",
        "cot": demo[0]["cot"].replace("<answer>yes</answer>", "<answer>perhaps</answer>"),
    }
    fixed = [
        json.dumps(demo[0]),
        json.dumps(demo[1]),
        json.dumps(demo[2]),
        json.dumps(off_options),
        json.dumps(demo[4]),
        json.dumps(demo[5]),
    ]
    broken = list(fixed)
    broken[1] = fixed[1][: len(fixed[1]) // 2]
    broken[2] = json.dumps({k: v for k, v in demo[2].items() if k != "cot"})
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(broken) + "\n", encoding="utf-8")
    return source, fixed


def test_fixed_lines_are_scored_again_and_no_other_line_changes(tmp_path: Path) -> None:
    source, fixed = _torn_case(tmp_path)
    out = tmp_path / "out.jsonl"
    common = ("--judge", "lexicon:v1", "--data-dir", tmp_path / "data")
    first = _score(source, "-o", out, *common)
    assert first.exit_code == 0, first.output
    before = _by_line(out)
    results = {n: ItemResult.model_validate_json(raw) for n, raw in before.items()}
    assert sorted(results) == [1, 2, 3, 4, 5, 6]
    assert results[2].error is not None and results[2].error.stage == "input"
    assert results[2].item_id is None  # nothing of a torn line can be read
    assert results[3].error is not None and "cot" in results[3].error.detail
    assert results[4].answer_in_options is False and results[4].error is None
    cf = results[6].metrics["clinical_fidelity"]
    assert cf.failure is not None and cf.failure.stage == "kb"

    source.write_text("\n".join(fixed) + "\n", encoding="utf-8")
    # an ordinary resume refuses the fixed torn line, and says what to do
    refused = _score(source, "-o", out, *common)
    assert refused.exit_code == 3, refused.output
    assert "--retry-failed" in refused.output
    assert _by_line(out) == before

    again = _score(source, "-o", out, *common, "--retry-failed")
    assert again.exit_code == 0, again.output
    after = _by_line(out)
    assert sorted(after) == [1, 2, 3, 4, 5, 6]
    for number in (2, 3):
        result = ItemResult.model_validate_json(after[number])
        assert result.error is None, result.error
        assert result.item_id == json.loads(fixed[number - 1])["item_id"]
        assert all(m.status == "valid" for m in result.metrics.values())
    for number in (1, 4, 5, 6):
        assert after[number] == before[number], number
    # results stay in line order, and nothing is left to retry
    assert [orjson.loads(x)["line"] for x in out.read_bytes().splitlines()] == [1, 2, 3, 4, 5, 6]
    rerun = _score(source, "-o", out, *common, "--retry-failed")
    assert rerun.exit_code == 0, rerun.output
    assert _by_line(out) == after
    assert not list(tmp_path.glob(".out.jsonl.*.tmp"))


def test_retry_keeps_the_output_mode_and_a_result_whose_line_is_now_blank(tmp_path: Path) -> None:
    demo = _demo()
    lines = [json.dumps(demo[0]), "{torn", json.dumps(demo[1]), json.dumps(demo[3])]
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    common = ("--judge", "lexicon:v1", "--data-dir", tmp_path / "data")
    assert _score(source, "-o", out, *common).exit_code == 0
    os.chmod(out, 0o640)
    before = _by_line(out)
    # line 2 fixed; line 3 removed, its result stays where it was
    lines[1] = json.dumps(demo[4])
    lines[2] = ""
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = _score(source, "-o", out, *common, "--retry-failed")
    assert result.exit_code == 0, result.output
    after = _by_line(out)
    assert list(after) == [1, 2, 3, 4]
    assert after[1] == before[1] and after[3] == before[3] and after[4] == before[4]
    assert orjson.loads(after[2])["item_id"] == demo[4]["item_id"]
    assert out.stat().st_mode & 0o777 == 0o640


def test_retry_rewrites_the_file_a_linked_output_points_to(tmp_path: Path) -> None:
    demo = _demo()
    lines = [json.dumps(demo[0]), "{torn", json.dumps(demo[1])]
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "runs").mkdir()
    real = tmp_path / "runs" / "results.jsonl"
    link = tmp_path / "results.jsonl"
    link.symlink_to(real)
    common = ("--judge", "lexicon:v1", "--data-dir", tmp_path / "data")
    assert _score(source, "-o", link, *common).exit_code == 0
    lines[1] = json.dumps(demo[4])
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = _score(source, "-o", link, *common, "--retry-failed")
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and link.resolve() == real.resolve()
    assert orjson.loads(_by_line(real)[2])["item_id"] == demo[4]["item_id"]
    assert not [p for p in real.parent.iterdir() if p.name.endswith(".tmp")]


def test_a_retry_whose_lines_are_still_broken_says_so(tmp_path: Path) -> None:
    source, _ = _torn_case(tmp_path)
    out = tmp_path / "out.jsonl"
    common = ("--judge", "lexicon:v1", "--data-dir", tmp_path / "data")
    assert _score(source, "-o", out, *common).exit_code == 0
    before = out.read_bytes()
    result = _score(source, "-o", out, *common, "--retry-failed")
    assert result.exit_code == 4, result.output
    said = " ".join(result.output.split())
    assert "not one of the 2 failed lines scored again is a readable request yet" in said
    assert "no line of the input" not in said
    assert out.read_bytes() == before


def test_a_stopped_retry_says_to_retry_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import faithjudge.event_loop

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    source, _ = _torn_case(tmp_path)
    monkeypatch.setattr(faithjudge.event_loop, "run_async", interrupted)
    result = _score(source, "-o", tmp_path / "out.jsonl", "--retry-failed")
    assert result.exit_code == 5, result.output
    assert "run again with --retry-failed to resume" in " ".join(result.output.split())


def test_retry_refuses_another_inputs_output(tmp_path: Path) -> None:
    source, _ = _torn_case(tmp_path)
    out = tmp_path / "out.jsonl"
    common = ("--judge", "lexicon:v1", "--data-dir", tmp_path / "data")
    assert _score(source, "-o", out, *common).exit_code == 0
    before = out.read_bytes()
    other = tmp_path / "other.jsonl"
    demo = _demo()
    # line 3 failed as item demo-003: another item at its number is another input
    other.write_text(
        "\n".join(json.dumps(d | {"item_id": f"x-{i}"}) for i, d in enumerate(demo)) + "\n",
        encoding="utf-8",
    )
    result = _score(other, "-o", out, *common, "--retry-failed")
    assert result.exit_code == 3, result.output
    assert "another input" in result.output
    assert out.read_bytes() == before


def _fake_settings(base_url: str, tmp_path: Path) -> dict[str, Any]:
    return {
        "judge": "openai:fake-judge",
        "openai_base_url": base_url,
        "openai_api_key": "test-key",
        "timeout_s": 5.0,
        "retry_base_s": 0.0,
        "max_retries": 1,
        "data_dir": tmp_path / "data",
    }


def test_a_judge_down_for_the_first_half_is_retried_until_every_line_is_valid(
    tmp_path: Path,
) -> None:
    demo = _demo()[:5]  # the sixth is outside the KB: never valid
    lines = [json.dumps(d | {"item_id": f"{d['item_id']}-{c}"}) for c in range(2) for d in demo]
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    half = len(lines) // 2

    with run_fake_judge(FakeJudgeConfig(fault="unavailable")) as fake:
        written = 0

        def back_after_half(count: int) -> None:
            nonlocal written
            written += count
            if written >= half:
                fake.config.fault = None

        values = _fake_settings(fake.base_url, tmp_path)

        async def first_run() -> None:
            # one line at a time, so the judge comes back exactly after the first half
            async with open_scorer(Settings(**values, concurrency=1)) as scorer:
                await score_file(scorer, source, out, concurrency=1, progress=back_after_half)

        anyio.run(first_run)
        first = [ItemResult.model_validate_json(x) for x in out.read_bytes().splitlines()]
        down = [r.line for r in first if any(m.status != "valid" for m in r.metrics.values())]
        assert down == list(range(1, half + 1))
        for result in first[:half]:
            assert {m.failure.stage for m in result.metrics.values() if m.failure} == {"transport"}
        kept = _by_line(out)

        env = {f"FAITHJUDGE_{k.upper()}": str(v) for k, v in values.items()}
        result = _score(source, "-o", out, "--retry-failed", env=env)
        assert result.exit_code == 0, result.output

    parsed = [ItemResult.model_validate_json(x) for x in out.read_bytes().splitlines()]
    final = {r.line: r for r in parsed if r.line is not None}
    assert sorted(final) == list(range(1, len(parsed) + 1)) == list(range(1, len(lines) + 1))
    for number, line in final.items():
        assert line.error is None
        assert all(m.status == "valid" for m in line.metrics.values()), number
    after = _by_line(out)
    assert all(after[n] == kept[n] for n in range(half + 1, len(lines) + 1))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--limit", "2", "--sample", "2"], "cannot be combined"),
        (["--limit", "0"], "--limit"),
        (["--sample", "0"], "--sample"),
        (["--retry-failed", "--bogus"], "--bogus"),
    ],
)
def test_usage_errors_exit_3(tmp_path: Path, args: list[str], message: str) -> None:
    result = _score(DEMO, "-o", tmp_path / "o.jsonl", *args)
    assert result.exit_code == 3, result.output
    assert message in result.output
    assert not (tmp_path / "o.jsonl").exists()


# ------------------------------------------------------------------ the batch API


async def test_batch_retry_requeues_transport_failures_only(
    store_backend: Backend, tmp_path: Path
) -> None:
    demo = _demo()[:5]
    body = b"".join(orjson.dumps(d | {"item_id": f"i-{n}"}) + b"\n" for n, d in enumerate(demo))
    with run_fake_judge(FakeJudgeConfig(fault="unavailable")) as fake:
        values = _fake_settings(fake.base_url, tmp_path) | store_backend.overrides
        settings = Settings(**values, concurrency=4)
        async with running_app(settings) as (_, client):
            accepted = await client.post(
                "/v1/jobs", content=body, headers={"content-type": "application/x-ndjson"}
            )
            assert accepted.status_code == 202, accepted.text
            batch = accepted.json()["id"]
            status = await wait_for_status(client, batch)
            assert status["failure_stages"].get("transport", 0) == 15, status

            fake.config.fault = None
            retried = await client.post(f"/v1/jobs/{batch}/retry")
            assert retried.status_code == 202, retried.text
            answer = BatchRetry.model_validate(retried.json())
            assert answer.requeued == 5 and answer.batch.status == "queued"
            status = await wait_for_status(client, batch)
            assert status["status"] == "completed" and status["done"] == 5
            assert status["counts"]["valid"] == 15 and not status["failure_stages"]

            nothing = await client.post(f"/v1/jobs/{batch}/retry")
            assert nothing.status_code == 200 and nothing.json()["requeued"] == 0
            missing = await client.post("/v1/jobs/b_nosuch/retry")
            assert missing.status_code == 404


async def test_batch_retry_of_a_cancelled_batch_is_a_conflict(tmp_path: Path) -> None:
    demo = _demo()[:2]
    body = b"".join(orjson.dumps(d) + b"\n" for d in demo)
    with run_fake_judge(FakeJudgeConfig(latency_s=30.0)) as fake:
        settings = Settings(**_fake_settings(fake.base_url, tmp_path), concurrency=2)
        async with running_app(settings) as (_, client):
            accepted = await client.post(
                "/v1/jobs", content=body, headers={"content-type": "application/x-ndjson"}
            )
            batch = accepted.json()["id"]
            assert (await client.delete(f"/v1/jobs/{batch}")).json()["status"] == "cancelled"
            conflict = await client.post(f"/v1/jobs/{batch}/retry")
            assert conflict.status_code == 409, conflict.text
            assert "cancelled" in conflict.json()["detail"]


def test_sdk_retry_failed(tmp_path: Path) -> None:
    from faithjudge.api.app import create_app

    settings = Settings(data_dir=tmp_path / "data", judge="lexicon:v1")
    with serve_in_thread(create_app(settings)) as url, FaithJudgeClient(url) as client:
        accepted = client.submit_job(b"".join(orjson.dumps(d) + b"\n" for d in _demo()))
        client.wait(accepted.id, timeout=60)
        answer = client.retry_failed(accepted.id)
        assert isinstance(answer, BatchRetry)
        assert answer.requeued == 0 and answer.batch.status == "completed"
        with pytest.raises(NotFound):
            client.retry_failed("b_nosuch")


async def test_batch_retry_on_the_batch_route_sends_the_failed_requests_again(
    tmp_path: Path,
) -> None:
    from tests.fakes.batch_server import run_fake_batches
    from tests.integration.test_fault_matrix import _line

    # the first two attempts of every request of the second line fail: a try and one retry,
    # so it fails for good in the job's first provider phase, and the retry's attempt succeeds
    lines = [_line("clean", "(one)"), _line("flaky", "[[fake:server_error*2]]")]
    body = ("\n".join(lines) + "\n").encode()
    with run_fake_batches() as fake:
        values = _fake_settings(fake.base_url, tmp_path) | {
            "judge": "openai-batch:fake-judge",
            "batch_poll_s": 0.01,
        }
        async with running_app(Settings(**values)) as (_, client):
            accepted = await client.post(
                "/v1/jobs", content=body, headers={"content-type": "application/x-ndjson"}
            )
            batch = accepted.json()["id"]
            status = await wait_for_status(client, batch, within=60)
            assert status["failure_stages"].get("transport") == 3, status
            retried = await client.post(f"/v1/jobs/{batch}/retry")
            assert retried.status_code == 202 and retried.json()["requeued"] == 1
            status = await wait_for_status(client, batch, within=60)
            assert not status["failure_stages"] and status["counts"]["valid"] == 6, status
        assert fake.counters.chat_calls == 0


def test_a_retry_of_an_output_without_failures_says_so(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    common = ("--judge", "lexicon:v1", "--data-dir", tmp_path / "data")
    assert _score(DEMO, "-o", out, *common).exit_code == 0
    before = out.read_bytes()
    again = _score(DEMO, "-o", out, *common, "--retry-failed")
    assert again.exit_code == 0, again.output
    assert "holds no failed line to retry" in " ".join(again.output.split())
    assert out.read_bytes() == before
