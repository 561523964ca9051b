"""A client that hangs up mid-upload leaves nothing stored and no traceback in the log."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from faithjudge.settings import Settings

from tests.fixtures_service import running_app

pytestmark = pytest.mark.anyio
DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo.jsonl"


async def test_an_upload_cut_off_mid_body_is_a_quiet_400_and_stores_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first_line = DEMO.read_bytes().splitlines()[0] + b"\n"
    incoming = [
        {"type": "http.request", "body": first_line, "more_body": True},
        {"type": "http.disconnect"},
    ]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return incoming.pop(0) if incoming else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": "/v1/jobs", "raw_path": b"/v1/jobs", "query_string": b"",
        "root_path": "", "headers": [(b"content-type", b"application/x-ndjson"),
                                     (b"host", b"faithjudge")],
        "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 80),
    }  # fmt: skip
    async with running_app(Settings(data_dir=tmp_path / "data")) as (app, client):
        with caplog.at_level(logging.INFO):
            await app(scope, receive, send)
        start = next(m for m in sent if m["type"] == "http.response.start")
        assert start["status"] == 400
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert (await client.get("/v1/jobs")).json()["items"] == []
