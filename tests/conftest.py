"""Test-wide fixtures: a clean environment, a temporary data dir, and no network but loopback."""

from __future__ import annotations

import ipaddress
import os
import socket
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings

# CI explores the same examples on every run (no flaky red builds); locally each run explores
# new ones. Either way a failing example is printed and can be replayed.
hypothesis_settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
hypothesis_settings.register_profile("dev", deadline=None)
hypothesis_settings.load_profile("ci" if os.environ.get("CI") else "dev")

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

_REAL_CONNECT = socket.socket.connect
_REAL_CONNECT_EX = socket.socket.connect_ex


def _is_local(address: object) -> bool:
    if not isinstance(address, tuple) or not address:
        return True  # unix sockets and the like
    host = address[0]
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: it would need DNS, which tests never do


def _guarded_connect(self: socket.socket, address: object) -> None:
    if not _is_local(address):
        raise ConnectionRefusedError(f"tests may not reach the network: {address!r}")
    return _REAL_CONNECT(self, address)


def _guarded_connect_ex(self: socket.socket, address: object) -> int:
    if not _is_local(address):
        raise ConnectionRefusedError(f"tests may not reach the network: {address!r}")
    return _REAL_CONNECT_EX(self, address)


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.startswith(("FAITHJUDGE_", "OPENAI_", "LITELLM_", "ANTHROPIC_")):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("FAITHJUDGE_DATA_DIR", str(tmp_path / "faithjudge-data"))
    monkeypatch.setattr(socket.socket, "connect", _guarded_connect)
    monkeypatch.setattr(socket.socket, "connect_ex", _guarded_connect_ex)
    # what a test taught the process about a judge server (a response format it refused, slow
    # replies) must not carry over to another test's server on a reused port
    from faithjudge.transport.judge_servers import forget_servers

    forget_servers()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def shared_data() -> Path:
    """The reader-study data beside the checkout; skips the test when it is absent."""
    if not (SHARED_DATA / "reader_study" / "dev.jsonl").is_file():
        pytest.skip("needs ../shared/data (reader study and recorded judge outputs)")
    return SHARED_DATA
