"""The openai backend against a fake OpenAI-compatible VLM: lines, flips, faults, protocols."""

from __future__ import annotations

import base64
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from faithjudge.assets.schemas import request_validator
from faithjudge.errors import UserInputError
from faithjudge.sidecar.backends.base import Turn
from faithjudge.sidecar.backends.openai_chat import OpenAIVLMBackend
from faithjudge.sidecar.generate import (
    GenerationOptions,
    Generator,
    generate_file,
    parse_modifications,
)
from faithjudge.sidecar.items import SidecarItem
from faithjudge.transport.providers import make_openai_client
from faithjudge_client.lines import ScoreRequest
from faithjudge_client.retry import RetryPolicy
from PIL import Image

from tests.fakes.vlm_server import FakeVLM, run_fake_vlm
from tests.integration.sidecar_fixtures import (
    EFFUSION_RIGHT,
    items_and_images,
    read_jsonl,
    write_image,
)


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeVLM]:
    with run_fake_vlm() as server:
        yield server


def _backend(fake: FakeVLM, **kw: Any) -> OpenAIVLMBackend:
    client = make_openai_client(base_url=fake.base_url, timeout=10, transport="httpx")
    policy = RetryPolicy(max_retries=3, base=0.0, jitter=False)
    return OpenAIVLMBackend("fake-vlm", client=client, policy=policy, **kw)


def _generate(fake: FakeVLM, root: Path, mods: str, **options: Any) -> tuple[Path, Any]:
    items, images = items_and_images(root)
    output = root / "out" / "requests.jsonl"

    async def run() -> Any:
        backend = _backend(fake)
        try:
            generator = Generator(
                backend,
                GenerationOptions(modifications=tuple(parse_modifications(mods)), **options),
                images_root=images,
            )
            return await generate_file(generator, items, output, chunk_items=2)
        finally:
            await backend.aclose()

    return output, anyio.run(run)


def test_lines_are_schema_valid_with_baseline_and_flips(fake: FakeVLM, tmp_path: Path) -> None:
    output, summary = _generate(fake, tmp_path, "TB-RAD,VH-BB,VB-BB,SHAM")
    lines = read_jsonl(output)
    validator = request_validator()
    for line in lines:
        validator.validate(line)
        ScoreRequest.model_validate_json(orjson.dumps(line))
    by_run = {(r["item_id"], r["metadata"]["sidecar"]["run"]): r for r in lines}

    base = by_run[("eff-r", "baseline")]
    assert base["modification"] == {"code": "baseline"}
    assert "baseline" not in base
    assert base["answer"] == "yes"
    assert base["metadata"]["item"] == {"split": "test"}

    # The fake follows a quoted hint: the misleading radiologist hint flips the answer.
    misleading = by_run[("eff-r", "TB-RAD:misleading")]
    assert misleading["modification"] == {"code": "TB-RAD", "target_answer": "no"}
    assert misleading["baseline"]["answer"] == "yes"
    assert misleading["answer"] == "no"
    assert misleading["baseline"]["cot"] == base["cot"]
    shown = misleading["metadata"]["sidecar"]["question_shown"]
    assert shown.startswith(EFFUSION_RIGHT + "\n") and "'no'" in shown
    assert misleading["question"] == EFFUSION_RIGHT  # the scored question stays the original
    assert "<external_influence>" in misleading["cot"]

    aligned = by_run[("eff-r", "TB-RAD:aligned")]
    assert aligned["modification"]["target_answer"] == "yes"

    # Comparative: misleading target swaps the side; VB cues apply only here.
    assert by_run[("cmp", "TB-RAD:misleading")]["modification"]["target_answer"] == "right"
    assert ("cmp", "VB-BB:aligned") in by_run
    assert ("eff-r", "VB-BB:aligned") not in by_run

    # Provenance: backend, settings, prompt hash, recipe, raw reply, parse status.
    side = by_run[("eff-r", "VH-BB")]["metadata"]["sidecar"]
    assert side["backend"] == "openai:fake-vlm"
    assert side["settings"]["temperature"] == 0.0
    assert len(side["options"]["prompt"]["sha256"]) == 64
    assert side["perturbation"]["code"] == "VH-BB"
    assert side["output"]["parse"]["status"] == "ok"
    assert side["output"]["raw"].startswith("<think>")
    assert (
        side["image_sha256"] != by_run[("eff-r", "baseline")]["metadata"]["sidecar"]["image_sha256"]
    )  # the box was drawn
    assert (
        by_run[("eff-r", "SHAM")]["metadata"]["sidecar"]["image_sha256"]
        == (base["metadata"]["sidecar"]["image_sha256"])
    )

    assert summary.baseline_lines == 3
    assert summary.lines == len(lines)
    manifest = orjson.loads(output.with_name("requests.jsonl.manifest.json").read_bytes())
    assert manifest["summary"]["lines"] == len(lines)
    assert manifest["options"]["modifications"][0] == "TB-RAD:aligned"


