"""ResponseCache: keys, round trips, batched writes that survive close, WAL on disk."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from types import MappingProxyType

import pytest
from faithjudge.transport.base import JudgeResponse, Usage
from faithjudge.transport.cache import ResponseCache, cache_key

MATERIAL = {
    "backend": "openai",
    "base_url": "http://127.0.0.1:1/v1",
    "model": "m",
    "messages": [["system", "s"], ["user", "u"]],
    "temperature": 0.0,
    "seed": 0,
    "max_tokens": 1024,
    "response_format": {"type": "json_object"},
}


def response(text: str = '{"score": 2}') -> JudgeResponse:
    return JudgeResponse(
        text=text, model="m-2025", usage=Usage(12, 5), fingerprint="fp_1", attempts=3
    )


def test_key_is_sha256_hex_and_ignores_key_order() -> None:
    key = cache_key(MATERIAL)
    assert len(key) == 64 and int(key, 16) >= 0
    assert cache_key(dict(reversed(list(MATERIAL.items())))) == key


def test_key_changes_with_anything_that_is_sent() -> None:
    key = cache_key(MATERIAL)
    for name, value in [
        ("model", "m2"),
        ("base_url", "http://127.0.0.1:2/v1"),
        ("messages", [["system", "s"], ["user", "u!"]]),
        ("temperature", 0.1),
        ("seed", None),
        ("max_tokens", 512),
        ("response_format", {"type": "json_schema"}),
    ]:
        assert cache_key(MATERIAL | {name: value}) != key, name


def test_key_accepts_read_only_mappings_and_tuples() -> None:
    frozen = MATERIAL | {
        "messages": (("system", "s"), ("user", "u")),
        "response_format": MappingProxyType({"type": "json_object"}),
    }
    assert cache_key(frozen) == cache_key(MATERIAL)


def test_round_trip_marks_cached() -> None:
    with ResponseCache(":memory:") as cache:
        assert cache.get("k") is None
        cache.put("k", response())
        hit = cache.get("k")
    assert hit == JudgeResponse(
        text='{"score": 2}',
        model="m-2025",
        usage=Usage(12, 5),
        fingerprint="fp_1",
        attempts=0,
        cached=True,
    )


def test_put_replaces() -> None:
    with ResponseCache(":memory:", batch_size=1) as cache:
        cache.put("k", response("a"))
        cache.put("k", response("b"))
        hit = cache.get("k")
        assert hit is not None and hit.text == "b" and len(cache) == 1


def test_writes_are_batched_but_readable_at_once(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite3"
    cache = ResponseCache(path, batch_size=3)
    other = sqlite3.connect(path)
    count = "SELECT count(*) FROM responses"
    cache.put("a", response())
    cache.put("b", response())
    assert cache.get("a") is not None
    assert other.execute(count).fetchone() == (0,)
    cache.put("c", response())  # third put: batch committed
    assert other.execute(count).fetchone() == (3,)
    cache.put("d", response())
    cache.flush()
    assert other.execute(count).fetchone() == (4,)
    other.close()
    cache.close()


def test_close_keeps_every_put_and_is_idempotent(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite3"
    cache = ResponseCache(path, batch_size=1000)
    for i in range(10):
        cache.put(f"k{i}", response(str(i)))
    cache.close()
    cache.close()
    assert cache.closed
    with pytest.raises(RuntimeError, match="closed"):
        cache.get("k1")
    with ResponseCache(path) as reopened:
        assert len(reopened) == 10
        hit = reopened.get("k7")
        assert hit is not None and hit.text == "7"


def test_file_cache_uses_wal(tmp_path: Path) -> None:
    with ResponseCache(tmp_path / "c.sqlite3") as cache:
        assert cache.path.endswith("c.sqlite3")
    conn = sqlite3.connect(tmp_path / "c.sqlite3")
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    conn.close()


def test_invalid_batch_size() -> None:
    with pytest.raises(ValueError):
        ResponseCache(":memory:", batch_size=0)
