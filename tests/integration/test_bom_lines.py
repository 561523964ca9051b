"""A UTF-8 byte order mark at the start of a line is ignored, in files and in batch uploads.

Windows editors write one at the start of a file, and ``cat a.jsonl b.jsonl`` carries the
second file's inward; RFC 8259 lets a reader ignore it. The lines are real rows: they are scored.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from faithjudge.pipeline.runtime import open_scorer
from faithjudge.runners.file_runner import score_file
from faithjudge.settings import Settings
from faithjudge_client.lines import ItemResult

from tests import fixtures_service
from tests.fixtures_service import Backend, running_app, wait_for_status

pytestmark = pytest.mark.anyio
store_backend = fixtures_service.store_backend

BOM = "\ufeff".encode()
DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo.jsonl"


def _body() -> bytes:
    lines = [x for x in DEMO.read_bytes().splitlines() if x.strip()][:3]
    return BOM + lines[0] + b"\r\n" + lines[1] + b"\n" + BOM + lines[2] + b"\n"


async def test_a_file_with_byte_order_marks_is_scored_line_by_line(tmp_path: Path) -> None:
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_bytes(_body())
    async with open_scorer(Settings(data_dir=tmp_path / "data")) as scorer:
        await score_file(scorer, source, out, concurrency=2)
    results = [ItemResult.model_validate_json(x) for x in out.read_bytes().splitlines()]
    assert [r.line for r in results] == [1, 2, 3]
    assert all(r.error is None for r in results), [r.error for r in results]


async def test_a_batch_with_byte_order_marks_accepts_every_line(
    store_backend: Backend, tmp_path: Path
) -> None:
    settings = Settings(data_dir=tmp_path / "data", **store_backend.overrides)
    async with running_app(settings) as (_, client):
        ndjson = {"content-type": "application/x-ndjson"}
        response = await client.post("/v1/jobs", content=_body(), headers=ndjson)
        assert response.status_code == 202, response.text
        assert response.json()["accepted"] == 3 and response.json()["rejected"] == []
        await wait_for_status(client, response.json()["id"])
        results = await client.get(f"/v1/jobs/{response.json()['id']}/results")
        lines = [orjson.loads(x) for x in results.content.splitlines()]
        assert [x["error"] for x in lines] == [None, None, None]


def test_report_and_split_read_files_that_start_with_a_byte_order_mark(tmp_path: Path) -> None:
    from faithjudge.cli.main import app
    from typer.testing import CliRunner

    source = tmp_path / "in.jsonl"
    source.write_bytes(_body())
    results = tmp_path / "results.jsonl"
    runner = CliRunner()
    scored = runner.invoke(app, ["score", str(source), "-o", str(results), "--no-progress",
                                 "--data-dir", str(tmp_path / "d")])  # fmt: skip
    assert scored.exit_code == 0, scored.output
    results.write_bytes(BOM + results.read_bytes())
    report = runner.invoke(app, ["report", str(results), "--json", str(tmp_path / "r.json")])
    assert report.exit_code == 0, report.output
    assert orjson.loads((tmp_path / "r.json").read_bytes())["summary"]["lines"] == 3
    split = runner.invoke(app, ["split", str(source), "--dev", str(tmp_path / "a.jsonl"),
                                "--test", str(tmp_path / "b.jsonl")])  # fmt: skip
    assert split.exit_code == 0, split.output
