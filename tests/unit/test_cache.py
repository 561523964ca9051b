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


def test_why_a_reply_ended_and_its_format_are_kept(tmp_path: Path) -> None:
    cut = JudgeResponse(text='{"sco', finish_reason="length", response_format="json_object+schema")
    with ResponseCache(tmp_path / "c.sqlite3", batch_size=1) as cache:
        cache.put("cut", cut)
        cache.put("plain", response())
        pending = cache.get("cut")
    assert pending is not None and pending.finish_reason == "length"
    with ResponseCache(tmp_path / "c.sqlite3") as reopened:
        hit, plain = reopened.get("cut"), reopened.get("plain")
    assert hit is not None and (hit.finish_reason, hit.response_format) == (
        "length",
        "json_object+schema",
    )
    assert plain is not None and (plain.finish_reason, plain.response_format) == (None, None)


def test_a_cache_written_before_those_columns_is_read_and_extended(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    old = sqlite3.connect(path)
    old.execute(
        "CREATE TABLE responses (key TEXT PRIMARY KEY, text TEXT NOT NULL, model TEXT, "
        "fingerprint TEXT, prompt_tokens INTEGER NOT NULL DEFAULT 0, completion_tokens INTEGER "
        "NOT NULL DEFAULT 0, created_at REAL NOT NULL) WITHOUT ROWID"
    )
    old.execute("INSERT INTO responses VALUES ('k', 'old text', 'm', NULL, 3, 4, 0)")
    old.execute("PRAGMA user_version=1")
    old.commit()
    old.close()
    with ResponseCache(path) as cache:
        hit = cache.get("k")
        assert hit is not None and (hit.text, hit.usage.completion_tokens) == ("old text", 4)
        assert hit.finish_reason is None and hit.usage.cached_tokens == 0
        usage = Usage(prompt_tokens=2048, completion_tokens=5, cached_tokens=1920)
        cache.put("new", JudgeResponse(text="t", finish_reason="stop", usage=usage))
        again = cache.get("new")
        assert again is not None and again.finish_reason == "stop" and again.usage == usage
    with ResponseCache(path) as reopened:  # committed, not only buffered
        kept = reopened.get("new")
        assert kept is not None and kept.usage.cached_tokens == 1920
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone() == (3,)
    conn.close()
