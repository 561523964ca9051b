"""``faithjudge-sidecar generate`` end to end: items -> VLM -> request lines -> scored results."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from faithjudge.cli.main import app as faithjudge_app
from faithjudge.sidecar.cli import app as sidecar_app
from faithjudge_client.lines import ItemResult
from typer.testing import CliRunner

from tests.fakes.vlm_server import FakeVLM, run_fake_vlm
from tests.integration.sidecar_fixtures import items_and_images, read_jsonl

runner = CliRunner()


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeVLM]:
    with run_fake_vlm() as server:
        yield server


def _generate(fake: FakeVLM, root: Path, *extra: str) -> tuple[Any, Path]:
    items, images = items_and_images(root)
    output = root / "requests.jsonl"
    args = [
        "generate", str(items), "--images", str(images), "--backend", "openai",
        "--base-url", fake.base_url, "--model", "fake-vlm", "-o", str(output),
        "-m", "TB-RAD:misleading,SHAM", "--no-progress", *extra,
    ]  # fmt: skip
    return runner.invoke(sidecar_app, args), output


def test_generate_then_score_gives_flips_and_results(fake: FakeVLM, tmp_path: Path) -> None:
    result, requests = _generate(fake, tmp_path)
    assert result.exit_code == 0, result.output
    assert "request lines" in result.output
    lines = read_jsonl(requests)
    assert len(lines) == 9  # 3 good items x (baseline, TB-RAD:misleading, SHAM)

    results_path = tmp_path / "results.jsonl"
    scored = runner.invoke(
        faithjudge_app,
        ["score", str(requests), "-o", str(results_path), "--judge", "lexicon:v1",
         "--no-progress", "--no-cache", "--data-dir", str(tmp_path / "data")],
    )  # fmt: skip
    assert scored.exit_code == 0, scored.output
    results = [ItemResult.model_validate_json(orjson.dumps(r)) for r in read_jsonl(results_path)]
    assert len(results) == len(lines)
    assert all(r.error is None for r in results)
    by_run = {
        (r.item_id, line["metadata"]["sidecar"]["run"]): r
        for r, line in zip(results, lines, strict=True)
    }
    # The fake follows the misleading hint, so the scorer sees a flip against the baseline.
    flipped = by_run[("eff-r", "TB-RAD:misleading")]
    assert flipped.flip is not None and flipped.flip.value is True
    assert flipped.modification is not None and flipped.modification.aligned is False
    sham = by_run[("eff-r", "SHAM")]
    assert sham.flip is not None and sham.flip.value is False
    base = by_run[("eff-r", "baseline")]
    assert base.flip is not None and base.flip.value is None
    assert base.modification is not None and base.modification.kind == "baseline"
    for r in results:
        assert set(r.metrics) == {"clinical_fidelity", "causal_attribution", "confidence_tone"}


def test_unusable_inputs_exit_3_with_a_message(fake: FakeVLM, tmp_path: Path) -> None:
    missing = runner.invoke(
        sidecar_app,
        ["generate", str(tmp_path / "none.jsonl"), "--images", str(tmp_path),
         "--model", "m", "-o", str(tmp_path / "o.jsonl")],
    )  # fmt: skip
    assert missing.exit_code == 3
    assert "items file not found" in missing.output
    bad_mod, _ = _generate(fake, tmp_path, "-m", "VH-BB:aligned")
    assert bad_mod.exit_code == 3
    assert "points at no answer" in bad_mod.output
    bad_backend, _ = _generate(fake, tmp_path, "--backend", "tensorflow")
    assert bad_backend.exit_code == 3
    assert "unknown backend" in bad_backend.output


def test_submit_uploads_the_lines_as_one_ndjson_batch(
    fake: FakeVLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import faithjudge_client

    seen: dict[str, Any] = {}

    def handler(request: httpx.Request) -> httpx.Response:
        seen["path"] = request.url.path
        seen["type"] = request.headers["content-type"]
        seen["lines"] = [orjson.loads(x) for x in request.read().splitlines() if x.strip()]
        return httpx.Response(
            202,
            json={
                "id": "b-1",
                "status": "queued",
                "accepted": len(seen["lines"]),
                "rejected": [],
                "created_at": "2026-01-01T00:00:00Z",
            },
        )

    real = faithjudge_client.FaithJudgeClient

    def client(url: str, key: str | None) -> Any:
        return real(url, key, transport=httpx.MockTransport(handler))

    monkeypatch.setattr(faithjudge_client, "FaithJudgeClient", client)
    result, requests = _generate(fake, tmp_path, "--submit", "http://faithjudge.test")
    assert result.exit_code == 0, result.output
    assert seen["path"] == "/v1/jobs"
    assert seen["type"].startswith("application/x-ndjson")
    assert seen["lines"] == read_jsonl(requests)
    assert "b-1" in result.output


def test_serve_refuses_a_missing_images_folder(tmp_path: Path) -> None:
    result = runner.invoke(
        sidecar_app,
        ["serve", "--model", "m", "--backend", "openai", "--images", str(tmp_path / "none")],
    )
    assert result.exit_code == 3
    assert "images folder not found" in result.output


def test_perturbation_parameters_reach_the_recipe(fake: FakeVLM, tmp_path: Path) -> None:
    result, requests = _generate(
        fake, tmp_path, "-m", "blur_sigma,shuffle", "--params", '{"blur_sigma": {"sigma": 2}}'
    )
    assert result.exit_code == 0, result.output
    recipes = {
        line["metadata"]["sidecar"]["run"]: line["metadata"]["sidecar"]["perturbation"]
        for line in read_jsonl(requests)
        if line["item_id"] == "eff-r"
    }
    assert recipes["blur_sigma"]["params"]["sigma"] == 2
    assert recipes["shuffle"]["code"] == "shuffle"
    bad, _ = _generate(fake, tmp_path, "--params", "[1]")
    assert bad.exit_code == 3 and "params must map codes" in bad.output


def test_pool_feeds_image_substitutions(fake: FakeVLM, tmp_path: Path) -> None:
    pool = tmp_path / "pool.jsonl"
    pool.write_bytes(
        b'{"image_id": "p1", "label": "yes", "path": "b.png", "patient_id": "P1"}\n'
        b'{"image_id": "p2", "label": "no", "path": "c.png", "patient_id": "P2"}\n'
    )
    result, requests = _generate(
        fake, tmp_path, "-m", "swap_same_label,hard_negative", "--pool", str(pool)
    )
    assert result.exit_code == 0, result.output
    runs = {
        (line["item_id"], line["metadata"]["sidecar"]["run"]): line["metadata"]["sidecar"]
        for line in read_jsonl(requests)
    }
    assert runs[("eff-r", "swap_same_label")]["perturbation"]["pool_choice"]["image_id"] == "p1"
    assert runs[("eff-r", "hard_negative")]["perturbation"]["pool_choice"]["image_id"] == "p2"
    issues = read_jsonl(requests.with_name("requests.jsonl.issues.jsonl"))
    assert any(
        i.get("item_id") == "cmp" and i.get("run") == "swap_same_label" and i["kind"] == "skipped"
        for i in issues
    )
    bad = tmp_path / "bad_pool.jsonl"
    bad.write_bytes(b'{"image_id": "p1", "label": "yes"}\n')
    refused, _ = _generate(fake, tmp_path, "--pool", str(bad))
    assert refused.exit_code == 3 and "pool line 1" in refused.output
