"""An output keeps its judge: a resume or ``--retry-failed`` that names no judge scores with
the judge of the output's lines; another judge exits 3 naming both unless ``--judge-change``;
lines no judge answered belong to no judge, so the reports name one; and ``score`` leaves its
folder tidy (no empty output, no lock file, a private results file)."""

from __future__ import annotations

import json
import os
import stat
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from faithjudge.cli.main import app
from faithjudge.output_lock import lock_path
from faithjudge.pipeline.runtime import open_scorer
from faithjudge.reports.judges import summarise_judges
from faithjudge.runners.file_runner import score_file
from faithjudge.settings import Settings
from faithjudge_client.lines import ItemResult
from typer.testing import CliRunner

from tests.fakes.judge_server import FakeJudgeConfig, run_fake_judge

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "demo.jsonl"
GATE = "[coverage]\nmax_not_judged = 100.0\nmax_parse = 100.0\n"


def _invoke(*args: object, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], env=env)


def _score(*args: object, env: dict[str, str] | None = None) -> Any:
    return _invoke("score", *args, "--no-progress", env=env)


def _results(path: Path) -> list[ItemResult]:
    return [ItemResult.model_validate_json(x) for x in path.read_bytes().splitlines() if x.strip()]


def _said(result: Any) -> str:
    return " ".join(result.output.split())


def _fake_env(base_url: str, tmp_path: Path) -> dict[str, str]:
    """The fake judge's server settings, naming no judge."""
    return {
        "FAITHJUDGE_OPENAI_BASE_URL": base_url,
        "FAITHJUDGE_OPENAI_API_KEY": "test-key",
        "FAITHJUDGE_TIMEOUT_S": "5",
        "FAITHJUDGE_RETRY_BASE_S": "0",
        "FAITHJUDGE_MAX_RETRIES": "1",
        "FAITHJUDGE_DATA_DIR": str(tmp_path / "data"),
        # the two halves share their CoTs: cached answers would hide which judge was asked
        "FAITHJUDGE_CACHE": "false",
    }


def _ten_lines(tmp_path: Path) -> Path:
    demo = [json.loads(x) for x in DEMO.read_text().splitlines() if x.strip()][:5]
    source = tmp_path / "in.jsonl"
    lines = [json.dumps(d | {"item_id": f"{d['item_id']}-{c}"}) for c in range(2) for d in demo]
    source.write_text("\n".join(lines) + "\n")
    return source


def _half_down(fake: Any, tmp_path: Path, source: Path, out: Path, *, down_first: bool) -> None:
    """Score ``source`` one line at a time with the fake judge down for one half of the lines
    (the first half, or the second)."""
    half = 5
    fake.config.fault = "unavailable" if down_first else None
    written = 0

    def switch_at_half(count: int) -> None:
        nonlocal written
        written += count
        if written >= half:
            fake.config.fault = None if down_first else "unavailable"

    values = {k.removeprefix("FAITHJUDGE_").lower(): v for k, v in _fake_env(fake.base_url,
              tmp_path).items()}  # fmt: skip

    async def run() -> None:
        settings = Settings(**values, judge="openai:fake-judge", concurrency=1)
        async with open_scorer(settings) as scorer:
            await score_file(scorer, source, out, concurrency=1, progress=switch_at_half)

    anyio.run(run)
    fake.config.fault = None


def test_a_retry_naming_no_judge_keeps_the_outputs_judge(tmp_path: Path) -> None:
    source, out = _ten_lines(tmp_path), tmp_path / "out.jsonl"
    with run_fake_judge(FakeJudgeConfig()) as fake:
        _half_down(fake, tmp_path, source, out, down_first=True)
        first = _results(out)
        failed = [r.line for r in first if any(m.status != "valid" for m in r.metrics.values())]
        assert failed == [1, 2, 3, 4, 5]
        # lines no judge answered are no second judge: the report names one
        summary = summarise_judges(first)
        assert not summary.mixed and summary.answered
        assert [(j.judge, lines) for j, lines in summary.judges] == [("openai:fake-judge", 10)]
        calls = fake.counters.total

        retried = _score(source, "-o", out, "--retry-failed", env=_fake_env(fake.base_url,
                         tmp_path))  # fmt: skip
        assert retried.exit_code == 0, retried.output
        assert "judge: openai:fake-judge" in _said(retried)
        assert fake.counters.total > calls  # the failed lines went to that judge
    after = _results(out)
    assert [r.line for r in after] == list(range(1, 11))
    for result in after:
        assert result.provenance is not None
        assert result.provenance.judge == "openai:fake-judge", result.line
        assert all(m.status == "valid" for m in result.metrics.values()), result.line
    assert len({r.provenance.judge_sha256 for r in after if r.provenance}) == 1


