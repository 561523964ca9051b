"""On the CLI's ``openai-batch`` route a failure for good belongs to the run that met it.

A run is its output file. A plain rerun into the same output keeps its failures (and says how
to ask them again); ``--retry-failed`` asks them again; a run into another output asks again on
its own, so a provider that failed a whole run earlier never costs a later run its grades.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from click.testing import Result
from faithjudge.cli.main import app
from faithjudge_client.lines import ItemResult
from typer.testing import CliRunner

from tests.fakes.batch_server import FakeBatchConfig, run_fake_batches
from tests.integration.test_fault_matrix import _line

ITEMS = 4
REQUESTS = ITEMS * 3  # three metrics a line


def _env(base_url: str, tmp_path: Path) -> dict[str, str | None]:
    env: dict[str, str | None] = {
        k: None for k in os.environ if k.startswith(("FAITHJUDGE_", "OPENAI_"))
    }
    env.update(
        FAITHJUDGE_OPENAI_BASE_URL=base_url,
        FAITHJUDGE_OPENAI_API_KEY="test-key",
        FAITHJUDGE_DATA_DIR=str(tmp_path / "data"),
        FAITHJUDGE_BATCH_POLL_S="0.01",
        FAITHJUDGE_MAX_RETRIES="1",
    )
    return env


def _score(source: Path, out: Path, env: dict[str, str | None], *extra: str) -> Result:
    args = ["score", str(source), "-o", str(out), "--judge", "openai-batch:fake-judge"]
    return CliRunner().invoke(app, [*args, "--no-progress", *extra], env=env)


def _grades(out: Path) -> list[tuple[str, str | None, str | None]]:
    """(status, failure stage, failure detail) of every grade of ``out``."""
    rows = [ItemResult.model_validate_json(x) for x in out.read_bytes().splitlines()]
    assert len(rows) == ITEMS
    return [
        (m.status, m.failure.stage if m.failure else None, m.failure.detail if m.failure else None)
        for r in rows
        for m in r.metrics.values()
    ]


def _said(result: Result) -> str:
    return " ".join(result.output.split())


def _row(result: Result, label: str) -> str:
    """The count the batch route's summary table gives ``label``."""
    for line in result.output.splitlines():
        cells = [cell.strip() for cell in line.strip("│┃ ").split("│")]
        if cells[0] == label:
            return cells[-1]
    raise AssertionError(f"no row {label!r} in:\n{result.output}")


def _failed_run(source: Path, out: Path, env: dict[str, str | None]) -> None:
    """A run whose every provider batch fails: every grade a transport failure naming the way
    to ask again."""
    result = _score(source, out, env)
    assert result.exit_code == 4, result.output  # not one grade is valid
    grades = _grades(out)
    assert {(status, stage) for status, stage, _ in grades} == {("invalid", "transport")}
    for _, _, detail in grades:
        assert detail is not None and "fake validation failure" in detail
        assert "--retry-failed" in detail
    assert _row(result, "requests failed for good (this run)") == str(REQUESTS)


def test_a_new_run_asks_again_what_another_run_failed_for_good(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(_line(f"r-{i}", f"({i})") for i in range(ITEMS)) + "\n")
    first, other = tmp_path / "first.jsonl", tmp_path / "other.jsonl"
    with run_fake_batches(FakeBatchConfig(fail_batches=99)) as fake:
        env = _env(fake.base_url, tmp_path)
        _failed_run(source, first, env)
        failed_batches = fake.counters.batches
        assert failed_batches == 2  # the first and one follow-up (FAITHJUDGE_MAX_RETRIES=1)
        fake.config.fail_batches = 0  # the provider is well again

        # the same output's plain rerun keeps its failures, sends nothing, and says so
        before = first.read_bytes()
        rerun = _score(source, first, env)
        assert rerun.exit_code == 0, rerun.output  # every line was in the output already
        assert fake.counters.batches == failed_batches
        assert first.read_bytes() == before
        assert _row(rerun, "failed for good earlier (kept)") == str(REQUESTS)
        assert f"{REQUESTS} request(s) that failed for good" in _said(rerun)
        assert "--retry-failed" in _said(rerun)

        # a new run into another output asks again: every grade valid
        fresh = _score(source, other, env)
        assert fresh.exit_code == 0, fresh.output
        assert fake.counters.batches == failed_batches + 1
        assert {status for status, _, _ in _grades(other)} == {"valid"}
        assert _row(fresh, "requests failed for good (this run)") == "0"

        # the first output's --retry-failed now finds the answers in the cache: no new batch
        retried = _score(source, first, env, "--retry-failed")
        assert retried.exit_code == 0, retried.output
        assert fake.counters.batches == failed_batches + 1
        assert {status for status, _, _ in _grades(first)} == {"valid"}
        assert fake.counters.chat_calls == 0


def test_retry_failed_asks_the_runs_own_failures_again(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(_line(f"t-{i}", f"({i})") for i in range(ITEMS)) + "\n")
    out = tmp_path / "out.jsonl"
    with run_fake_batches(FakeBatchConfig(fail_batches=99)) as fake:
        env = _env(fake.base_url, tmp_path)
        _failed_run(source, out, env)
        failed_batches = fake.counters.batches
        fake.config.fail_batches = 0
        retried = _score(source, out, env, "--retry-failed")
        assert retried.exit_code == 0, retried.output
        assert fake.counters.batches == failed_batches + 1
        assert {status for status, _, _ in _grades(out)} == {"valid"}
        assert _row(retried, "failed for good earlier (kept)") == "0"
        assert fake.counters.chat_calls == 0
    # asked again with a fresh retry budget: one submission since, not the spent budget's two
    with sqlite3.connect(tmp_path / "data" / "batch_ledger.sqlite3") as ledger:
        rows = ledger.execute("SELECT state, tries FROM requests").fetchall()
    assert sorted(set(rows)) == [("answered", 1)] and len(rows) == REQUESTS


def test_a_ledger_from_before_runs_asks_its_failures_again(tmp_path: Path) -> None:
    """A failure recorded before failures named their run belongs to no run now open."""
    from faithjudge.provider_batch.file_ledger import BatchLedger

    path = tmp_path / "batch_ledger.sqlite3"
    with sqlite3.connect(path) as old:
        old.executescript(
            "CREATE TABLE requests (key TEXT PRIMARY KEY, part INTEGER NOT NULL, "
            "tries INTEGER NOT NULL DEFAULT 0, state TEXT NOT NULL, status INTEGER, "
            "error TEXT) WITHOUT ROWID;"
            "INSERT INTO requests VALUES ('k', 1, 6, 'failed', 429, 'slow down');"
        )
    ledger = BatchLedger(path)
    try:
        ledger.begin_run("output:/somewhere/out.jsonl")
        assert ledger.state_of("k") == "failed_elsewhere"
        assert ledger.failed_in_run() == 0
    finally:
        ledger.close()
