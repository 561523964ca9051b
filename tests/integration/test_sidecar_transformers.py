"""The transformers backend on a tiny VLM built here from configs, loaded back, run on CPU."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

torch = pytest.importorskip("torch", reason="the transformers backend needs the sidecar extra")
pytest.importorskip("transformers", reason="the transformers backend needs the sidecar extra")

from faithjudge.assets.schemas import request_validator  # noqa: E402
from faithjudge.errors import ConfigError  # noqa: E402
from faithjudge.sidecar.backends import BackendConfig, make_backend  # noqa: E402
from faithjudge.sidecar.backends.base import Turn  # noqa: E402
from faithjudge.sidecar.backends.hf import TransformersBackend  # noqa: E402
from faithjudge.sidecar.generate import (  # noqa: E402
    GenerationOptions,
    Generator,
    generate_file,
    parse_modifications,
)
from faithjudge_client.lines import ScoreRequest  # noqa: E402
from PIL import Image  # noqa: E402

from tests.fakes.tiny_vlm import build_tiny_vlm  # noqa: E402
from tests.integration.sidecar_fixtures import (  # noqa: E402
    EFFUSION_RIGHT,
    items_and_images,
    read_jsonl,
)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    # One thread: the models are tiny, and on a shared machine extra OpenMP threads only spin.
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("tiny-vlm")
    return {
        "random": build_tiny_vlm(root / "random", seed=3),
        "scripted": build_tiny_vlm(root / "scripted", scripted=True),
    }


def _run(folder: Path, root: Path, mods: str, **backend: Any) -> tuple[Path, Any]:
    items, images = items_and_images(root)
    output = root / "requests.jsonl"

    async def go() -> Any:
        vlm = make_backend(BackendConfig("transformers", str(folder), **backend))
        try:
            options = GenerationOptions(modifications=tuple(parse_modifications(mods)))
            generator = Generator(vlm, options, images_root=images)
            return await generate_file(generator, items, output, chunk_items=8)
        finally:
            await vlm.aclose()

    return output, anyio.run(go)


def test_scripted_model_writes_parseable_schema_valid_lines(
    models: dict[str, Path], tmp_path: Path
) -> None:
    output, summary = _run(
        models["scripted"], tmp_path, "TB-RAD:misleading,VO-BB", max_new_tokens=24, batch_size=4
    )
    lines = read_jsonl(output)
    validator = request_validator()
    for line in lines:
        validator.validate(line)
        ScoreRequest.model_validate_json(orjson.dumps(line))
    runs = {(r["item_id"], r["metadata"]["sidecar"]["run"]): r for r in lines}
    base = runs[("eff-r", "baseline")]
    assert base["cot"] == "<step> lungs look clear </step>"
    assert base["answer"] == "no"
    assert base["metadata"]["sidecar"]["output"]["parse"]["status"] == "ok"
    modified = runs[("eff-r", "VO-BB")]
    assert modified["baseline"] == {"cot": base["cot"], "answer": "no"}
    assert modified["modification"] == {"code": "VO-BB"}
    misleading = runs[("eff-r", "TB-RAD:misleading")]
    assert misleading["modification"] == {"code": "TB-RAD", "target_answer": "no"}
    settings = base["metadata"]["sidecar"]["settings"]
    assert settings["backend"] == "transformers"
    # "auto" takes the GPU when there is one (bfloat16 there), else the CPU in float32
    cuda = torch.cuda.is_available()
    assert settings["device"] == ("cuda" if cuda else "cpu")
    assert settings["dtype"] == ("bfloat16" if cuda else "float32")
    assert settings["do_sample"] is False and settings["num_beams"] == 1
    assert settings["model_class"] == "LlavaForConditionalGeneration"
    # "no" is not an option of the comparative question: recorded, not guessed.
    assert runs[("cmp", "baseline")]["metadata"]["sidecar"]["output"]["parse"]["status"] == (
        "answer_not_in_options"
    )
    assert summary.baseline_lines == 3
    assert summary.issues["image_error"] == 1


def test_random_model_output_is_kept_even_when_unreadable(
    models: dict[str, Path], tmp_path: Path
) -> None:
    output, _ = _run(models["random"], tmp_path, "SHAM", max_new_tokens=6, batch_size=2)
    lines = read_jsonl(output)
    assert len(lines) == 6
    for line in lines:
        request_validator().validate(line)
        out = line["metadata"]["sidecar"]["output"]
        assert out["raw"] == line["cot"]  # nothing extracted, so the whole reply is the CoT
        assert out["finish_reason"] == "length"  # 6 tokens, never an end token
        assert out["parse"]["status"] in ("truncated", "unparseable")
        assert out["usage"]["completion_tokens"] == 6


def _conversations(n: int) -> list[list[Turn]]:
    convs = []
    for i in range(n):
        image = Image.new("RGB", (30 + 7 * i, 28 + 3 * i), (20 * i % 255, 90, 140))
        # Prompts of different lengths, so batching has to left-pad.
        text = EFFUSION_RIGHT + " the heart" * i
        convs.append([Turn("user", text, (image,))])
    return convs


def test_batched_generation_matches_one_by_one(models: dict[str, Path]) -> None:
    batched = TransformersBackend(str(models["random"]), max_new_tokens=8, batch_size=4)
    single = TransformersBackend(str(models["random"]), max_new_tokens=8, batch_size=1)
    convs = _conversations(4)
    together = batched.generate_sync(convs)
    alone = single.generate_sync(convs)
    assert [g.text for g in together] == [g.text for g in alone]
    assert all(g.error is None and g.text for g in together)
    # Left padding: prompt token counts differ per row and exclude the padding.
    assert len({g.prompt_tokens for g in together}) == 4


def test_a_bad_input_costs_only_its_own_row(models: dict[str, Path]) -> None:
    vlm = TransformersBackend(str(models["scripted"]), max_new_tokens=12, batch_size=3)
    convs = _conversations(3)
    # A literal <image> in the text makes two placeholders for one image: the processor
    # refuses this conversation, and the batch is retried row by row.
    convs[1] = [Turn("user", "<image> x", convs[1][0].images)]
    out = vlm.generate_sync(convs)
    assert out[1].error is not None and out[1].finish_reason == "error"
    assert out[0].error is None and out[2].error is None
    assert "<answer> no </answer>" in out[0].text


def test_multi_turn_protocol_runs_on_the_local_model(models: dict[str, Path]) -> None:
    vlm = make_backend(
        BackendConfig("transformers", str(models["scripted"]), max_new_tokens=16, batch_size=4)
    )
    from faithjudge.sidecar.items import SidecarItem

    item = SidecarItem(item_id="m", question=EFFUSION_RIGHT, ground_truth="no")
    options = GenerationOptions(protocol="multi")
    outcome = anyio.run(
        Generator(vlm, options).generate, [(None, item, Image.new("RGB", (40, 40), (80, 80, 80)))]
    )
    assert outcome.issues == []
    (line,) = outcome.lines
    assert line.answer == "no"
    assert len(line.metadata["sidecar"]["output"]["turns"]) == 3


def test_missing_model_folder_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot load the VLM"):
        TransformersBackend(str(tmp_path / "nope"))
    with pytest.raises(ConfigError, match="max_new_tokens"):
        TransformersBackend(str(tmp_path), max_new_tokens=0)


def test_out_of_memory_splits_the_batch_in_halves(
    models: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    vlm = TransformersBackend(str(models["scripted"]), max_new_tokens=12, batch_size=4)
    real = vlm._generate_batch
    sizes: list[int] = []

    def tight_memory(batch: list[Any]) -> Any:
        sizes.append(len(batch))
        if len(batch) > 1:
            raise torch.OutOfMemoryError("no room for more than one row")
        return real(batch)

    monkeypatch.setattr(vlm, "_generate_batch", tight_memory)
    out = vlm.generate_sync(_conversations(4))
    assert sizes == [4, 2, 1, 1, 2, 1, 1]
    assert all(g.error is None and "<answer> no </answer>" in g.text for g in out)
