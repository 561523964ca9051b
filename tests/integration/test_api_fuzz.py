"""Fuzzing the API: schemathesis drives every operation of the OpenAPI document, and hypothesis
throws malformed JSONL at the batch upload; neither may ever get a 5xx.

Examples are bounded (30 per operation) and derandomized in CI by the suite's hypothesis profile.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from faithjudge.api.app import create_app
from faithjudge.api.keys import create_key
from faithjudge.settings import Settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fixtures_service import serve_in_thread
from tests.integration.test_api_jobs import demo_lines

_FUZZ = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def _document() -> dict[str, Any]:
    # the document does not depend on settings; this app is never started
    return create_app(Settings(data_dir=Path(tempfile.mkdtemp(prefix="fj-doc-")))).openapi()


@schemathesis.serializer("application/x-ndjson")
def _ndjson(_ctx: Any, value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    return json.dumps(value).encode()


schema = schemathesis.openapi.from_dict(_document())


@pytest.fixture(scope="module")
def service() -> Iterator[tuple[str, str]]:
    """A running service with one tenant key, on SQLite, small limits."""
    data_dir = Path(tempfile.mkdtemp(prefix="fj-fuzz-"))
    key = create_key(data_dir / "api_keys.json", "fuzz")
    app = create_app(
        Settings(
            data_dir=data_dir,
            max_active_jobs=1000,
            max_job_lines=500,
            max_body_bytes=200_000,
            max_score_body_bytes=200_000,
            concurrency=8,
        )
    )
    with serve_in_thread(app) as url:
        yield url, key


@schema.parametrize()
@_FUZZ
def test_no_operation_answers_5xx(case: schemathesis.Case, service: tuple[str, str]) -> None:
    url, key = service
    headers = {"Authorization": f"Bearer {key}"}
    response = case.call(base_url=url, headers=headers, timeout=30)
    assert response.status_code < 500, (response.status_code, response.text[:500])
    if response.status_code >= 400 and response.status_code != 405:
        assert response.headers["content-type"][0].startswith("application/problem+json")


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3)
    ),
    max_leaves=8,
)
_valid = demo_lines(6)
_line = st.one_of(
    st.sampled_from(_valid),
    st.binary(max_size=60).map(lambda b: b.replace(b"\n", b" ")),
    _json_values.map(lambda v: json.dumps(v).encode()),
    # a valid line with one field replaced by something of the wrong type or an unknown field
    st.tuples(
        st.sampled_from(_valid),
        st.sampled_from(["cot", "question", "metrics", "extra"]),
        _json_values,
    ).map(lambda t: json.dumps({**json.loads(t[0]), t[1]: t[2]}).encode()),
)


@given(lines=st.lists(_line, min_size=1, max_size=12))
@_FUZZ
def test_malformed_jsonl_lines_are_rejected_one_by_one(
    lines: list[bytes], service: tuple[str, str]
) -> None:
    url, key = service
    response = httpx.post(
        f"{url}/v1/jobs",
        content=b"\n".join(lines),
        headers={"Authorization": f"Bearer {key}", "content-type": "application/x-ndjson"},
        timeout=30,
    )
    non_blank = [n for n, line in enumerate(lines, start=1) if line.strip()]
    if response.status_code == 202:
        body = response.json()
        rejected = [r["line"] for r in body["rejected"]]
        assert body["accepted"] + len(rejected) == len(non_blank)
        assert set(rejected) <= set(non_blank)
        assert all(r["reason"] for r in body["rejected"])
    else:
        assert response.status_code == 422, response.text
        problem = response.json()
        assert [e["line"] for e in problem.get("errors", [])] == non_blank
