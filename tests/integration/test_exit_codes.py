"""The exit codes of ``faithjudge score``, one table for every command (``ExitCode``).

A CI reads only the exit code: an empty input, an unreadable file, a dead judge and a run where
every call failed must never exit 0. A judge that refuses connections, rejects the key or does
not know the model stops the run in a few calls with the real cause.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from faithjudge.cli.common import ExitCode
from faithjudge.cli.main import app
from faithjudge.pipeline.runtime import FAIL_FAST_AFTER
from typer.testing import CliRunner

from tests.fakes.judge_server import FakeJudge, FakeJudgeConfig, run_fake_judge

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "demo.jsonl"
DEMO_JUDGE = ROOT / "examples" / "demo_judge.jsonl"


def _score(tmp_path: Path, source: Path, *args: str, env: dict[str, str] | None = None):
    out = tmp_path / "out.jsonl"
    argv = ["score", str(source), "-o", str(out), "--no-progress", "--data-dir", str(tmp_path)]
    return CliRunner().invoke(app, [*argv, *args], env=env), out


def _lines(path: Path) -> list[dict]:
    return [orjson.loads(x) for x in path.read_bytes().splitlines()] if path.exists() else []


def test_a_scored_run_exits_0(tmp_path: Path) -> None:
    result, out = _score(tmp_path, DEMO, "--judge", f"replay:{DEMO_JUDGE}")
    assert result.exit_code == ExitCode.OK == 0, result.output
    assert len(_lines(out)) == len(DEMO.read_text().splitlines())


@pytest.mark.parametrize("content", ["", "\n\n   \n"])
def test_an_empty_input_exits_4(tmp_path: Path, content: str) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text(content)
    result, _ = _score(tmp_path, source)
    assert result.exit_code == ExitCode.NOTHING_SCORED == 4, result.output
    assert "holds no request line" in result.output


def test_no_readable_line_exits_4_with_one_error_line_each(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text('not json\n{"cot": "x"}\n[1]\n')
    result, out = _score(tmp_path, source)
    assert result.exit_code == 4, result.output
    assert "no line of the input is a readable request" in " ".join(result.output.split())
    assert [line["line"] for line in _lines(out)] == [1, 2, 3]


def test_every_judge_call_failing_exits_4(tmp_path: Path) -> None:
    # the replay file has no record for these items: every grade ends ``transport``
    empty_judge = tmp_path / "judge.jsonl"
    empty_judge.write_text(
        '{"item_id": "nobody", "metric": "causal_attribution", "response": {}}\n'
    )
    result, out = _score(tmp_path, DEMO, "--judge", f"replay:{empty_judge}")
    assert result.exit_code == 4, result.output
    said = " ".join(result.output.split())
    assert "not one grade is valid (KB misses 1, transport failures 17)" in said
    assert len(_lines(out)) == len(DEMO.read_text().splitlines())  # every line still answered


def _replayed(tmp_path: Path, valid: int) -> Path:
    """The demo's judge outputs, all but the first ``valid`` of them off the schema."""
    records = [orjson.loads(x) for x in DEMO_JUDGE.read_bytes().splitlines() if x.strip()]
    for record in records[valid:]:
        record["response"] = record["response"] | {"score": 7}
    path = tmp_path / "judge.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path


def test_a_run_with_no_valid_grade_exits_4(tmp_path: Path) -> None:
    """Every grade judged, and every one off the schema: nothing to stand on."""
    result, out = _score(tmp_path, DEMO, "--judge", f"replay:{_replayed(tmp_path, 0)}")
    assert result.exit_code == ExitCode.NOTHING_SCORED, result.output
    text = " ".join(result.output.split())
    assert "not one grade is valid (" in text and "schema 17" in text
    assert all(m["status"] != "valid" for x in _lines(out) for m in x["metrics"].values())


def test_one_valid_grade_is_enough_to_exit_0(tmp_path: Path) -> None:
    result, out = _score(tmp_path, DEMO, "--judge", f"replay:{_replayed(tmp_path, 1)}")
    assert result.exit_code == ExitCode.OK, result.output
    statuses = [m["status"] for x in _lines(out) for m in x["metrics"].values()]
    assert statuses.count("valid") == 1


def test_ctrl_c_exits_5_and_keeps_what_was_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import faithjudge.event_loop

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(faithjudge.event_loop, "run_async", interrupted)
    result, _ = _score(tmp_path, DEMO, "--judge", f"replay:{DEMO_JUDGE}")
    assert result.exit_code == ExitCode.STOPPED == 5, result.output
    assert "run again to resume" in " ".join(result.output.split())


@pytest.fixture
def judge() -> Iterator[FakeJudge]:
    with run_fake_judge(FakeJudgeConfig(api_key="sk-right", models=("judge-1",))) as fake:
        yield fake


def _openai_env(base_url: str, key: str = "sk-right") -> dict[str, str]:
    return {
        "OPENAI_BASE_URL": base_url,
        "OPENAI_API_KEY": key,
        "FAITHJUDGE_OPENAI_BASE_URL": "",
        "FAITHJUDGE_OPENAI_API_KEY": "",
        "FAITHJUDGE_RETRY_BASE_S": "0.01",
    }


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
def test_a_refused_connection_stops_the_run_with_the_cause(tmp_path: Path, transport: str) -> None:
    env = _openai_env(f"http://127.0.0.1:{_free_port()}/v1")
    env["FAITHJUDGE_HTTP_TRANSPORT"] = transport
    result, _ = _score(tmp_path, DEMO, "--judge", "openai:judge-1", "--no-cache", env=env)
    text = " ".join(result.output.split())
    assert result.exit_code == ExitCode.UNEVALUABLE == 3, result.output
    assert "connection refused" in text and "ConnectionRefusedError" in text
    assert "timed out" not in text.split("(cause")[0]
    assert f"after {FAIL_FAST_AFTER} calls failed in a row" in text


def test_a_wrong_key_stops_the_run_without_retrying(tmp_path: Path, judge: FakeJudge) -> None:
    env = _openai_env(judge.base_url, key="sk-wrong")
    result, _ = _score(tmp_path, DEMO, "--judge", "openai:judge-1", "--no-cache", env=env)
    assert result.exit_code == 3, result.output
    assert "refused our credentials (HTTP 401)" in " ".join(result.output.split())
    # not retried like a 5xx: a few calls at most, whatever the concurrency
    assert judge.counters.total <= 100 + FAIL_FAST_AFTER


def test_an_unknown_model_stops_the_run(tmp_path: Path, judge: FakeJudge) -> None:
    env = _openai_env(judge.base_url)
    result, _ = _score(
        tmp_path, DEMO, "--judge", "openai:no-such-model", "--no-cache", "--concurrency", "1",
        env=env,
    )  # fmt: skip
    assert result.exit_code == 3, result.output
    text = " ".join(result.output.split())
    assert "model or endpoint not found (HTTP 404)" in text and "no-such-model" in text
    assert judge.counters.total == FAIL_FAST_AFTER  # one call each, no retries


def test_the_right_key_and_model_score(tmp_path: Path, judge: FakeJudge) -> None:
    env = _openai_env(judge.base_url)
    result, out = _score(tmp_path, DEMO, "--judge", "openai:judge-1", "--no-cache", env=env)
    assert result.exit_code == 0, result.output
    assert len(_lines(out)) == len(DEMO.read_text().splitlines())
