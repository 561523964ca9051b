"""``faithjudge canary record|check`` against the fake judge server, and the gate's ``[canary]``
table: the same judge passes, a judge whose grades changed is named item by item, a dead judge
exits 3, and every grade is a real call even with a warm response cache."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import anyio
import pytest
from faithjudge.cli.main import app
from faithjudge.errors import ConfigError
from faithjudge.exit_codes import ExitCode
from faithjudge.runners.canary import record_canary, write_pinned
from faithjudge.settings import Settings
from faithjudge_client.metric_catalogue import label_of
from typer.testing import CliRunner

from tests.fakes.judge_server import FakeJudge, FakeJudgeConfig, run_fake_judge
from tests.fixtures_service import running_app

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "demo.jsonl"
SHIPPED = ROOT / "examples" / "canary.jsonl"


def _run(env: dict[str, str], *args: str) -> Any:
    return CliRunner().invoke(app, list(args), env=env)


def _text(result: Any) -> str:
    return " ".join(result.output.split())


def _env(base_url: str, data_dir: Path) -> dict[str, str]:
    return {"OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": "sk-test",
            "FAITHJUDGE_RETRY_BASE_S": "0", "FAITHJUDGE_DATA_DIR": str(data_dir)}  # fmt: skip


def _pinned_grades(path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return {(line["item"], metric): grade for line in lines[1:]
            for metric, grade in line["grades"].items()}  # fmt: skip


def _asked(grades: dict[tuple[str, str], dict[str, Any]]) -> int:
    """The grades that took a judge call (a KB miss is decided before any)."""
    return sum(1 for grade in grades.values() if grade["outcome"] not in ("kb", "input"))


@pytest.fixture
def judge() -> Any:
    with run_fake_judge(FakeJudgeConfig(models=("judge-1",))) as fake:
        yield fake


def test_the_same_judge_passes_with_real_calls_even_with_a_warm_cache(
    judge: FakeJudge, tmp_path: Path
) -> None:
    env = _env(judge.base_url, tmp_path / "data")
    scored = tmp_path / "scored.jsonl"
    # warm the response cache with the very prompts the canary sends
    assert _run(env, "score", str(DEMO), "-o", str(scored), "--judge", "openai:judge-1",
                "--no-progress").exit_code == 0  # fmt: skip
    cold = judge.counters.total
    assert cold > 0
    scored.unlink()
    assert _run(env, "score", str(DEMO), "-o", str(scored), "--no-progress").exit_code == 0
    assert judge.counters.total == cold  # the cache answered every call

    pinned = tmp_path / "canary.jsonl"
    recorded = _run(env, "canary", "record", str(DEMO), "-o", str(pinned),
                    "--judge", "openai:judge-1")  # fmt: skip
    assert recorded.exit_code == ExitCode.OK, recorded.output
    grades = _pinned_grades(pinned)
    assert judge.counters.total == cold + _asked(grades)  # real calls, not the cache's answers
    header = json.loads(pinned.read_text().splitlines()[0])
    assert header["judge"]["judge"] == "openai:judge-1"
    assert header["judge"]["model"] == "judge-1"
    assert header["judge"]["fingerprints"] == ["fp_fake_judge"]
    assert len(header["judge"]["judge_sha256"]) == 64
    assert "recorded_at" in header

    # no --judge: the pinned judge is checked
    checked = _run(env, "canary", "check", str(pinned))
    assert checked.exit_code == ExitCode.OK, checked.output
    assert judge.counters.total == cold + 2 * _asked(grades)
    assert f"{len(grades)} of {len(grades)} grades agree" in _text(checked)
    record = json.loads((tmp_path / "data" / "canary_checks.json").read_text())
    (check,) = record["checks"].values()
    assert check["last_passed_at"] == check["checked_at"]


def test_a_judge_whose_grades_changed_exits_1_naming_each_item(
    judge: FakeJudge, tmp_path: Path
) -> None:
    env = _env(judge.base_url, tmp_path / "data")
    pinned = tmp_path / "canary.jsonl"
    assert _run(env, "canary", "record", str(DEMO), "-o", str(pinned),
                "--judge", "openai:judge-1").exit_code == 0  # fmt: skip
    assert _run(env, "canary", "check", str(pinned)).exit_code == 0
    records = tmp_path / "data" / "canary_checks.json"
    (passed,) = json.loads(records.read_text())["checks"].values()
    # the same model name, another judge behind it: it quotes and scores 3 where it gave 1
    judge.config.quote_mode = "first_sentence"
    judge.config.fingerprint = "fp_changed"
    checked = _run(env, "canary", "check", str(pinned), "--json")
    text = _text(checked)
    assert checked.exit_code == ExitCode.CHECK_FAILED, checked.output
    assert "system_fingerprint fp_fake_judge -> fp_changed" in text
    graded = {key for key, grade in _pinned_grades(pinned).items() if grade["outcome"] == "valid"}
    assert graded
    for item, metric in graded:
        assert f"drifted: {item}, {label_of(metric)}: score 1 ->" in text
    assert "the judge drifted" in text
    found = json.loads(checked.stdout[: checked.stdout.rindex("}") + 1])
    assert found["verdict"] == "drift"
    assert {(p["item"], p["metric"]) for p in found["differing"]} == graded
    # the record keeps when it last passed
    (check,) = json.loads(records.read_text())["checks"].values()
    assert check["judge"]["fingerprints"] == ["fp_changed"]
    assert check["last_passed_at"] == passed["checked_at"]


def test_an_unreachable_judge_exits_3_and_keeps_no_record(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = _env(f"http://127.0.0.1:{port}/v1", tmp_path / "data")
    recorded = _run(env, "canary", "record", str(DEMO), "-o", str(tmp_path / "c.jsonl"),
                    "--judge", "openai:judge-1")  # fmt: skip
    assert recorded.exit_code == ExitCode.UNEVALUABLE, recorded.output
    assert not (tmp_path / "c.jsonl").exists()
    # pinned with the offline judge, checked against the dead server
    pinned = tmp_path / "pinned.jsonl"
    assert _run(env, "canary", "record", str(DEMO), "-o", str(pinned),
                "--judge", "lexicon:v1").exit_code == 0  # fmt: skip
    checked = _run(env, "canary", "check", str(pinned), "--judge", "openai:judge-1")
    assert checked.exit_code == ExitCode.UNEVALUABLE, checked.output
    assert "unreachable" in _text(checked)
    assert not (tmp_path / "data" / "canary_checks.json").exists()


def _gate(env: dict[str, str], results: Path, config: Path) -> Any:
    return _run(env, "gate", str(results), "--config", str(config))


def test_the_gate_reads_the_last_check_of_the_pinned_file(tmp_path: Path) -> None:
    env = {"FAITHJUDGE_DATA_DIR": str(tmp_path / "data")}
    pinned, results = tmp_path / "canary.jsonl", tmp_path / "results.jsonl"
    config = tmp_path / "faithjudge.toml"
    config.write_text('[coverage]\nmax_not_judged = 100.0\n[canary]\npinned = "canary.jsonl"\n')
    assert _run(env, "canary", "record", str(DEMO), "-o", str(pinned),
                "--judge", "lexicon:v1").exit_code == 0  # fmt: skip
    assert _run(env, "score", str(DEMO), "-o", str(results), "--judge", "lexicon:v1",
                "--no-progress").exit_code == 0  # fmt: skip

    unchecked = _gate(env, results, config)
    assert unchecked.exit_code == ExitCode.CHECK_FAILED, unchecked.output
    assert "FAILED (canary)" in unchecked.output
    assert "no check of" in _text(unchecked)

    assert _run(env, "canary", "check", "--config", str(config)).exit_code == 0
    passed = _gate(env, results, config)
    assert passed.exit_code == ExitCode.OK, passed.output
    assert "canary\\_agreement \\[canary.jsonl\\]" in passed.output
    assert "last passed" in passed.output


def test_the_gate_fails_a_run_graded_by_another_judge(tmp_path: Path) -> None:
    env = {"FAITHJUDGE_DATA_DIR": str(tmp_path / "data")}
    pinned, results = tmp_path / "canary.jsonl", tmp_path / "results.jsonl"
    config = tmp_path / "faithjudge.toml"
    config.write_text(
        '[coverage]\nmax_not_judged = 100.0\n[canary]\npinned = "canary.jsonl"\nmax_age_hours = 1\n'
    )
    assert _run(env, "canary", "record", str(DEMO), "-o", str(pinned),
                "--judge", "lexicon:v1").exit_code == 0  # fmt: skip
    assert _run(env, "canary", "check", str(pinned)).exit_code == 0
    # another knowledge base: the same questions, another file
    kb = json.loads((ROOT / "knowledge_base" / "cxr_vqa.json").read_text())
    kb["description"] = "a copy"
    (tmp_path / "kb.json").write_text(json.dumps(kb))
    assert (
        _run(
            env,
            "score",
            str(DEMO),
            "-o",
            str(results),
            "--judge",
            "lexicon:v1",
            "--knowledge-base",
            str(tmp_path / "kb.json"),
            "--no-progress",
        ).exit_code
        == 0
    )
    gated = _gate(env, results, config)
    assert gated.exit_code == ExitCode.CHECK_FAILED, gated.output
    assert "canary\\_judge \\[canary.jsonl\\] | canary | 100.00 | 0.00 | **FAIL**" in gated.output


async def _readiness(client: Any, status: int) -> Any:
    for _ in range(400):
        response = await client.get("/readyz")
        if response.status_code == status:
            return response
        await anyio.sleep(0.05)
    raise AssertionError(f"/readyz never answered {status}: {response.text}")


@pytest.mark.anyio
async def test_the_service_checks_the_canary_on_a_timer_and_readyz_reports_drift(
    tmp_path: Path,
) -> None:
    with run_fake_judge(FakeJudgeConfig(models=("judge-1",))) as fake:
        settings = Settings(data_dir=tmp_path / "data", judge="openai:judge-1",
                            openai_base_url=fake.base_url, openai_api_key="sk-test",
                            retry_base_s=0, workers=False)  # fmt: skip
        pinned = tmp_path / "canary.jsonl"
        write_pinned(pinned, *await record_canary(settings, DEMO))
        watched = Settings(data_dir=tmp_path / "data", judge="openai:judge-1",
                           openai_base_url=fake.base_url, openai_api_key="sk-test",
                           retry_base_s=0, workers=False, canary_file=str(pinned),
                           canary_interval_s=0.2)  # fmt: skip
        async with running_app(watched) as (_, client):
            ready = await _readiness(client, 200)
            assert ready.json()["checks"]["canary"] == "ok"
            fake.config.quote_mode = "first_sentence"  # the judge changes under its name
            drifted = await _readiness(client, 503)
            why = drifted.json()["checks"]["canary"]
            assert why.startswith("drift at ") and "demo-001" in why, why
            fake.config.quote_mode = "none"  # and back: the next check passes again
            assert (await _readiness(client, 200)).json()["checks"]["canary"] == "ok"
        record = json.loads((tmp_path / "data" / "canary_checks.json").read_text())
        (check,) = record["checks"].values()
        assert check["last_passed_at"] is not None


@pytest.mark.anyio
async def test_a_canary_of_a_judge_the_service_does_not_offer_stops_its_start(
    tmp_path: Path,
) -> None:
    pinned = tmp_path / "canary.jsonl"
    write_pinned(pinned, *await record_canary(Settings(data_dir=tmp_path / "data"), DEMO))
    settings = Settings(data_dir=tmp_path / "data", judge="openai:judge-1",
                        openai_api_key="sk-test", canary_file=str(pinned))  # fmt: skip
    with pytest.raises(ConfigError, match="pins the judge lexicon:v1, which this service does not"):
        async with running_app(settings):
            pass


def test_the_shipped_canary_pins_every_metric_of_reader_study_questions(tmp_path: Path) -> None:
    env = {"FAITHJUDGE_DATA_DIR": str(tmp_path / "data")}
    kb = json.loads((ROOT / "knowledge_base" / "cxr_vqa.json").read_text())["entries"]
    items = [json.loads(line) for line in SHIPPED.read_text().splitlines()]
    assert all(item["question"] in kb for item in items)
    assert len({item["item_id"] for item in items}) == len(items)
    pinned = tmp_path / "pinned.jsonl"
    assert _run(env, "canary", "record", str(SHIPPED), "-o", str(pinned),
                "--judge", "lexicon:v1").exit_code == 0  # fmt: skip
    grades = _pinned_grades(pinned)
    assert len(grades) == 3 * len(items)
    assert {grade["outcome"] for grade in grades.values()} == {"valid"}
    assert len({grade["score"] for grade in grades.values()}) >= 4  # the scale, not one score
    assert _run(env, "canary", "check", str(pinned)).exit_code == 0

    # the report of a run by the same judge says when its canary last passed
    results = tmp_path / "results.jsonl"
    assert _run(env, "score", str(SHIPPED), "-o", str(results), "--judge", "lexicon:v1",
                "--no-progress").exit_code == 0  # fmt: skip
    report = _run(env, "report", str(results))
    assert report.exit_code == 0, report.output
    said = " ".join(report.stdout.split()).replace("\\", "")  # Markdown escapes
    assert f"judge canary {pinned}: last passed" in said
