"""The sidecar app: one item with an uploaded or named image, NDJSON batches, bad input."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from faithjudge.assets.schemas import request_validator
from faithjudge.sidecar.app import create_app
from faithjudge.sidecar.backends.openai_chat import OpenAIVLMBackend
from faithjudge.sidecar.generate import GenerationOptions, Generator, parse_modifications
from faithjudge.transport.providers import make_openai_client
from faithjudge_client.retry import RetryPolicy
from fastapi.testclient import TestClient

from tests.fakes.vlm_server import run_fake_vlm
from tests.integration.sidecar_fixtures import EFFUSION_RIGHT, items_and_images


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, Path]]:
    root = tmp_path_factory.mktemp("app")
    items, images = items_and_images(root)
    with run_fake_vlm() as fake:
        client = make_openai_client(base_url=fake.base_url, timeout=10, transport="httpx")
        backend = OpenAIVLMBackend(
            "fake-vlm", client=client, policy=RetryPolicy(max_retries=0, base=0.0)
        )
        options = GenerationOptions(modifications=tuple(parse_modifications("TB-RAD:misleading")))
        app = create_app(Generator(backend, options, images_root=images))
        with TestClient(app) as http:
            yield http, items


ITEM = {"item_id": "x1", "image": "a.png", "question": EFFUSION_RIGHT, "ground_truth": "yes"}


def test_one_item_by_name(setup: tuple[TestClient, Path]) -> None:
    http, _ = setup
    response = http.post("/v1/generate", json={"item": ITEM})
    assert response.status_code == 200, response.text
    body = response.json()
    assert [line["metadata"]["sidecar"]["run"] for line in body["lines"]] == [
        "baseline",
        "TB-RAD:misleading",
    ]
    for line in body["lines"]:
        request_validator().validate(line)
    assert body["issues"] == []
    assert body["manifest"]["backend"] == "openai:fake-vlm"


def test_one_item_with_uploaded_image_and_own_modifications(
    setup: tuple[TestClient, Path],
) -> None:
    http, items = setup
    png = (items.parent / "images" / "b.png").read_bytes()
    item = {k: v for k, v in ITEM.items() if k != "image"}
    response = http.post(
        "/v1/generate",
        json={
            "item": item,
            "image_base64": base64.b64encode(png).decode(),
            "modifications": ["SHAM"],
        },
    )
    assert response.status_code == 200, response.text
    runs = [line["metadata"]["sidecar"]["run"] for line in response.json()["lines"]]
    assert runs == ["baseline", "SHAM"]


def test_bad_uploads_are_issues_not_errors(setup: tuple[TestClient, Path]) -> None:
    http, _ = setup
    for payload in ("***not base64***", base64.b64encode(b"GIF89a broken").decode()):
        response = http.post("/v1/generate", json={"item": ITEM, "image_base64": payload})
        assert response.status_code == 200
        body = response.json()
        assert body["lines"] == []
        assert body["issues"][0]["kind"] == "image_error"
        assert body["issues"][0]["item_id"] == "x1"


def test_item_without_image_is_an_issue(setup: tuple[TestClient, Path]) -> None:
    http, _ = setup
    item = {k: v for k, v in ITEM.items() if k != "image"}
    body = http.post("/v1/generate", json={"item": item}).json()
    assert body["lines"] == [] and body["issues"][0]["kind"] == "image_error"


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"item": {**ITEM, "ground_truth": "maybe"}}, "item"),
        ({"item": ITEM, "extra": 1}, "extra"),
        ({"item": ITEM, "modifications": ["NOPE"]}, "modifications"),
        ({"item": ITEM, "modifications": ["VH-BB:aligned"]}, "modifications"),
    ],
)
def test_invalid_bodies_are_422_naming_the_field(
    setup: tuple[TestClient, Path], payload: dict[str, object], field: str
) -> None:
    http, _ = setup
    response = http.post("/v1/generate", json=payload)
    assert response.status_code == 422
    assert response.headers["content-type"].startswith("application/problem+json")
    assert field in response.text


def test_not_json_is_422(setup: tuple[TestClient, Path]) -> None:
    http, _ = setup
    response = http.post("/v1/generate", content=b"{", headers={"content-type": "application/json"})
    assert response.status_code == 422


def test_batch_of_items_as_ndjson(setup: tuple[TestClient, Path]) -> None:
    http, items = setup
    response = http.post(
        "/v1/generate/batches?modifications=SHAM,VH-BB",
        content=items.read_bytes(),
        headers={"content-type": "application/x-ndjson"},
    )
    assert response.status_code == 200, response.text
    body = response.json()
    kinds = sorted(i["kind"] for i in body["issues"])
    assert kinds == ["image_error", "input_error", "skipped"]
    assert {line["item_id"] for line in body["lines"]} == {"eff-r", "cmp", "rot"}
    assert body["manifest"]["options"]["modifications"] == ["SHAM", "VH-BB"]
    for line in body["lines"]:
        request_validator().validate(line)
    # The lines are ready to upload to the scoring service as NDJSON.
    ndjson = b"\n".join(orjson.dumps(line) for line in body["lines"])
    assert ndjson.count(b"\n") == len(body["lines"]) - 1


def test_batch_needs_ndjson_and_a_bounded_body(setup: tuple[TestClient, Path]) -> None:
    http, _ = setup
    wrong = http.post("/v1/generate/batches", json=[ITEM])
    assert wrong.status_code == 415
    huge = http.post(
        "/v1/generate/batches",
        content=b"x",
        headers={"content-type": "application/x-ndjson", "content-length": str(10**9)},
    )
    assert huge.status_code == 413


def test_health(setup: tuple[TestClient, Path]) -> None:
    http, _ = setup
    assert http.get("/healthz").json() == {"status": "ok", "backend": "openai:fake-vlm"}
