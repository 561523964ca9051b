"""The order judge calls are sent in, against servers that keep one prompt and one call.

A single-slot server (llama-cpp-python, a one-slot llama.cpp server) keeps only the prompt it
read last and reads the next one from the first token that differs; it serves one call at a
time, and llama-cpp-python cuts the reply it is streaming when another call arrives. A run
sends the waiting calls in prefix order (same metric, then same question), learns such a
server once, and still writes one result per line, in line order.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from faithjudge.cli.main import app
from faithjudge.transport.judge_servers import forget_servers
from typer.testing import CliRunner

from tests.fakes.judge_server import FakeJudge, FakeJudgeConfig, run_fake_judge

QUESTIONS = (
    "Is there a pleural effusion on the left? (yes or no)",
    "Does the chest X-ray show cardiomegaly? (yes or no)",
    "Is there evidence of pulmonary congestion? (yes or no)",
)
COT = (
    "<think>\n<step>The left costophrenic angle is blunted by a meniscus-shaped opacity.</step>\n"
    "<step>Line {n}: the right costophrenic angle is sharp.</step>\n</think>\n<answer>yes</answer>"
)


@pytest.fixture(autouse=True)
def _fresh_process_view() -> Iterator[None]:
    forget_servers()  # what earlier tests taught about a server on the same port
    yield
    forget_servers()


def _score(
    workdir: Path, fake: FakeJudge, lines: int, *args: str, **env: str
) -> tuple[object, list[dict]]:
    workdir.mkdir(parents=True, exist_ok=True)
    source, out = workdir / "in.jsonl", workdir / "out.jsonl"
    source.write_text(
        "".join(
            json.dumps({"item_id": f"item-{n}", "question": QUESTIONS[n % len(QUESTIONS)],
                        "ground_truth": "yes", "cot": COT.format(n=n)}) + "\n"
            for n in range(lines)
        )
    )  # fmt: skip
    environment = {"OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "sk-test",
                   "FAITHJUDGE_RETRY_BASE_S": "0.01", **env}  # fmt: skip
    argv = ["score", str(source), "-o", str(out), "--no-progress", "--no-cache",
            "--judge", "openai:gemma-3-270m", *args]  # fmt: skip
    result = CliRunner().invoke(app, argv, env=environment)
    return result, [orjson.loads(x) for x in out.read_bytes().splitlines()]


def test_a_single_slot_server_reuses_most_of_each_prompt(tmp_path: Path) -> None:
    """60 lines on default settings against a server that takes time to read a prompt (so calls
    wait for it): at least half of the prompt tokens are the last prompt's (sent in the order
    the lines come, CF, CA, CT of a line and then the next line's, about a twentieth are); one
    result per line, in line order."""
    with run_fake_judge(FakeJudgeConfig(last_prompt=True, read_s_per_token=0.0002)) as fake:
        result, rows = _score(tmp_path, fake, 60)
        counters = fake.counters
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    assert counters.reused_share >= 0.5, counters
    assert [row["line"] for row in rows] == list(range(1, 61))
    assert [row["item_id"] for row in rows] == [f"item-{n}" for n in range(60)]
    graded = [m for row in rows for m in row["metrics"].values()]
    assert len(graded) == 180 and all(m["status"] == "valid" for m in graded)


def test_a_server_that_cuts_a_reply_is_learnt_at_the_first_cut(tmp_path: Path) -> None:
    """llama-cpp-python cuts the reply it streams when another call arrives: the first cut
    holds the server at one call, so at most one call of the run is asked again, and the cut
    call is not a failed attempt. Replies take a third of the timeout, so they are streamed."""
    config = FakeJudgeConfig(llama_cpp=True, chunk_delay_s=0.008, chunk_chars=16)
    with run_fake_judge(config) as fake:
        result, rows = _score(tmp_path, fake, 10, FAITHJUDGE_TIMEOUT_S="0.4")
        counters = fake.counters
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    grades = [m for row in rows for m in row["metrics"].values()]
    assert len(grades) == 30 and all(m["status"] == "valid" for m in grades)
    assert all(m["attempts"] == 1 for m in grades)
    assert counters.cut_short <= 1, counters.cut_short
    asked = counters.by_format["json_object+schema"]
    assert 30 <= asked <= 31, asked  # one call asked again at most
    assert counters.max_in_flight <= 2, counters.max_in_flight
