"""The ``openai-batch`` route against the fake Files + Batches API, over real HTTP.

The fault matrix of the live route holds here too: permanent faults end in the stage they
provoke (retryable ones after the whole retry budget of follow-up batches), transient ones end
valid, and no chat-completion call is made. Results equal the live route's; a killed run resumes
without submitting any request twice; a finished run rerun creates no batch.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from itertools import count
from pathlib import Path

import pytest
from faithjudge.cli.main import app
from faithjudge.pipeline.runtime import open_scorer
from faithjudge.provider_batch.file_ledger import BatchLedger, PartWriter
from faithjudge.provider_batch.wire import outcome_of_line, request_line
from faithjudge.runners.file_runner import score_file
from faithjudge.settings import Settings
from faithjudge_client.lines import ItemResult
from typer.testing import CliRunner

from tests.fakes.batch_server import FakeBatchConfig, answer_line, run_fake_batches
from tests.fakes.judge_server import FakeJudgeConfig, run_fake_judge
from tests.integration.test_fault_matrix import PERMANENT, TRANSIENT, _line

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]


def _settings(base_url: str, tmp_path: Path, judge: str = "openai-batch:fake-judge") -> Settings:
    return Settings(
        judge=judge,
        openai_base_url=base_url,
        openai_api_key="test-key",
        timeout_s=10,
        retry_base_s=0.0,
        max_retries=5,
        batch_poll_s=0.01,
        data_dir=tmp_path / "data",
    )


def _results(path: Path) -> dict[str, ItemResult]:
    rows = [ItemResult.model_validate_json(x) for x in path.read_bytes().splitlines()]
    return {r.item_id: r for r in rows if r.item_id}


async def _batch_run(
    settings: Settings, source: Path, out: Path, *, retry_failed: bool = False, **limits: int
):
    from faithjudge.provider_batch.file_route import run_batches

    async with open_scorer(settings) as scorer:
        report = await run_batches(
            scorer, settings, source, limits=limits, output=out, retry_failed=retry_failed
        )
        summary = await score_file(scorer, source, out, retry_failed=retry_failed)
    return report, summary


async def test_fault_matrix_through_the_batch_route(tmp_path: Path) -> None:
    lines = [_line("clean-1", "(one)"), _line("clean-2", "(two)")]
    lines += [_line(f"perm-{fault}", f"[[fake:{fault}]]") for fault in PERMANENT]
    lines += [_line(f"tran-{f}", f"[[fake:{f}*{n}]]") for f, n in TRANSIENT.items()]
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out.jsonl"

    with run_fake_batches() as fake:
        settings = _settings(fake.base_url, tmp_path)
        # small files, so splitting and several concurrent batches are exercised too
        report, summary = await _batch_run(settings, source, out, max_lines=10)
        assert fake.counters.chat_calls == 0
        assert max(fake.counters.file_lines) == 10
        batches_after_first = fake.counters.batches

        # rerun of a finished run: no new file, no new batch, its failures kept
        failed_for_good = report.failed
        assert failed_for_good == 5 * 3  # the five retryable faults, three metrics each
        report2, _ = await _batch_run(settings, source, out)
        assert fake.counters.batches == batches_after_first
        assert report2.staged == 0 and report2.batches_created == 0
        assert report2.kept_failures == failed_for_good == report2.failed
        assert fake.counters.chat_calls == 0

        # a run into another output asks again what failed for good, and nothing else
        again = tmp_path / "again.jsonl"
        report3, _ = await _batch_run(settings, source, again)
        assert report3.staged == failed_for_good and report3.kept_failures == 0
        assert report3.cached == report3.requests - failed_for_good
        assert report3.failed == failed_for_good  # the faults are permanent: failed again
        assert fake.counters.chat_calls == 0

    results = _results(out)
    assert len(results) == len(lines) and summary.scored == len(lines)
    check_fault_matrix(results)
    # a retryable failure was sent once and retried five times, in follow-up batches
    ledger = sqlite3.connect(tmp_path / "data" / "batch_ledger.sqlite3")
    tries = dict(ledger.execute("SELECT state, max(tries) FROM requests GROUP BY state"))
    assert tries["failed"] == 6
    for item in results.values():
        assert item.provenance.judge == "openai-batch:fake-judge"
    assert report.prompt_tokens > 0 and report.completion_tokens > 0
    assert report.batches_created >= 6  # one round per retry at least
    # six submissions in the first run, six again in the run into another output, whose
    # retry budget started afresh
    assert fake.counters.by_custom_id.most_common(1)[0][1] == 12
    assert _results(again) == {k: v for k, v in results.items()}


def check_fault_matrix(results: dict[str, ItemResult]) -> None:
    """Every injected fault ended in its stage, every transient one and clean line valid."""
    stages = Counter(
        m.failure.stage for r in results.values() for m in r.metrics.values() if m.failure
    )
    expected: Counter[str] = Counter()
    for stage in PERMANENT.values():
        expected[stage] += 3
    assert stages == expected
    for fault, stage in PERMANENT.items():
        for name, metric in results[f"perm-{fault}"].metrics.items():
            assert metric.failure is not None and metric.failure.stage == stage, (fault, name)
    assert "batch API" in results["perm-rate_limit"].metrics["confidence_tone"].failure.detail
    for fault in TRANSIENT:
        assert all(m.status == "valid" for m in results[f"tran-{fault}"].metrics.values())
    for name in ("clean-1", "clean-2"):
        assert all(m.status == "valid" for m in results[name].metrics.values())
    assert all(r.provenance.route == "batch" for r in results.values())


def _comparable(result: ItemResult) -> dict:
    data = result.model_dump(mode="json")
    for metric in data["metrics"].values():
        metric.pop("cache_hit")
        metric.pop("attempts")
    # the two fakes listen on different ports: the base URL is part of the settings hash
    for name in ("cache", "attempts", "route", "judge", "judge_settings_sha256",
                 "judge_sha256"):  # fmt: skip
        data["provenance"].pop(name)
    data["provenance"].pop("judge_s", None)  # the live calls' own time; a batch has none
    return data


async def test_batch_results_equal_the_live_routes(tmp_path: Path) -> None:
    lines = [_line(f"item-{i}", f"(case {i})") for i in range(6)]
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(lines) + "\n")
    live_out, batch_out = tmp_path / "live.jsonl", tmp_path / "batch.jsonl"
    with run_fake_judge(FakeJudgeConfig(quote_mode="first_sentence")) as live:
        async with open_scorer(
            _settings(live.base_url, tmp_path / "live", "openai:fake-judge")
        ) as scorer:
            await score_file(scorer, source, live_out)
        sent_live = [r for r in live.requests]
    with run_fake_batches(FakeBatchConfig(quote_mode="first_sentence")) as fake:
        await _batch_run(_settings(fake.base_url, tmp_path / "batch"), source, batch_out)
        input_file = next(p for p in fake.app.root.iterdir() if p.name.startswith("file-"))
        sent_batch = [json.loads(x)["body"] for x in input_file.read_bytes().splitlines()]
    a, b = _results(live_out), _results(batch_out)
    assert {k: _comparable(v) for k, v in a.items()} == {k: _comparable(v) for k, v in b.items()}
    assert all(m.score == 3 for r in b.values() for m in r.metrics.values())
    # the very same bodies went out (the live route may stream: that changes no answer)
    live_streamed = [b for b in sent_live if b.pop("stream", False) and b.pop("stream_options")]
    assert len(live_streamed) <= 1  # the loopback fake proved quick on its first reply
    key = lambda body: json.dumps(body, sort_keys=True)  # noqa: E731
    assert sorted(map(key, sent_live)) == sorted(map(key, sent_batch))


async def test_expired_and_failed_batches(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(_line(f"i-{i}", f"({i})") for i in range(4)) + "\n")
    out = tmp_path / "out.jsonl"
    # the first batch expires whole: every line is resubmitted and then answered
    with run_fake_batches(FakeBatchConfig(expire_batches=1)) as fake:
        report, _ = await _batch_run(_settings(fake.base_url, tmp_path), source, out)
        assert fake.counters.batches == 2 and report.failed == 0
    assert all(m.status == "valid" for r in _results(out).values() for m in r.metrics.values())

    # a failed batch is retried as one that expired: a follow-up answers its requests
    out2 = tmp_path / "out2.jsonl"
    with run_fake_batches(FakeBatchConfig(fail_batches=1)) as fake:
        report, _ = await _batch_run(_settings(fake.base_url, tmp_path / "b"), source, out2)
        assert fake.counters.batches == 2 and report.failed == 0
    assert all(m.status == "valid" for r in _results(out2).values() for m in r.metrics.values())

    # batches that keep failing: after the retry budget the requests are transport failures
    # naming the provider's reason
    out3 = tmp_path / "out3.jsonl"
    with run_fake_batches(FakeBatchConfig(fail_batches=99)) as fake:
        await _batch_run(_settings(fake.base_url, tmp_path / "c"), source, out3)
        assert fake.counters.batches == 6  # the first and five follow-ups
    failures = [m.failure for r in _results(out3).values() for m in r.metrics.values()]
    assert all(f is not None and f.stage == "transport" for f in failures)
    assert all("fake validation failure" in f.detail for f in failures if f)


async def test_part_writer_splits_at_lines_and_bytes(tmp_path: Path) -> None:
    ledger = BatchLedger(tmp_path / "ledger.sqlite3")
    line = request_line("k", {"model": "m", "messages": [{"role": "user", "content": "x" * 100}]})
    writer = PartWriter(ledger, max_lines=3, max_bytes=len(line) * 2 + 1)
    for i in range(5):
        await writer.add(f"k{i}", line)
    await writer.close_part()
    sizes = [p["lines"] for p in await ledger.parts()]
    assert sizes == [2, 2, 1]
    assert all(p["bytes"] <= len(line) * 2 + 1 for p in await ledger.parts())
    writer = PartWriter(ledger, max_lines=2, max_bytes=10**9)
    for i in range(5):
        await writer.add(f"m{i}", line)
    await writer.close_part()
    assert [p["lines"] for p in await ledger.parts()][3:] == [2, 2, 1]
    ledger.close()


def test_output_lines_are_read_strictly() -> None:
    ok = {
        "custom_id": "a",
        "response": {
            "status_code": 200,
            "body": {
                "choices": [{"message": {"content": "{}"}}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1},
            },
        },
    }
    assert outcome_of_line(json.dumps(ok).encode()).response.usage.prompt_tokens == 3
    busy = {
        "custom_id": "b",
        "response": {"status_code": 429, "body": {"error": {"message": "slow"}}},
    }
    outcome = outcome_of_line(json.dumps(busy).encode())
    assert outcome.retryable and outcome.status == 429 and outcome.error == "slow"
    bad = {"custom_id": "c", "response": {"status_code": 400, "body": {}}}
    assert not outcome_of_line(json.dumps(bad).encode()).retryable
    expired = {
        "custom_id": "d",
        "response": None,
        "error": {"code": "batch_expired", "message": "x"},
    }
    assert outcome_of_line(json.dumps(expired).encode()).retryable
    bare = {"custom_id": "f", "response": ok["response"]["body"]}
    assert outcome_of_line(json.dumps(bare).encode()).response is not None
    for raw in (b"{", b"[]", b'{"custom_id": "e"}'):
        with pytest.raises(ValueError):
            outcome_of_line(raw)


def _cli_env(base_url: str, tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FAITHJUDGE_", "OPENAI_"))}
    env.update(
        FAITHJUDGE_OPENAI_BASE_URL=base_url,
        FAITHJUDGE_OPENAI_API_KEY="test-key",
        FAITHJUDGE_DATA_DIR=str(tmp_path / "data"),
        FAITHJUDGE_BATCH_POLL_S="0.05",
        PYTHONPATH=str(ROOT),
    )
    return env


def test_kill_9_mid_run_then_rerun_never_submits_twice(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(_line(f"k-{i}", f"({i})") for i in range(8)) + "\n")
    out = tmp_path / "out.jsonl"
    command = [
        sys.executable,
        "-m",
        "faithjudge.cli.main",
        "score",
        str(source),
        "-o",
        str(out),
        "--judge",
        "openai-batch:fake-judge",
        "--no-progress",
    ]
    ledger_file = tmp_path / "data" / "batch_ledger.sqlite3"
    # each state lasts a second: the first run is killed while its batch is in progress
    with run_fake_batches(FakeBatchConfig(step_s=1.0)) as fake:
        env = _cli_env(fake.base_url, tmp_path)
        first = subprocess.Popen(command, env=env, cwd=ROOT, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while fake.counters.batches == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert fake.counters.batches == 1, "the first run never submitted its batch"
        time.sleep(0.3)
        first.send_signal(signal.SIGKILL)
        first.wait()
        assert not out.exists() or not out.read_text().strip()
        with sqlite3.connect(ledger_file) as db:
            assert db.execute("SELECT count(*) FROM parts WHERE batch_id IS NOT NULL").fetchone()[0]

        second = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, timeout=120)
        assert second.returncode == 0, second.stderr.decode()
        assert fake.counters.batches == 1 and fake.counters.files == 1
        assert max(fake.counters.by_custom_id.values()) == 1
        assert len(fake.counters.by_custom_id) == 24
        assert fake.counters.chat_calls == 0

        third = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, timeout=120)
        assert third.returncode == 0, third.stderr.decode()
        assert fake.counters.batches == 1 and fake.counters.files == 1
    results = _results(out)
    assert len(results) == 8
    assert all(m.status == "valid" for r in results.values() for m in r.metrics.values())


def test_crash_between_create_and_record_adopts_the_batch(tmp_path: Path) -> None:
    """A batch created but never recorded is found again by its metadata tag, not re-created."""
    source = tmp_path / "in.jsonl"
    source.write_text(_line("c-1", "(one)") + "\n")
    with run_fake_batches() as fake:
        settings = _settings(fake.base_url, tmp_path)
        import anyio

        original = BatchLedger.set_submitted
        calls = {"n": 0}

        async def crash_once(self, part, batch_id, state):  # type: ignore[no-untyped-def]
            calls["n"] += 1
            if calls["n"] == 1:
                raise KeyboardInterrupt  # stands in for a kill right after the create call
            return await original(self, part, batch_id, state)

        BatchLedger.set_submitted = crash_once  # type: ignore[method-assign]
        try:
            with pytest.raises(KeyboardInterrupt):
                anyio.run(_batch_run, settings, source, tmp_path / "a.jsonl")
            report, _ = anyio.run(_batch_run, settings, source, tmp_path / "b.jsonl")
        finally:
            BatchLedger.set_submitted = original  # type: ignore[method-assign]
        assert fake.counters.batches == 1 and report.batches_created == 0
    assert all(
        m.status == "valid"
        for r in _results(tmp_path / "b.jsonl").values()
        for m in r.metrics.values()
    )


def test_cancel_after_a_crash_between_create_and_record_cancels_the_unrecorded_batch(
    tmp_path: Path,
) -> None:
    """A kill between the provider's create call and the ledger's record leaves a batch only
    the provider knows of; --cancel finds it by its tag and cancels it, so it is not left
    running (and billed) unseen, and the next run sends its requests again."""
    import anyio
    from faithjudge.provider_batch.file_route import run_batches

    source = tmp_path / "in.jsonl"
    source.write_text(_line("o-1", "(one)") + "\n")

    async def cancel(settings: Settings):  # type: ignore[no-untyped-def]
        async with open_scorer(settings) as scorer:
            return await run_batches(scorer, settings, source, cancel=True)

    with run_fake_batches(FakeBatchConfig(step_s=30.0)) as fake:
        settings = _settings(fake.base_url, tmp_path)
        original = BatchLedger.set_submitted

        async def crash(self, part, batch_id, state):  # type: ignore[no-untyped-def]
            raise KeyboardInterrupt  # stands in for a kill right after the create call

        BatchLedger.set_submitted = crash  # type: ignore[method-assign]
        try:
            with pytest.raises(KeyboardInterrupt):
                anyio.run(_batch_run, settings, source, tmp_path / "a.jsonl")
        finally:
            BatchLedger.set_submitted = original  # type: ignore[method-assign]
        assert [b["status"] for b in fake.app.batches.values()] != ["cancelled"]
        fake.config.step_s = 0.0
        listings = fake.counters.listings
        report = anyio.run(cancel, settings)
        assert report.cancelled == 1
        assert fake.counters.listings == listings + 1  # one listing finds every unrecorded batch
        assert [b["status"] for b in fake.app.batches.values()] == ["cancelled"]
        again, _ = anyio.run(_batch_run, settings, source, tmp_path / "b.jsonl")
        assert fake.counters.batches == 2 and again.batches_created == 1
    assert all(
        m.status == "valid"
        for r in _results(tmp_path / "b.jsonl").values()
        for m in r.metrics.values()
    )


def test_cancel_with_nothing_open_says_so(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text(_line("n-1", "(one)") + "\n")
    with run_fake_batches() as fake:
        env = _cli_env(fake.base_url, tmp_path)
        command = [sys.executable, "-m", "faithjudge.cli.main", "score", str(source), "-o"]
        command += [str(tmp_path / "o.jsonl"), "--judge", "openai-batch:fake-judge"]
        result = subprocess.run(
            [*command, "--no-progress", "--cancel"], env=env, cwd=ROOT, capture_output=True
        )
        assert result.returncode == 0, result.stderr.decode()
        assert "batches cancelled" in result.stderr.decode()  # 0, said rather than left out
        assert fake.counters.batches == 0


def test_cli_export_import_then_score_from_the_cache(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(_line(f"e-{i}", f"({i})") for i in range(3)) + "\n")
    requests = tmp_path / "requests.jsonl"
    answers = tmp_path / "answers.jsonl"
    data = ["--data-dir", str(tmp_path / "data")]
    runner = CliRunner()
    # the fake judge only stands for the server later scoring would reach: it must see no call
    with run_fake_judge() as judge:
        env = {"FAITHJUDGE_OPENAI_BASE_URL": judge.base_url, "FAITHJUDGE_OPENAI_API_KEY": "k"}
        export = ["judge-requests", "export", str(source), "-o", str(requests)]
        result = runner.invoke(app, [*export, "--judge", "openai:judge-x", *data], env=env)
        assert result.exit_code == 0, result.output
        lines = requests.read_bytes().splitlines()
        assert len(lines) == 9
        assert all(json.loads(x)["url"] == "/v1/chat/completions" for x in lines)

        # any engine that answers the file (vLLM's batch runner writes the same format); here
        # the fake's answering, run offline
        with answers.open("wb") as sink:
            for raw in lines:
                answer, _, _ = answer_line(json.loads(raw), Counter(), "none", count())
                sink.write(json.dumps(answer).encode() + b"\n")
            sink.write(b"not json\n")
        result = runner.invoke(app, ["judge-requests", "import", str(answers), *data])
        assert result.exit_code == 0, result.output
        assert "9 answer(s) cached" in result.output and "1 bad line(s)" in result.output

        score = ["score", str(source), "-o", str(tmp_path / "o.jsonl"), "--no-progress"]
        result = runner.invoke(app, [*score, "--judge", "openai:judge-x", *data], env=env)
        assert result.exit_code == 0, result.output
        assert judge.counters.total == 0
        # nothing is left to export
        result = runner.invoke(app, [*export, "--judge", "openai:judge-x", *data], env=env)
        assert result.exit_code == 0 and requests.read_bytes() == b""
    results = _results(tmp_path / "o.jsonl")
    assert len(results) == 3
    assert all(
        m.cache_hit and m.status == "valid" for r in results.values() for m in r.metrics.values()
    )


def test_import_refuses_a_file_with_no_answer(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"no": "custom_id"}\n')
    result = CliRunner().invoke(app, ["judge-requests", "import", str(bad)])
    assert result.exit_code == 4 and "line 1: no custom_id" in result.output
    result = CliRunner().invoke(app, ["judge-requests", "import", str(tmp_path / "missing")])
    assert result.exit_code == 3 and "not found" in result.output


def _export(
    runner: CliRunner, source: Path, out: Path, data: Path, env: dict[str, str] | None = None
):
    """``judge-requests export`` of ``source`` (with an API key unless ``env`` is given)."""
    env = {"FAITHJUDGE_OPENAI_API_KEY": "k"} if env is None else env
    command = ["judge-requests", "export", str(source), "-o", str(out), "--data-dir", str(data)]
    return runner.invoke(app, [*command, "--judge", "openai:judge-x"], env=env)


def test_import_caches_only_answers_with_content(tmp_path: Path) -> None:
    """An answer with no content (``choices: []``, empty content) is a failed request: not
    cached, so scoring asks the judge again instead of failing for good from the cache."""
    source, requests, answers = (tmp_path / n for n in ("in.jsonl", "req.jsonl", "ans.jsonl"))
    source.write_text(_line("c-1", "(one)") + "\n")
    data = tmp_path / "data"
    runner = CliRunner()
    with run_fake_judge() as judge:
        env = {"FAITHJUDGE_OPENAI_BASE_URL": judge.base_url}
        assert _export(runner, source, requests, data, env).exit_code == 0
        lines = [json.loads(x) for x in requests.read_bytes().splitlines()]
        assert len(lines) == 3
        out = [answer_line(x, Counter(), "none", count())[0] for x in lines]
        out[1]["response"]["body"]["choices"] = []
        out[2]["response"]["body"]["choices"][0]["message"]["content"] = ""
        answers.write_text("".join(json.dumps(x) + "\n" for x in out))
        result = runner.invoke(app, ["judge-requests", "import", str(answers), "--data-dir", data])
        assert result.exit_code == 0, result.output
        assert "1 answer(s) cached, 2 failed request(s)" in result.output
        assert "line 2: HTTP 200: the answer carries no message content" in result.output

        score = ["score", str(source), "-o", str(tmp_path / "o.jsonl"), "--no-progress"]
        score += ["--judge", "openai:judge-x", "--data-dir", str(data)]
        result = runner.invoke(app, score, env=env)
        assert result.exit_code == 0, result.output
        assert judge.counters.total == 2  # the two empty answers are asked again
    (item,) = _results(tmp_path / "o.jsonl").values()
    assert all(m.status == "valid" for m in item.metrics.values())
    assert sorted(m.cache_hit for m in item.metrics.values()) == [False, False, True]

    # only failed requests: nothing cached, exit 4
    answers.write_text(json.dumps(out[1]) + "\n")
    result = runner.invoke(app, ["judge-requests", "import", str(answers), "--data-dir", data])
    assert result.exit_code == 4 and "1 failed request(s)" in result.output


def test_import_of_an_empty_file_is_an_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    result = CliRunner().invoke(app, ["judge-requests", "import", str(empty)])
    assert result.exit_code == 4, result.output
    assert "empty.jsonl holds no line" in result.output


def test_export_reports_unreadable_lines_and_refuses_an_input_without_requests(
    tmp_path: Path,
) -> None:
    runner, data, out = CliRunner(), tmp_path / "data", tmp_path / "req.jsonl"
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_text('not json\n{"x": 1}\n\n[1]\n')
    result = _export(runner, garbage, out, data)
    assert result.exit_code == 4, result.output
    assert "line 1: not valid JSON" in result.output and "line 4: expected a JSON" in result.output
    assert "line 2: question: Field required" in result.output
    assert "no line of" in result.output and "garbage.jsonl is a readable request" in result.output
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    result = _export(runner, empty, out, data)
    assert result.exit_code == 4 and "empty.jsonl holds no request line" in result.output

    # a bad line among good ones is reported, the rest exported; a leading BOM is ignored
    mixed = tmp_path / "mixed.jsonl"
    rows = [
        _line("m-1", "(one)").encode(),
        b"oops",
        b"\xef\xbb\xbf" + _line("m-2", "(two)").encode(),
    ]
    mixed.write_bytes(b"\n".join(rows) + b"\n")
    result = _export(runner, mixed, out, data)
    assert result.exit_code == 0, result.output
    assert "line 2: not valid JSON" in result.output and "1 bad line(s)" in result.output
    assert "6 request line(s)" in result.output and len(out.read_bytes().splitlines()) == 6


def test_export_creates_missing_folders_and_names_an_unwritable_output(tmp_path: Path) -> None:
    runner, data = CliRunner(), tmp_path / "data"
    source = tmp_path / "in.jsonl"
    source.write_text(_line("o-1", "(one)") + "\n")
    nested = tmp_path / "jr" / "nodir" / "x.jsonl"
    result = _export(runner, source, nested, data)
    assert result.exit_code == 0, result.output
    assert len(nested.read_bytes().splitlines()) == 3
    for unwritable in (Path("/proc/x.jsonl"), Path("/proc/nodir/x.jsonl"), tmp_path):
        result = _export(runner, source, unwritable, data)
        assert result.exit_code == 3, result.output
        assert f"cannot write {unwritable}" in result.output
        assert isinstance(result.exception, SystemExit)  # a message, not a traceback


def test_export_needs_no_api_key(tmp_path: Path) -> None:
    """Nothing is sent: no OPENAI_API_KEY / OPENAI_BASE_URL, and the same lines as with a key."""
    source = tmp_path / "in.jsonl"
    source.write_text(_line("k-1", "(one)") + "\n")
    runner = CliRunner()
    assert "OPENAI_API_KEY" not in os.environ and "OPENAI_BASE_URL" not in os.environ
    keyless, keyed = tmp_path / "keyless.jsonl", tmp_path / "keyed.jsonl"
    result = _export(runner, source, keyless, tmp_path / "a", {})
    assert result.exit_code == 0, result.output
    result = _export(runner, source, keyed, tmp_path / "b", {"OPENAI_API_KEY": "sk-real"})
    assert result.exit_code == 0, result.output
    assert keyless.read_bytes() == keyed.read_bytes() and len(keyed.read_bytes().splitlines()) == 3
    assert b"sk-" not in keyless.read_bytes() and b"unused" not in keyless.read_bytes()


def test_cli_cancel_leaves_nothing_running(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text(_line("x-1", "(one)") + "\n")
    out = tmp_path / "out.jsonl"
    command = [
        sys.executable,
        "-m",
        "faithjudge.cli.main",
        "score",
        str(source),
        "-o",
        str(out),
        "--judge",
        "openai-batch:fake-judge",
        "--no-progress",
    ]
    with run_fake_batches(FakeBatchConfig(step_s=30.0)) as fake:
        env = _cli_env(fake.base_url, tmp_path)
        first = subprocess.Popen(command, env=env, cwd=ROOT, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while fake.counters.batches == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        first.send_signal(signal.SIGKILL)
        first.wait()
        fake.config.step_s = 0.0
        result = subprocess.run(
            [*command, "--cancel"], env=env, cwd=ROOT, capture_output=True, timeout=120
        )
        assert result.returncode == 0, result.stderr.decode()
        assert "batches cancelled" in result.stderr.decode()
        assert [b["status"] for b in fake.app.batches.values()] == ["cancelled"]
        # the cancelled requests are sent again by the next run
        result = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, timeout=120)
        assert result.returncode == 0, result.stderr.decode()
        assert fake.counters.batches == 2
    assert len(_results(out)) == 1


def test_ctrl_c_leaves_the_batches_running_and_a_rerun_resumes(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text(_line("s-1", "(one)") + "\n")
    out = tmp_path / "out.jsonl"
    command = [sys.executable, "-m", "faithjudge.cli.main", "score", str(source), "-o", str(out),
               "--judge", "openai-batch:fake-judge", "--no-progress"]  # fmt: skip
    with run_fake_batches(FakeBatchConfig(step_s=30.0)) as fake:
        env = _cli_env(fake.base_url, tmp_path)
        # a parent started in the background ignores SIGINT, and children inherit that
        first = subprocess.Popen(
            command,
            env=env,
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        deadline = time.monotonic() + 60
        while fake.counters.batches == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)
        first.send_signal(signal.SIGINT)
        _, stderr = first.communicate(timeout=60)
        assert first.returncode == 5, stderr.decode()  # stopped early
        assert "keep running" in stderr.decode() and "--cancel" in stderr.decode()
        assert [b["status"] for b in fake.app.batches.values()] != ["cancelled"]
        fake.config.step_s = 0.0
        again = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, timeout=120)
        assert again.returncode == 0, again.stderr.decode()
        assert fake.counters.batches == 1
    assert len(_results(out)) == 1


def test_cli_refuses_batch_route_misuse(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text(_line("m-1", "(one)") + "\n")
    score = ["score", str(source), "-o", str(tmp_path / "o.jsonl"), "--no-progress"]
    env = {"FAITHJUDGE_OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    result = CliRunner().invoke(app, [*score, "--judge", "lexicon:v1", "--cancel"], env=env)
    assert result.exit_code == 3 and "--cancel applies" in result.output
    batch = ["--judge", "openai-batch:m", "--no-cache"]
    result = CliRunner().invoke(app, [*score, *batch], env=env)
    assert result.exit_code == 3 and "response cache" in result.output


async def test_progress_reports_the_providers_counts_and_states(tmp_path: Path) -> None:
    from faithjudge.provider_batch.file_route import run_batches
    from faithjudge.provider_batch.runner import BatchProgress

    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(_line(f"p-{i}", f"({i})") for i in range(5)) + "\n")
    seen: list[BatchProgress] = []
    with run_fake_batches() as fake:
        settings = _settings(fake.base_url, tmp_path)
        async with open_scorer(settings) as scorer:
            await run_batches(
                scorer, settings, source, progress=seen.append, limits={"max_lines": 4}
            )
    assert {state for p in seen for state in p.states} >= {"in_progress", "completed"}
    last = seen[-1]
    assert last.total == 15 and last.completed == 15 and last.failed == 0
    assert last.states == {"completed": 4} and last.describe() == "4 completed"


async def test_file_limits_come_from_the_settings(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(_line(f"f-{i}", f"({i})") for i in range(4)) + "\n")
    with run_fake_batches() as fake:
        settings = _settings(fake.base_url, tmp_path).model_copy(
            update={"batch_file_max_requests": 5}
        )
        report, _ = await _batch_run(settings, source, tmp_path / "out.jsonl")
        assert fake.counters.file_lines == [5, 5, 2]
    assert report.parts == 3 and report.answered == 12


async def test_batch_route_files_are_private_whatever_the_umask(tmp_path: Path) -> None:
    """The ledger, its WAL/SHM files and the part files hold every CoT: 0600 files in 0700
    folders under umask 000, inside a data directory that already existed world-writable."""
    data = tmp_path / "data"
    data.mkdir()
    os.chmod(data, 0o777)
    old = os.umask(0)
    try:
        ledger = BatchLedger(data / "batch_ledger.sqlite3")
        line = request_line("k", {"model": "m", "messages": [{"role": "user", "content": "x"}]})
        writer = PartWriter(ledger, max_lines=1, max_bytes=10**6)
        for i in range(2):
            await writer.add(f"k{i}", line)
        await writer.close_part()
        found = sorted(data.rglob("*"))
        modes = {p.relative_to(data).as_posix(): p.stat().st_mode & 0o777 for p in found}
        ledger.close()
    finally:
        os.umask(old)
    assert any(name.endswith("-wal") for name in modes), modes  # the WAL companion was seen
    assert sum(name.startswith("batch-parts/part-") for name in modes) == 2, modes
    loose = {n: oct(m) for n, m in modes.items() if m != (0o700 if (data / n).is_dir() else 0o600)}
    assert not loose, loose
