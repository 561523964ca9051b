"""Each line records how long the judge took to answer the calls made for it
(``provenance.judge_s``), and nothing when its answers came from the response cache."""

from __future__ import annotations

from pathlib import Path

import orjson
from faithjudge.cli.main import app
from typer.testing import CliRunner

from tests.fakes.judge_server import FakeJudgeConfig, run_fake_judge

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo.jsonl"


def _provenances(path: Path) -> list[dict]:
    return [orjson.loads(line)["provenance"] for line in path.read_bytes().splitlines()]


def test_judge_time_is_kept_for_calls_made_and_left_out_for_cached_answers(
    tmp_path: Path,
) -> None:
    with run_fake_judge(FakeJudgeConfig(latency_s=0.01)) as fake:
        env = {
            "OPENAI_BASE_URL": fake.base_url,
            "OPENAI_API_KEY": "sk-test",
            "FAITHJUDGE_DATA_DIR": str(tmp_path / "data"),
        }
        for name in ("first.jsonl", "again.jsonl"):
            done = CliRunner().invoke(
                app,
                ["score", str(DEMO), "-o", str(tmp_path / name), "--judge", "openai:judge"],
                env=env,
            )
            assert done.exit_code == 0, done.output
    first, again = _provenances(tmp_path / "first.jsonl"), _provenances(tmp_path / "again.jsonl")
    called = [p for p in first if p["cache"]["misses"]]
    assert called and all(p["judge_s"] > 0 for p in called)
    # every answer of the second run came from the cache: no judge time to report
    assert all(p["cache"]["misses"] == 0 and "judge_s" not in p for p in again)