def test_a_line_the_judge_no_longer_answers_names_the_model_it_answered_as(
    tmp_path: Path,
) -> None:
    source, out = _ten_lines(tmp_path), tmp_path / "out.jsonl"
    with run_fake_judge(FakeJudgeConfig(model="fake-judge-2024")) as fake:
        _half_down(fake, tmp_path, source, out, down_first=False)
    results = _results(out)
    down = [r for r in results if r.line is not None and r.line > 5]
    assert down and all(
        m.failure is not None and m.failure.stage == "transport"
        for r in down
        for m in r.metrics.values()
    )
    # the run's judge, by its judge and the model it answered as before it went down
    assert {(r.provenance.judge, r.provenance.judge_model) for r in results
            if r.provenance} == {("openai:fake-judge", "fake-judge-2024")}  # fmt: skip


@pytest.fixture
def openai_output(tmp_path: Path) -> Iterator[tuple[Path, Path, dict[str, str], Any]]:
    """An output of the fake openai judge, its first half failed at transport, and the fake
    (still serving) with the settings that reach it."""
    source, out = _ten_lines(tmp_path), tmp_path / "out.jsonl"
    with run_fake_judge(FakeJudgeConfig()) as fake:
        _half_down(fake, tmp_path, source, out, down_first=True)
        yield source, out, _fake_env(fake.base_url, tmp_path), fake


def test_another_judge_on_the_output_exits_3_naming_both_judges(
    openai_output: tuple[Path, Path, dict[str, str], Any],
) -> None:
    source, out, env, fake = openai_output
    before, calls = out.read_bytes(), fake.counters.total
    for how, extra_env in (
        (["--judge", "lexicon:v1"], {}),
        ([], {"FAITHJUDGE_JUDGE": "lexicon:v1"}),
    ):
        refused = _score(source, "-o", out, "--retry-failed", *how, env=env | extra_env)
        assert refused.exit_code == 3, refused.output
        said = _said(refused)
        assert "openai:fake-judge" in said and "lexicon:v1" in said
        assert "judge lexicon:v1, not openai:fake-judge" in said
        assert "--judge-change" in said
        assert out.read_bytes() == before
    # a plain resume with a changed scoring setting is another judge too
    changed = _score(source, "-o", out, env=env | {"FAITHJUDGE_QUOTE_TOLERANCE": "0.2"})
    assert changed.exit_code == 3, changed.output
    assert "scoring settings" in _said(changed)
    assert out.read_bytes() == before and fake.counters.total == calls


def test_judge_change_scores_with_the_new_judge_and_the_report_lists_both(
    openai_output: tuple[Path, Path, dict[str, str], Any], tmp_path: Path
) -> None:
    source, out, env, _ = openai_output
    before = {orjson.loads(x)["line"]: x for x in out.read_bytes().splitlines()}
    moved = _score(source, "-o", out, "--retry-failed", "--judge", "lexicon:v1",
                   "--judge-change", env=env)  # fmt: skip
    assert moved.exit_code == 0, moved.output
    assert "judge changed: the 5 line(s) scored now" in _said(moved)
    assert "keep the grades of openai:fake-judge" in _said(moved)
    after = {orjson.loads(x)["line"]: x for x in out.read_bytes().splitlines()}
    judges = {n: orjson.loads(raw)["provenance"]["judge"] for n, raw in after.items()}
    assert judges == {n: "lexicon:v1" if n <= 5 else "openai:fake-judge" for n in after}
    assert all(after[n] == before[n] for n in range(6, 11))
    data, junit, gate = tmp_path / "r.json", tmp_path / "g.xml", tmp_path / "gate.toml"
    assert _invoke("report", out, "--json", data).exit_code == 0
    judges = json.loads(data.read_text())["judges"]
    assert judges["mixed"] is True
    assert sorted((j["judge"], j["lines"]) for j in judges["judges"]) == [
        ("lexicon:v1", 5),
        ("openai:fake-judge", 5),
    ]
    gate.write_text(GATE)
    _invoke("gate", out, "--config", gate, "--junit", junit)
    properties = {p.get("name"): p.get("value") for p in ET.parse(junit).getroot().iter("property")}
    assert properties["judge.mixed"] == "true"


