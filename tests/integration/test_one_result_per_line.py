"""One result per input line, CLI and service alike.

The same file through ``faithjudge score`` and through a service batch gives the same result
lines (provenance aside), rejected lines included, each at its line number with what could be
read of it; resuming the results stream at any offset gives the rest, and the report attributes
an error line to its model.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import orjson
import pytest
from faithjudge.cli.main import app
from faithjudge.settings import Settings
from typer.testing import CliRunner

from tests.fixtures_service import running_app, wait_for_status
from tests.integration.test_api_jobs import NDJSON, demo_lines

pytestmark = pytest.mark.anyio


def _body() -> bytes:
    good = demo_lines(6)
    nan = json.loads(good[2]) | {"item_id": "nan-1", "context": {"age": float("nan")}}
    off_option = json.loads(good[3]) | {"item_id": "off-1", "answer": "probably"}
    missing = {"item_id": "bad-1", "model": "vlm-x", "cot": "no question here"}
    lines = [
        good[0],
        b"{not json",
        good[1],
        json.dumps(nan).encode(),  # NaN: not a JSON number
        b"",  # blank lines are skipped, in the file and in the batch
        orjson.dumps(missing),
        json.dumps(off_option).encode(),
        good[4],
        b"[1, 2]",
        good[5],
    ]
    return b"\n".join(lines) + b"\n"


def _without_provenance(raw: bytes) -> dict:
    result = orjson.loads(raw)
    result.pop("provenance", None)
    for metric in result.get("metrics", {}).values():
        metric.pop("cache_hit", None)
        metric.pop("attempts", None)
    return result


async def test_the_cli_and_the_service_write_the_same_result_lines(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_bytes(_body())
    cli_out = tmp_path / "cli.jsonl"
    argv = ["score", str(source), "-o", str(cli_out), "--data-dir", str(tmp_path / "cli-data"),
            "--no-progress"]  # fmt: skip
    ran = await anyio.to_thread.run_sync(lambda: CliRunner().invoke(app, argv))
    assert ran.exit_code == 0, ran.output
    cli_lines = [_without_provenance(x) for x in cli_out.read_bytes().splitlines()]

    settings = Settings(data_dir=tmp_path / "svc-data", concurrency=4)
    async with running_app(settings) as (_, client):
        accepted = await client.post("/v1/jobs", content=_body(), headers=NDJSON)
        assert accepted.status_code == 202, accepted.text
        body = accepted.json()
        assert [r["line"] for r in body["rejected"]] == [2, 4, 6, 9]
        assert body["rejected"][2]["item_id"] == "bad-1" and body["rejected"][2]["model"] == "vlm-x"
        await wait_for_status(client, body["id"])
        response = await client.get(f"/v1/jobs/{body['id']}/results")
        service_raw = response.content.splitlines()
        # a client that lost count resumes anywhere and gets exactly the rest
        for offset in range(len(service_raw) + 1):
            tail = await client.get(f"/v1/jobs/{body['id']}/results", params={"offset": offset})
            assert tail.content.splitlines() == service_raw[offset:], offset
        report = await client.get(f"/v1/jobs/{body['id']}/report", params={"format": "json"})
        assert report.status_code == 200

    service_lines = [_without_provenance(x) for x in service_raw]
    assert [x["line"] for x in cli_lines] == [1, 2, 3, 4, 6, 7, 8, 9, 10]
    assert service_lines == cli_lines
    errors = {x["line"]: x for x in cli_lines if x.get("error")}
    assert (
        errors[4]["error"]["detail"] == "line 4: context.age: NaN or infinity is not a JSON number"
    )
    assert errors[4]["item_id"] == "nan-1" and errors[4]["model"] == "demo-vlm"
    assert errors[6]["item_id"] == "bad-1" and errors[6]["model"] == "vlm-x"
    off = next(x for x in cli_lines if x["item_id"] == "off-1")
    assert off["answer_in_options"] is False and off["metrics"]["clinical_fidelity"]["status"]
    # the report counts the error lines under their models; the two lines that are not JSON
    # objects at all belong to no model (the file holds two) and are no model of their own
    summary = report.json()["summary"]
    assert summary["models"] == ["demo-vlm", "vlm-x"]
    assert summary["input_errors"] == len(errors)
