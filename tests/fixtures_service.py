"""Fixtures of the REST service tests: the job-store backends and a running app.

``store_backend`` is parametrized over SQLite and PostgreSQL. PostgreSQL is reached at
``FAITHJUDGE_TEST_POSTGRES_URL``, by default the usual local server
(``postgresql+asyncpg://postgres@127.0.0.1:5432/test``; set it empty to turn the cases off);
each test gets a fresh schema that is dropped afterwards, so parallel runs never collide. When the
server is unreachable the PostgreSQL cases skip with the reason, unless
``FAITHJUDGE_TEST_REQUIRE_POSTGRES=1`` (CI), where they fail instead.

The variables are read at import: the suite-wide fixture clears ``FAITHJUDGE_*`` before tests run.
Use in a test module with ``store_backend = fixtures_service.store_backend``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import uvicorn
from faithjudge.api.app import create_app
from faithjudge.settings import Settings
from fastapi import FastAPI

LOCAL_POSTGRES = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
POSTGRES_URL = os.environ.get("FAITHJUDGE_TEST_POSTGRES_URL", LOCAL_POSTGRES)
REQUIRE_POSTGRES = os.environ.get("FAITHJUDGE_TEST_REQUIRE_POSTGRES", "") == "1"


@dataclass(frozen=True)
class Backend:
    """Settings that point the job store at one backend (empty for SQLite in the data dir)."""

    name: str
    overrides: dict[str, Any]

    @property
    def env(self) -> dict[str, str]:
        """The same, as ``FAITHJUDGE_*`` variables for a service subprocess."""
        return {f"FAITHJUDGE_{k.upper()}": str(v) for k, v in self.overrides.items()}


def _unavailable(reason: str) -> None:
    if REQUIRE_POSTGRES:
        pytest.fail(f"PostgreSQL is required (FAITHJUDGE_TEST_REQUIRE_POSTGRES=1): {reason}")
    pytest.skip(reason)


async def _admin(sql: str) -> None:
    import asyncpg

    dsn = POSTGRES_URL.replace("postgresql+asyncpg://", "postgresql://", 1)
    connection = await asyncpg.connect(dsn, timeout=5)
    try:
        await connection.execute(sql)
    finally:
        await connection.close()


@contextmanager
def postgres_schema() -> Iterator[Backend]:
    """A fresh schema on the test PostgreSQL (dropped on exit)."""
    if not POSTGRES_URL:
        _unavailable("FAITHJUDGE_TEST_POSTGRES_URL is empty: PostgreSQL cases turned off")
    schema = f"fj_test_{os.getpid()}_{uuid.uuid4().hex[:10]}"
    try:
        anyio.run(_admin, f'CREATE SCHEMA "{schema}"')
    except Exception as exc:
        _unavailable(f"PostgreSQL at {POSTGRES_URL} is unreachable: {exc!r}")
    try:
        yield Backend("postgres", {"database_url": POSTGRES_URL, "database_schema": schema})
    finally:
        anyio.run(_admin, f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(params=["sqlite", "postgres"])
def store_backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    if request.param == "sqlite":
        yield Backend("sqlite", {})
        return
    with postgres_schema() as backend:
        yield backend


@pytest.fixture
def postgres_backend() -> Iterator[Backend]:
    with postgres_schema() as backend:
        yield backend


@asynccontextmanager
async def running_app(settings: Settings) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """The app with its lifespan started, and a client that talks to it in-process."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://faithjudge") as client:
            yield app, client


async def wait_for_status(
    client: httpx.AsyncClient,
    job_id: str,
    statuses: tuple[str, ...] = ("completed",),
    *,
    within: float = 60.0,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    with anyio.fail_after(within):
        while True:
            response = await client.get(f"/v1/jobs/{job_id}", headers=headers)
            response.raise_for_status()
            body = response.json()
            if body["status"] in statuses:
                return body
            await anyio.sleep(0.05)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def serve_in_thread(app: FastAPI) -> Iterator[str]:
    """Serve ``app`` over real HTTP on loopback from a thread (lifespan included)."""
    config = uvicorn.Config(
        app, host="127.0.0.1", port=free_port(), log_level="warning", lifespan="on"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the service did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{config.port}"
    finally:
        server.should_exit = True
        thread.join(15)


@contextmanager
def serve_process(
    command: list[str], env: dict[str, str], port: int, log: Path, *, cwd: Path | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``command`` (a ``faithjudge serve --port PORT``) until ``/readyz`` answers 200.

    Its output goes to ``log``, quoted in the failure when it exits early or never gets ready;
    on exit it is terminated, and killed if it does not stop.
    """
    with log.open("ab") as sink:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=sink, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise AssertionError(f"the service exited early:\n{log.read_text()[-3000:]}")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"the service did not get ready:\n{log.read_text()[-3000:]}")
            time.sleep(0.1)
        yield process
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