def test_the_report_of_a_half_failed_run_names_one_judge(
    openai_output: tuple[Path, Path, dict[str, str], Any], tmp_path: Path
) -> None:
    _, out, _, _ = openai_output
    md, data, junit, gate = (tmp_path / n for n in ("r.md", "r.json", "g.xml", "gate.toml"))
    assert _invoke("report", out, "--md", md, "--json", data).exit_code == 0
    text = md.read_text()
    assert "Mixed judges" not in text and "Judge: openai:fake-judge" in text
    judges = json.loads(data.read_text())["judges"]
    assert judges["mixed"] is False
    assert [(j["judge"], j["lines"]) for j in judges["judges"]] == [("openai:fake-judge", 10)]
    gate.write_text(GATE)
    _invoke("gate", out, "--config", gate, "--junit", junit)
    properties = {p.get("name"): p.get("value") for p in ET.parse(junit).getroot().iter("property")}
    assert properties["judge.mixed"] == "false"
    assert properties["judge.judge"] == "openai:fake-judge"
    assert properties["judge.lines"] == "10"


def test_a_run_ending_with_transport_failures_says_how_to_retry_them(
    openai_output: tuple[Path, Path, dict[str, str], Any],
) -> None:
    source, out, env, fake = openai_output
    command = f"faithjudge score {source} -o {out} --retry-failed"
    # a plain rerun: nothing left to score, but five lines the judge never answered
    rerun = _score(source, "-o", out, env=env)
    assert rerun.exit_code == 0, rerun.output
    said = _said(rerun)
    assert "5 line(s)" in said and "hold transport failures" in said and command in said
    # and a run that ends with them
    fake.config.fault = "unavailable"
    again = out.with_name("again.jsonl")
    down = _score(source, "-o", again, "--judge", "openai:fake-judge", env=env)
    assert down.exit_code == 4, down.output
    assert f"faithjudge score {source} -o {again} --retry-failed" in _said(down)
    assert "10 line(s)" in _said(down)


# ------------------------------------------------------------------ tidy files


def test_a_dead_judge_leaves_neither_an_empty_output_nor_a_lock_file(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    env = _fake_env("http://127.0.0.1:9/v1", tmp_path)  # nothing listens on the discard port
    dead = _score(DEMO, "-o", out, "--judge", "openai:fake-judge", env=env)
    assert dead.exit_code == 3, dead.output
    assert list(tmp_path.iterdir()) == []  # no cache either: nothing at all


def test_an_existing_empty_output_is_left_as_it_was(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.touch()
    env = _fake_env("http://127.0.0.1:9/v1", tmp_path)
    assert _score(DEMO, "-o", out, "--judge", "openai:fake-judge", env=env).exit_code == 3
    assert out.exists() and out.read_bytes() == b""


def test_results_are_private_whatever_the_umask_and_an_existing_output_keeps_its_mode(
    tmp_path: Path,
) -> None:
    out = tmp_path / "new" / "out.jsonl"
    common = ("--judge", "lexicon:v1", "--data-dir", tmp_path / "data")
    old = os.umask(0)
    try:
        assert _score(DEMO, "-o", out, *common, "--limit", "2").exit_code == 0
        assert stat.S_IMODE(out.stat().st_mode) == 0o600
        assert stat.S_IMODE(out.parent.stat().st_mode) == 0o700  # the folder it made
        os.chmod(out, 0o644)  # the user's own choice
        assert _score(DEMO, "-o", out, *common).exit_code == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o644
    assert len(_results(out)) == len(DEMO.read_text().splitlines())
    assert not lock_path(out).exists()
    assert sorted(p.name for p in out.parent.iterdir()) == ["out.jsonl"]