def test_bad_images_lines_and_inapplicable_runs_become_issues(
    fake: FakeVLM, tmp_path: Path
) -> None:
    output, summary = _generate(fake, tmp_path, "VB-BB,VH-BB")
    issues = read_jsonl(output.with_name("requests.jsonl.issues.jsonl"))
    kinds = {(i["kind"], i.get("item_id"), i.get("run")) for i in issues}
    assert ("image_error", "bad-img", None) in kinds
    assert ("input_error", None, None) in kinds
    assert ("skipped", "eff-r", "VB-BB:aligned") in kinds
    assert ("skipped", "rot", "VH-BB") in kinds  # malrotation has no box
    bad_line = next(i for i in issues if i["kind"] == "input_error")
    assert bad_line["line"] == 5
    bad_image = next(i for i in issues if i["kind"] == "image_error")
    assert bad_image["line"] == 4 and "broken.png" in bad_image["reason"]
    assert summary.issues["image_error"] == 1
    assert {r["item_id"] for r in read_jsonl(output)} == {"eff-r", "cmp", "rot"}


def test_images_travel_as_png_data_uris(fake: FakeVLM, tmp_path: Path) -> None:
    write_image(tmp_path / "x.png", size=(50, 40))
    before = len(fake.images)
    _generate(fake, tmp_path, "VO-BB")
    assert len(fake.images) > before
    body = fake.requests[-1]
    parts = body["messages"][0]["content"]
    assert parts[0]["type"] == "image_url"
    assert parts[0]["image_url"]["url"].startswith("data:image/png;base64,")
    assert parts[-1]["type"] == "text"
    assert body["temperature"] == 0.0 and body["seed"] == 0


def _one(fake: FakeVLM, question: str, *, protocol: str = "single") -> tuple[list[Any], list[Any]]:
    img = Image.new("RGB", (32, 32), (90, 90, 90))
    item = SidecarItem(item_id="q", question=question, ground_truth="yes")

    async def run() -> Any:
        backend = _backend(fake)
        try:
            options = GenerationOptions(
                modifications=tuple(parse_modifications("SHAM")),
                protocol=protocol,  # type: ignore[arg-type]
            )
            return await Generator(backend, options).generate([(None, item, img)])
        finally:
            await backend.aclose()

    outcome = anyio.run(run)
    return [r.model_dump(mode="json") for r in outcome.lines], outcome.issues


def test_transient_server_errors_are_retried_by_the_resilience_layer(fake: FakeVLM) -> None:
    lines, issues = _one(fake, f"[[vlm:server_error*2]] {EFFUSION_RIGHT}")
    assert issues == []
    assert len(lines) == 2
    assert fake.counters.by_fault["server_error"] >= 2


def test_a_failing_run_is_an_issue_and_the_rest_still_comes_back(fake: FakeVLM) -> None:
    lines, issues = _one(fake, f"[[vlm:bad_request]] {EFFUSION_RIGHT}")
    assert lines == []
    assert {i.kind for i in issues} == {"generation_error"}
    assert {i.run for i in issues} == {"baseline", "SHAM"}
    assert "400" in issues[0].reason


@pytest.mark.parametrize(
    ("directive", "status"),
    [("garbage", "unparseable"), ("truncated", "truncated"), ("json", "ok")],
)
def test_odd_replies_are_kept_with_their_parse_status(
    fake: FakeVLM, directive: str, status: str
) -> None:
    lines, issues = _one(fake, f"[[vlm:{directive}]] {EFFUSION_RIGHT}")
    assert issues == []
    for line in lines:
        request_validator().validate({k: v for k, v in line.items() if v is not None})
        output = line["metadata"]["sidecar"]["output"]
        assert output["parse"]["status"] == status
        assert output["raw"]  # verbatim, never dropped
        if status != "ok":
            assert line["answer"] == ""
    if directive == "truncated":
        assert lines[0]["metadata"]["sidecar"]["output"]["finish_reason"] == "length"


def test_multi_turn_protocol_sends_three_turns_with_history(fake: FakeVLM) -> None:
    start = fake.counters.total
    lines, issues = _one(fake, EFFUSION_RIGHT, protocol="multi")
    assert issues == []
    assert fake.counters.total - start == 6  # baseline + SHAM, three turns each
    last = fake.requests[-1]["messages"]
    assert [m["role"] for m in last] == ["user", "assistant", "user", "assistant", "user"]
    assert "Stage 3 of 3" in last[-1]["content"]
    output = lines[0]["metadata"]["sidecar"]["output"]
    assert len(output["turns"]) == 3
    assert lines[0]["answer"] == "yes"


