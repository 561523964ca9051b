"""``faithjudge submit`` end to end against the real service on loopback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from faithjudge.cli.main import app
from typer.testing import CliRunner

from tests.integration.test_sdk_service import (
    KEY_A,
    run_service,
    service_settings,
    write_batch,
)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with run_service(service_settings(tmp_path_factory.mktemp("submit-data"))) as url:
        yield url


def submit(*args: object, env: dict[str, str] | None = None) -> object:
    return CliRunner().invoke(app, ["submit", *(str(a) for a in args)], env=env)


def test_submit_waits_writes_results_and_report_and_lists_rejected_lines(
    service: str, tmp_path: Path
) -> None:
    source = write_batch(tmp_path / "in.jsonl", 8, bad={3: "{oops", 6: '{"cot": "x"}'})
    out, html = tmp_path / "out" / "results.jsonl", tmp_path / "report.html"
    result = submit(
        source, "--server", service, "--api-key", KEY_A, "-o", out, "--report-html", html
    )
    assert result.exit_code == 0, result.output
    job_id = result.stdout.strip()
    assert job_id.startswith("b_")
    assert "6 lines accepted, 2 rejected" in result.stderr
    rejected_rows = [line for line in result.stderr.splitlines() if "│" in line]
    assert any(" 3 " in row and "JSON" in row for row in rejected_rows), result.stderr
    assert any(" 6 " in row and "question" in row for row in rejected_rows), result.stderr
    assert "completed" in result.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["line"] for r in rows] == list(range(1, 9))  # one result per line
    assert [r["line"] for r in rows if r.get("error")] == [3, 6]
    scored = [r["item_id"] for r in rows if not r.get("error")]
    assert scored == [f"item-{n}" for n in (1, 2, 4, 5, 7, 8)]
    assert "<html" in html.read_text().lower()


def test_more_rejections_than_the_server_lists_are_counted_in_full(
    service: str, tmp_path: Path
) -> None:
    # the upload's answer lists the first 100 rejections; the count must not stop there
    source = write_batch(tmp_path / "in.jsonl", 130, bad={n: "{oops" for n in range(1, 121)})
    result = submit(source, "--server", service, "--api-key", KEY_A, "--no-wait")
    assert result.exit_code == 0, result.output
    said = " ".join(result.stderr.split())
    assert "10 lines accepted, 120 rejected" in said
    assert "120 rejected lines (10 accepted)" in said
    assert "... and 70 more rejected lines" in said


def test_no_wait_prints_only_the_batch_id(service: str, tmp_path: Path) -> None:
    env = {"FAITHJUDGE_URL": service, "FAITHJUDGE_API_KEY": KEY_A}
    result = submit(write_batch(tmp_path / "in.jsonl", 2), "--no-wait", env=env)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip().startswith("b_")
    assert len(result.stdout.strip().splitlines()) == 1


def test_no_valid_line_exits_4_listing_every_line(service: str, tmp_path: Path) -> None:
    source = tmp_path / "bad.jsonl"
    source.write_text('{"cot": "x"}\n[]\n')
    result = submit(source, "--server", service, "--api-key", KEY_A)
    assert result.exit_code == 4, result.output
    assert "2 rejected lines (0 accepted)" in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--api-key", "fj_wrong"], "401"),
        (["--api-key", KEY_A, "--server", "http://127.0.0.1:9"], "ConnectError"),
    ],
)
def test_unusable_server_or_key_exits_3(
    service: str, tmp_path: Path, args: list[str], message: str
) -> None:
    source = write_batch(tmp_path / "in.jsonl", 1)
    server = [] if "--server" in args else ["--server", service]
    env = {"FAITHJUDGE_API_KEY": ""}
    result = CliRunner().invoke(app, ["submit", str(source), *server, *args], env=env)
    assert result.exit_code == 3, result.output
    assert message in result.stderr


def test_missing_file_and_missing_server_exit_3(tmp_path: Path) -> None:
    result = submit(tmp_path / "nope.jsonl", "--server", "http://127.0.0.1:9")
    assert result.exit_code == 3 and "input file not found" in result.stderr
    result = submit(write_batch(tmp_path / "in.jsonl", 1), env={"FAITHJUDGE_URL": ""})
    assert result.exit_code == 3 and "FAITHJUDGE_URL" in result.stderr


def test_outputs_without_wait_are_a_usage_error(tmp_path: Path) -> None:
    result = submit(tmp_path / "in.jsonl", "--no-wait", "-o", tmp_path / "o.jsonl")
    assert result.exit_code == 3


def test_submit_runs_in_its_own_process(service: str, tmp_path: Path) -> None:
    out = tmp_path / "results.jsonl"
    env = {**os.environ, "FAITHJUDGE_URL": service, "FAITHJUDGE_API_KEY": KEY_A}
    source = write_batch(tmp_path / "in.jsonl", 3)
    command = [sys.executable, "-m", "faithjudge.cli.main", "submit", str(source), "-o", str(out)]
    done = subprocess.run(
        [*command, "--no-progress"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert len(out.read_text().splitlines()) == 3


def test_ctrl_c_while_waiting_leaves_the_job_running(
    service: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from faithjudge_client import FaithJudgeClient

    def interrupted(self: FaithJudgeClient, job_id: str, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(FaithJudgeClient, "wait", interrupted)
    result = submit(write_batch(tmp_path / "in.jsonl", 2), "--server", service, "--api-key", KEY_A)
    assert result.exit_code == 5, result.output
    job_id = result.stdout.strip()
    assert f"job {job_id} goes on on the server" in result.stderr
    with FaithJudgeClient(service, KEY_A) as sdk:
        assert sdk.job(job_id).total == 2


def test_a_batch_that_does_not_finish_in_time_exits_5(tmp_path: Path) -> None:
    settings = service_settings(tmp_path / "data", workers=False)  # nothing will score it
    with run_service(settings) as url:
        source = write_batch(tmp_path / "in.jsonl", 2)
        result = submit(source, "--server", url, "--api-key", KEY_A, "--timeout", "0.3")
    assert result.exit_code == 5, result.output
    assert "still queued after 0.3 s" in result.stderr


@pytest.mark.parametrize("content", ["", "\n  \n"])
def test_an_empty_file_exits_4_without_a_batch(tmp_path: Path, content: str) -> None:
    source = tmp_path / "empty.jsonl"
    source.write_text(content)
    result = submit(source, "--server", "http://127.0.0.1:9")
    assert result.exit_code == 4, result.output
    assert "holds no request line" in result.stderr


@pytest.mark.parametrize(
    ("status", "counts", "stages", "code"),
    [
        ("completed", {"valid": 3}, {}, 0),
        ("completed", {"invalid": 3}, {"evidence": 3}, 4),  # judged, but not one grade valid
        ("completed", {"abstained": 3}, {"abstain": 3}, 4),
        ("completed", {"valid": 1, "invalid": 2}, {"schema": 2}, 0),
        ("completed", {"invalid": 3}, {"transport": 3}, 4),  # every call failed
        ("completed", {"error": 2}, {}, 4),  # every line an error
        ("cancelled", {"valid": 1}, {}, 5),
        ("failed", {}, {}, 3),
    ],
)
def test_batch_exit_code_follows_the_score_rule(
    status: str, counts: dict[str, int], stages: dict[str, int], code: int
) -> None:
    from faithjudge.cli.submit import job_exit_code
    from faithjudge_client import BatchStatus

    final = BatchStatus.model_validate(
        {
            "id": "b_1",
            "status": status,
            "total": 3,
            "done": 3,
            "rejected": 0,
            "counts": counts,
            "failure_stages": stages,
            "created_at": "2026-01-01T00:00:00Z",
            "updated_at": "2026-01-01T00:00:09Z",
            "pending": 0,
            "progress": 1.0,
        }
    )
    assert job_exit_code(final)[0] == code


def test_a_failed_job_says_why() -> None:
    from faithjudge.cli.submit import job_exit_code
    from faithjudge_client import BatchStatus

    final = BatchStatus.model_validate(
        {
            "id": "b_2",
            "status": "failed",
            "total": 1,
            "done": 0,
            "created_at": "2026-01-01T00:00:00Z",
            "updated_at": "2026-01-01T00:00:09Z",
            "pending": 0,
            "progress": 0.0,
            "detail": "Batch API: connection refused (gave up after 3 tries)",
        }
    )
    code, why = job_exit_code(final)
    assert code == 3
    assert why == "job b_2 ended failed: Batch API: connection refused (gave up after 3 tries)"