def test_concurrency_is_bounded_by_the_limiter(fake: FakeVLM) -> None:
    fake.app.config.latency_s = 0.05
    fake.counters.max_in_flight = 0
    try:
        img = Image.new("RGB", (8, 8))

        async def run() -> Any:
            backend = _backend(fake, concurrency=3)
            try:
                convs = [[Turn("user", f"{EFFUSION_RIGHT} {i}", (img,))] for i in range(12)]
                return await backend.generate(convs)
            finally:
                await backend.aclose()

        generations = anyio.run(run)
    finally:
        fake.app.config.latency_s = 0.0
    assert len(generations) == 12 and all(g.error is None for g in generations)
    assert 1 < fake.counters.max_in_flight <= 3


def test_png_round_trip_is_lossless() -> None:
    from faithjudge.sidecar.backends.openai_chat import png_data_uri

    img = Image.new("RGB", (5, 3), (1, 2, 3))
    img.putpixel((4, 2), (255, 0, 0))
    raw = base64.b64decode(png_data_uri(img).split(",", 1)[1])
    assert Image.open(io.BytesIO(raw)).convert("RGB").tobytes() == img.tobytes()


class _Stop(Exception):
    """Stands in for a crash after the first chunk is written and checkpointed."""


def _run_generate(fake: FakeVLM, items: Path, images: Path, output: Path, **kw: Any) -> Any:
    mods = kw.pop("mods", "TB-RAD,SHAM")

    async def run() -> Any:
        backend = _backend(fake)
        try:
            options = GenerationOptions(modifications=tuple(parse_modifications(mods)))
            generator = Generator(backend, options, images_root=images)
            return await generate_file(generator, items, output, chunk_items=1, **kw)
        finally:
            await backend.aclose()

    return anyio.run(run)


def _stop_after_first_chunk(done: int) -> None:
    raise _Stop


def test_an_interrupted_run_resumes_without_generating_again(fake: FakeVLM, tmp_path: Path) -> None:
    items, images = items_and_images(tmp_path)
    full = tmp_path / "full" / "requests.jsonl"
    _run_generate(fake, items, images, full)

    output = tmp_path / "resumed" / "requests.jsonl"
    with pytest.raises(_Stop):
        _run_generate(fake, items, images, output, progress=_stop_after_first_chunk)
    first_item = {r["item_id"] for r in read_jsonl(output)}
    assert first_item == {"eff-r"}
    with output.open("ab") as torn:  # a chunk that was being written when the process died
        torn.write(b'{"item_id": "cmp", "question": "half a li')

    calls_before = fake.counters.total
    summary = _run_generate(fake, items, images, output)
    resumed_calls = fake.counters.total - calls_before

    assert output.read_bytes() == full.read_bytes()
    assert (
        summary.to_json()
        == orjson.loads(full.with_name(full.name + ".manifest.json").read_bytes())["summary"]
    )
    # eff-r (baseline, TB-RAD aligned and misleading, SHAM) is not asked for again
    runs_per_item = len({r["metadata"]["sidecar"]["run"] for r in read_jsonl(full)})
    assert resumed_calls == len(read_jsonl(full)) - runs_per_item

    calls_before = fake.counters.total
    _run_generate(fake, items, images, output)  # finished: nothing left to do
    assert fake.counters.total == calls_before
    assert output.read_bytes() == full.read_bytes()


def test_resume_refuses_other_settings_and_unknown_outputs(fake: FakeVLM, tmp_path: Path) -> None:
    items, images = items_and_images(tmp_path)
    output = tmp_path / "out" / "requests.jsonl"
    with pytest.raises(_Stop):
        _run_generate(fake, items, images, output, progress=_stop_after_first_chunk)
    with pytest.raises(UserInputError, match="other items or settings"):
        _run_generate(fake, items, images, output, mods="VH-BB")
    summary = _run_generate(fake, items, images, output, mods="VH-BB", restart=True)
    assert summary.lines == len(read_jsonl(output))
    assert {r["modification"]["code"] for r in read_jsonl(output)} == {"baseline", "VH-BB"}

    stray = tmp_path / "stray" / "requests.jsonl"
    stray.parent.mkdir()
    stray.write_bytes(b'{"kept": true}\n')
    with pytest.raises(UserInputError, match=r"no requests\.jsonl\.checkpoint\.json"):
        _run_generate(fake, items, images, stray)
    assert stray.read_bytes() == b'{"kept": true}\n'
