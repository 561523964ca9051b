"""Sidecar perturbations: every code, determinism (also across processes), errors, applicability."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from faithjudge.scoring.modifications import lookup_modification
from faithjudge.sidecar.perturb import (
    BLUR_LADDER,
    CODES,
    HINTS,
    ImagePool,
    NotApplicable,
    PerturbationError,
    PerturbItem,
    PoolEntry,
    applicable,
    canonical_code,
    choose_misleading_target,
    perturb,
)
from faithjudge.sidecar.perturb.medvigil import gaussian_blur, gaussian_kernel
from PIL import Image

REPO_ROOT = Path(__file__).resolve().parents[2]

COMPARATIVE_Q = "Which side shows more severe pleural effusion? (right, left, same severity, none)"
COMPARATIVE_OPTS = ("right", "left", "same severity", "none")
BINARY_Q = "Is there a pleural effusion on the left? (yes or no)"
ORDINAL_Q = (
    "What is the severity of atelectasis on the right side? "
    "(none, questionable, mild, moderate, severe)"
)
ORDINAL_OPTS = ("none", "questionable", "mild", "moderate", "severe")


def _noise_image(width: int, height: int, seed: int) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8))


def comparative(gold: str = "right", target: str | None = "left", **kw: Any) -> PerturbItem:
    return PerturbItem("c-1", COMPARATIVE_Q, COMPARATIVE_OPTS, gold, target_answer=target, **kw)


def binary(gold: str = "yes", target: str | None = "no", **kw: Any) -> PerturbItem:
    box = kw.pop("mask_box", (0.1, 0.2, 0.35, 0.5))
    return PerturbItem("b-1", BINARY_Q, ("yes", "no"), gold, target, mask_box=box, **kw)


def _pool(seed: int = 11, count: int = 8) -> ImagePool:
    rng = np.random.default_rng(seed)
    entries = []
    for i in range(count):
        pixels = rng.integers(0, 256, (40, 48, 3), dtype=np.uint8)
        entries.append(
            PoolEntry(
                f"img-{i:02d}",
                "yes" if i % 2 else "no",
                patient_id=f"pt-{i // 2}",
                image=Image.fromarray(pixels),
                embedding=rng.normal(size=16),
            )
        )
    return ImagePool(entries)


# One working call per code: (item, params, needs pool).
CASES: dict[str, tuple[PerturbItem, dict[str, Any] | None, bool]] = {
    "BASELINE": (binary(), None, False),
    "SHAM": (binary(), None, False),
    "TB-RAD": (binary(), None, False),
    "TB-LA": (comparative(), None, False),
    "VB-BB": (comparative(), None, False),
    "VB-HM": (comparative(), None, False),
    "VH-BB": (comparative(), None, False),
    "VH-HM": (binary(), None, False),
    "VO-BB": (binary(), None, False),
    "target_mask": (binary(), None, False),
    "irrelevant_mask": (binary(), None, False),
    "swap_same_label": (binary(), {"image_id": "img-01", "patient_id": "pt-0"}, True),
    "blank": (binary(), None, False),
    "shuffle": (binary(), None, False),
    "no_image": (binary(), None, False),
    "corrupt": (binary(), None, False),
    "hard_negative": (binary(), {"image_id": "img-03"}, True),
    "roi_masked": (binary(), None, False),
    "roi_only": (binary(), None, False),
    "roi_progressive_mask": (binary(), {"k": 2}, False),
    "lr_flip": (binary(), None, False),
    "blur_sigma": (binary(), {"sigma": 2}, False),
}


def _run(code: str, seed: int = 0, size: tuple[int, int] = (131, 97)) -> Any:
    item, params, needs_pool = CASES[code]
    image = _noise_image(*size, seed=5)
    return perturb(
        code, image, item, params=params, seed=seed, pool=_pool() if needs_pool else None
    )


def _digest(result: Any) -> str:
    h = hashlib.sha256()
    if result.image is not None:
        h.update(f"{result.image.mode}{result.image.size}".encode())
        h.update(result.image.tobytes())
    h.update((result.hint or "").encode())
    recipe = {k: v for k, v in result.recipe.items() if k != "versions"}
    h.update(json.dumps(recipe, sort_keys=True).encode())
    return h.hexdigest()


def digests() -> dict[str, str]:
    """Output digest of every code (run in a child process by the determinism test)."""
    return {code: _digest(_run(code, seed=7)) for code in sorted(CODES)}


def test_every_code_has_a_case() -> None:
    assert set(CASES) == CODES


@pytest.mark.parametrize("code", sorted(CODES))
def test_each_code_runs_is_deterministic_and_leaves_the_input_alone(code: str) -> None:
    item, params, needs_pool = CASES[code]
    image = _noise_image(131, 97, seed=5)
    before = image.tobytes()
    first = perturb(code, image, item, params=params, seed=3, pool=_pool() if needs_pool else None)
    second = perturb(code, image, item, params=params, seed=3, pool=_pool() if needs_pool else None)
    assert image.tobytes() == before
    assert _digest(first) == _digest(second)
    recipe = first.recipe
    assert recipe["code"] == code and recipe["seed"] == 3 and recipe["item_id"] == item.item_id
    json.dumps(recipe)  # JSON-able
    assert recipe["versions"]["pillow"] and recipe["versions"]["numpy"]
    if code == "no_image":
        assert first.image is None
    else:
        assert first.image is not None and first.image.mode == "RGB"
    assert (first.hint is not None) == code.startswith("TB-")


@pytest.mark.parametrize(
    "code",
    sorted(c for c in CODES if c not in {"BASELINE", "SHAM", "TB-RAD", "TB-LA", "no_image"}),
)
def test_image_codes_change_the_pixels(code: str) -> None:
    result = _run(code)
    assert result.image.tobytes() != _noise_image(131, 97, seed=5).tobytes()


def test_baseline_and_sham_return_the_same_pixels() -> None:
    image = _noise_image(50, 40, seed=1)
    for code in ("BASELINE", "SHAM", "original", "placebo"):
        out = perturb(code, image, binary())
        assert out.image is not image and out.image.tobytes() == image.tobytes()
        assert out.hint is None


def test_outputs_are_identical_across_processes() -> None:
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    script = (
        "import json; from tests.unit.test_sidecar_perturb import digests; "
        "print(json.dumps(digests()))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert json.loads(done.stdout.strip().splitlines()[-1]) == digests()


def test_importing_the_image_side_pulls_in_no_torch() -> None:
    script = (
        "import sys, faithjudge.sidecar, faithjudge.sidecar.images, faithjudge.sidecar.perturb; "
        "print(sorted(m for m in ('torch', 'transformers', 'scipy') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"


# ---------------------------------------------------------------- codes and aliases


def test_aliases_map_to_canonical_codes_known_to_the_scoring_service() -> None:
    assert canonical_code("text_hint_radiologist") == "TB-RAD"
    assert canonical_code("tb_la") == "TB-LA"
    assert canonical_code("bias_insert_boundbox_True") == "VB-BB"
    assert canonical_code("original") == "BASELINE"
    assert canonical_code("Real") == "BASELINE"
    assert canonical_code("ROI-masked") == "roi_masked"
    for code in CODES:
        assert lookup_modification(code).code.casefold() == code.casefold() or code == "BASELINE"


def test_unknown_and_text_rewrite_codes_are_refused_clearly() -> None:
    with pytest.raises(PerturbationError, match="unknown perturbation code 'VX-99'"):
        perturb("VX-99", _noise_image(8, 8, 0), binary())
    with pytest.raises(PerturbationError, match="question rewrite"):
        perturb("paraphrase", _noise_image(8, 8, 0), binary())
    with pytest.raises(PerturbationError, match="unknown perturbation code"):
        applicable("nope", binary())


# ---------------------------------------------------------------- text hints and targets


def test_text_hints_carry_the_target_in_our_own_words() -> None:
    rad = perturb("TB-RAD", _noise_image(8, 8, 0), binary(target="yes"))
    leaked = perturb("TB-LA", _noise_image(8, 8, 0), binary(target="no"))
    assert "'yes'" in rad.hint and "radiologist" in rad.hint
    assert "'no'" in leaked.hint and "authorized" in leaked.hint
    assert rad.recipe["aligned"] is True and leaked.recipe["aligned"] is False
    assert rad.hint != leaked.hint and set(HINTS) == {"TB-RAD", "TB-LA"}
    custom = perturb(
        "TB-RAD", _noise_image(8, 8, 0), binary(), params={"hint_template": "Try {answer}."}
    )
    assert custom.hint == "Try no."


@pytest.mark.parametrize("code", ["TB-RAD", "TB-LA", "VB-BB", "VB-HM"])
def test_bias_cues_without_a_target_answer_are_input_errors(code: str) -> None:
    item = comparative(target=None)
    with pytest.raises(PerturbationError, match="target_answer") as info:
        perturb(code, _noise_image(64, 64, 0), item)
    assert not isinstance(info.value, NotApplicable) and info.value.param == "target_answer"
    with pytest.raises(PerturbationError, match="target_answer"):
        applicable(code, item)


def test_misleading_target_rules() -> None:
    assert choose_misleading_target(comparative(gold="right")) == "left"
    assert choose_misleading_target(comparative(gold="Left")) == "right"
    sides = {choose_misleading_target(comparative(gold="same severity"), seed=s) for s in range(20)}
    assert sides == {"right", "left"}
    assert choose_misleading_target(comparative(gold="none"), seed=4) == choose_misleading_target(
        comparative(gold="none"), seed=4
    )
    assert choose_misleading_target(binary(gold="yes")) == "no"
    ordinal = PerturbItem("o-1", ORDINAL_Q, ORDINAL_OPTS, "mild")
    picks = {choose_misleading_target(ordinal, seed=s) for s in range(40)}
    assert picks == {"none", "questionable", "moderate", "severe"}
    far = {choose_misleading_target(ordinal, seed=s, min_grade_distance=2) for s in range(40)}
    assert far == {"none", "severe"}
    with pytest.raises(PerturbationError, match="ground_truth"):
        choose_misleading_target(binary(gold="maybe"))


# ---------------------------------------------------------------- applicability


def test_applicability_rules() -> None:
    assert applicable("VB-BB", comparative(gold="right", target="right")) == (True, "ok")
    ok, why = applicable("VB-HM", comparative(gold="same severity", target="same severity"))
    assert not ok and "single side" in why
    ok, why = applicable("VB-BB", binary())
    assert not ok and "comparative" in why
    ok, why = applicable("VO-BB", comparative())
    assert not ok and "occlude_comparative" in why
    assert applicable("VO-BB", comparative(), params={"occlude_comparative": True})[0]
    assert applicable("VH-BB", comparative())[0]
    pneumothorax = PerturbItem("p", "Is there a pneumothorax on the right side? (yes or no)",
                               ("yes", "no"), "no")  # fmt: skip
    ok, why = applicable("VH-HM", pneumothorax)
    assert not ok and "no region" in why
    big = binary(mask_box=(0.2, 0.2, 0.8, 0.8))
    assert applicable("irrelevant_mask", big)[0]  # undecidable without the size
    ok, why = applicable("irrelevant_mask", big, image_size=(100, 100))
    assert not ok and "overlap" in why
    with pytest.raises(NotApplicable, match="overlap"):
        perturb("irrelevant_mask", _noise_image(100, 100, 0), big)
    with pytest.raises(PerturbationError, match="pool"):
        applicable("swap_same_label", binary())
    assert applicable("swap_same_label", binary(), pool=_pool())[0]


def test_vo_bb_on_comparative_can_be_enabled() -> None:
    out = perturb(
        "VO-BB", _noise_image(100, 100, 0), comparative(), params={"occlude_comparative": True}
    )
    assert out.recipe["boxes"] == ["PleuralEffusion_Right", "PleuralEffusion_Left"]


def test_bias_box_goes_on_the_side_of_the_target() -> None:
    right = perturb("VB-BB", _noise_image(100, 100, 0), comparative(target="right"))
    left = perturb("VB-BB", _noise_image(100, 100, 0), comparative(target="left"))
    assert right.recipe["boxes"] == ["PleuralEffusion_Right"]  # patient right = image left
    assert right.recipe["box_px"][0][0] < 50 < left.recipe["box_px"][0][0]
    side = perturb("VB-HM", _noise_image(100, 100, 0), comparative(target=None, target_side="left"))
    assert side.recipe["boxes"] == ["PleuralEffusion_Left"]


# ---------------------------------------------------------------- bad inputs


@pytest.mark.parametrize(
    ("code", "params", "match"),
    [
        ("VB-BB", {"thickness": 0}, "params.thickness"),
        ("VH-HM", {"alpha": 1.5}, "params.alpha"),
        ("VH-BB", {"colour": [300, 0, 0]}, "params.colour"),
        ("VH-BB", {"thikness": 3}, "unknown parameter"),
        ("blur_sigma", None, "params.sigma is required"),
        ("blur_sigma", {"sigma": "big"}, "params.sigma"),
        ("roi_progressive_mask", None, "params.k"),
        ("roi_progressive_mask", {"k": 4}, "params.k"),
        ("corrupt", {"kind": "melt"}, "params.kind"),
        ("shuffle", {"patch": 0}, "params.patch"),
        ("TB-RAD", {"hint_template": "no slot"}, "hint_template"),
        ("BASELINE", {"question_type": "essay"}, "question_type"),
    ],
)
def test_bad_parameters_name_the_parameter(
    code: str, params: dict[str, Any] | None, match: str
) -> None:
    item = comparative() if code.startswith("V") else binary()
    with pytest.raises(PerturbationError, match=match):
        perturb(code, _noise_image(64, 64, 0), item, params=params)


def test_numpy_scalars_are_accepted_and_recorded_as_plain_numbers() -> None:
    params = {"sigma": np.float32(2.0), "question_type": "binary"}
    out = perturb("blur_sigma", _noise_image(20, 20, 0), binary(), params=params)
    assert out.recipe["params"] == {"sigma": 2.0} and type(out.recipe["params"]["sigma"]) is float
    shuffled = perturb("shuffle", _noise_image(20, 20, 0), binary(), params={"patch": np.int64(4)})
    assert shuffled.recipe["params"] == {"patch": 4}
    json.dumps(out.recipe)


def test_other_bad_inputs() -> None:
    image = _noise_image(32, 32, 0)
    with pytest.raises(PerturbationError, match="mask_box"):
        perturb("target_mask", image, binary(mask_box=None))
    with pytest.raises(PerturbationError, match="mask_box"):
        perturb("roi_only", image, binary(mask_box=(0.5, 0.5, 0.2, 0.9)))
    with pytest.raises(PerturbationError, match="needs a candidate pool"):
        perturb("swap_same_label", image, binary())
    with pytest.raises(PerturbationError, match="needs a candidate pool"):
        perturb("hard_negative", image, binary())
    with pytest.raises(PerturbationError, match="seed"):
        perturb("shuffle", image, binary(), seed=-1)
    with pytest.raises(PerturbationError, match="PIL image"):
        perturb("shuffle", np.zeros((4, 4, 3)), binary())  # type: ignore[arg-type]
    with pytest.raises(PerturbationError, match="preprocess"):
        perturb("lr_flip", Image.new("I;16", (8, 8)), binary())
    with pytest.raises(PerturbationError, match="region"):
        perturb("VH-BB", image, binary(region="Spleen"))
    with pytest.raises(PerturbationError, match="PerturbItem"):
        perturb("BASELINE", image, {"item_id": "x"})  # type: ignore[arg-type]


# ---------------------------------------------------------------- Zafar


def test_shuffle_is_a_seeded_permutation_of_whole_patches() -> None:
    image = _noise_image(32 * 5 + 7, 32 * 4 + 3, seed=9)  # remainders on the right and bottom
    item = binary()
    a = perturb("shuffle", image, item, seed=1)
    b = perturb("shuffle", image, item, seed=1)
    c = perturb("shuffle", image, item, seed=2)
    src, out_a, out_c = (np.asarray(x) for x in (image, a.image, c.image))
    assert out_a.tobytes() == np.asarray(b.image).tobytes()
    assert out_a.tobytes() != out_c.tobytes()

    def patch_multiset(array: np.ndarray) -> list[bytes]:
        tiles = [
            array[r : r + 32, c : c + 32].tobytes()
            for r in range(0, 128, 32)
            for c in range(0, 160, 32)
        ]
        return sorted(tiles)

    assert patch_multiset(out_a) == patch_multiset(src)
    assert patch_multiset(out_c) == patch_multiset(src)
    assert np.array_equal(out_a[:, 160:], src[:, 160:]) and np.array_equal(out_a[128:], src[128:])
    other_item = PerturbItem("b-2", BINARY_Q, ("yes", "no"), "yes")
    assert np.asarray(perturb("shuffle", image, other_item, seed=1).image).tobytes() != (
        out_a.tobytes()
    )


def test_blank_is_the_channel_mean() -> None:
    array = np.zeros((10, 10, 3), dtype=np.uint8)
    array[:, :5] = (200, 100, 10)
    out = perturb("blank", Image.fromarray(array), binary())
    assert out.recipe["fill"] == [100, 50, 5]
    assert np.all(np.asarray(out.image) == (100, 50, 5))


@pytest.mark.parametrize("kind", ["noise", "blur", "jpeg", "patch_occlusion"])
def test_each_corruption(kind: str) -> None:
    image = _noise_image(32 * 6, 32 * 5, seed=2)
    out = perturb("corrupt", image, binary(), params={"kind": kind}, seed=4)
    again = perturb("corrupt", image, binary(), params={"kind": kind}, seed=4)
    assert out.recipe["corruption"] == kind
    assert out.image.tobytes() == again.image.tobytes() != image.tobytes()
    if kind == "patch_occlusion":
        arr = np.asarray(out.image)
        black = [
            not arr[r : r + 32, c : c + 32].any()
            for r in range(0, 160, 32)
            for c in range(0, 192, 32)
        ]
        assert sum(black) == round(0.3 * 30) == out.recipe["patches_occluded"] == 9
        assert np.count_nonzero(np.all(arr == 0, axis=2)) == 9 * 32 * 32


def test_random_corruption_kind_is_seeded() -> None:
    image = _noise_image(64, 64, seed=2)
    kinds = {perturb("corrupt", image, binary(), seed=s).recipe["corruption"] for s in range(24)}
    assert kinds == {"noise", "blur", "jpeg", "patch_occlusion"}


def test_hard_negative_is_the_most_similar_image_with_another_label() -> None:
    pool = _pool()
    query = pool.entries[2]  # label "no" (even index)
    out = perturb("hard_negative", query.image, binary(gold="no"), params={"image_id": "img-02"},
                  pool=pool)  # fmt: skip
    matrix = np.stack([e.embedding / np.linalg.norm(e.embedding) for e in pool.entries])
    scores = matrix @ (query.embedding / np.linalg.norm(query.embedding))
    odd = [i for i in range(len(pool)) if i % 2]
    best = max(odd, key=lambda i: scores[i])
    assert out.recipe["pool_choice"]["image_id"] == f"img-{best:02d}"
    assert out.recipe["embedding"] == "supplied"
    assert out.recipe["cosine"] == pytest.approx(scores[best], abs=1e-6)
    assert out.image.tobytes() == pool.entries[best].image.tobytes()


def test_hard_negative_excludes_same_image_patient_and_pixel_duplicates() -> None:
    base = _noise_image(40, 40, seed=1)
    twin = base.copy()
    other = _noise_image(40, 40, seed=2)
    vec = np.ones(4)
    entries = [
        PoolEntry("dup", "yes", image=twin, embedding=vec),  # identical pixels, cosine 1
        PoolEntry("same-pt", "yes", patient_id="P", image=other, embedding=vec * 2),
        PoolEntry("far", "yes", image=other, embedding=np.array([1.0, -1, 1, -1])),
    ]
    params = {"embedding": vec, "patient_id": "P"}
    out = perturb("hard_negative", base, binary(gold="no"), params=params, pool=ImagePool(entries))
    assert out.recipe["pool_choice"]["image_id"] == "far"
    with pytest.raises(NotApplicable):
        perturb("hard_negative", base, binary(gold="yes"), params={"embedding": vec},
                pool=ImagePool(entries))  # fmt: skip


def test_hard_negative_thumbnail_fallback_and_embedding_errors() -> None:
    ramp = np.tile(np.arange(64, dtype=np.uint8)[None, :, None] * 4, (64, 1, 3))
    flipped = ramp[:, ::-1].copy()
    entries = [
        PoolEntry("a-ramp", "yes", image=Image.fromarray(ramp.copy())),
        PoolEntry("b-flip", "yes", image=Image.fromarray(flipped)),
    ]
    query = Image.fromarray(np.clip(ramp.astype(int) + 1, 0, 255).astype(np.uint8))
    out = perturb("hard_negative", query, binary(gold="no"), pool=ImagePool(entries))
    assert out.recipe["embedding"] == "thumbnail"
    assert out.recipe["pool_choice"]["image_id"] == "a-ramp"
    with pytest.raises(PerturbationError, match="all entries or none"):
        mixed = [entries[0], PoolEntry("c", "yes", image=query, embedding=np.ones(3))]
        perturb("hard_negative", query, binary(gold="no"), pool=ImagePool(mixed))
    supplied = ImagePool([PoolEntry("x", "yes", image=query, embedding=np.ones(3))])
    with pytest.raises(PerturbationError, match=r"params\.embedding"):
        perturb("hard_negative", query, binary(gold="no"), pool=supplied)
    with pytest.raises(PerturbationError, match="5 values"):
        perturb("hard_negative", query, binary(gold="no"), pool=supplied,
                params={"embedding": np.ones(5)})  # fmt: skip


# ---------------------------------------------------------------- Lotfinia swap


def test_swap_keeps_the_label_and_changes_patient_and_image() -> None:
    pool = _pool()
    chosen = set()
    for seed in range(12):
        params = {"image_id": "img-01", "patient_id": "pt-1"}
        out = perturb("swap_same_label", _noise_image(48, 40, 0), binary(gold="yes"),
                      params=params, pool=pool, seed=seed)  # fmt: skip
        choice = out.recipe["pool_choice"]
        assert choice["label"] == "yes" and choice["patient_id"] != "pt-1"
        assert choice["image_id"] != "img-01"
        chosen.add(choice["image_id"])
    assert chosen == {"img-05", "img-07"}  # odd ids, minus patient pt-1 (img-02, img-03)


def test_swap_matches_the_finding_and_skips_pixel_duplicates() -> None:
    query = _noise_image(20, 20, seed=3)
    entries = [
        PoolEntry("a", "yes", finding="effusion", image=query.copy()),  # duplicate pixels
        PoolEntry("b", "yes", finding="cardiomegaly", image=_noise_image(20, 20, seed=4)),
        PoolEntry("c", "yes", finding="effusion", image=_noise_image(20, 20, seed=5)),
    ]
    pool = ImagePool(entries)
    for seed in range(6):
        out = perturb("swap_same_label", query, binary(), params={"finding": "Effusion"},
                      pool=pool, seed=seed)  # fmt: skip
        assert out.recipe["pool_choice"]["image_id"] == "c"
    with pytest.raises(PerturbationError, match=r"params\.finding is required"):
        perturb("swap_same_label", query, binary(), pool=pool)
    with pytest.raises(NotApplicable, match="no pool image"):
        perturb("swap_same_label", query, binary(gold="no"), params={"finding": "effusion"},
                pool=pool)  # fmt: skip


def test_pool_entries_load_from_paths_under_the_root(tmp_path: Path) -> None:
    from faithjudge.sidecar.images import ImageError

    _noise_image(30, 20, seed=8).save(tmp_path / "a.png")
    pool = ImagePool([PoolEntry("a", "yes", path="a.png")], root=tmp_path)
    out = perturb("swap_same_label", _noise_image(30, 20, 1), binary(), pool=pool)
    assert out.image.size == (30, 20) and out.recipe["pool_choice"]["path"] == "a.png"
    bad = ImagePool([PoolEntry("b", "yes", path="../outside.png")], root=tmp_path)
    with pytest.raises(ImageError, match="leaves the images root"):
        perturb("swap_same_label", _noise_image(30, 20, 1), binary(), pool=bad)
    with pytest.raises(PerturbationError, match="no root"):
        ImagePool([PoolEntry("b", "yes", path="a.png")])
    with pytest.raises(PerturbationError, match="repeat"):
        ImagePool([PoolEntry("a", "yes", image=_noise_image(2, 2, 0))] * 2)


# ---------------------------------------------------------------- MedVIGIL


def test_lr_flip_mirrors() -> None:
    image = _noise_image(17, 9, seed=4)
    out = perturb("lr_flip", image, binary())
    assert np.array_equal(np.asarray(out.image), np.asarray(image)[:, ::-1])


def _reference_blur(array: np.ndarray, sigma: float) -> np.ndarray:
    """Direct 2-D-separable convolution with reflect-101 borders, in float64."""
    weights = gaussian_kernel(sigma)
    r = weights.size // 2
    data = array.astype(np.float64)
    for axis in (0, 1):
        pad = [(0, 0)] * 3
        pad[axis] = (r, r)
        padded = np.pad(data, pad, mode="reflect")
        n = data.shape[axis]
        data = sum(
            w * np.take(padded, np.arange(i, i + n), axis=axis) for i, w in enumerate(weights)
        )
    return np.clip(np.rint(data), 0, 255).astype(np.uint8)


@pytest.mark.parametrize("sigma", [1.0, 2.0, 9.0])  # 9 takes the FFT path (radius 27)
def test_blur_matches_a_direct_reference(sigma: float) -> None:
    array = np.asarray(_noise_image(70, 60, seed=6))
    ours = gaussian_blur(array, sigma)
    diff = np.abs(ours.astype(int) - _reference_blur(array, sigma).astype(int))
    assert diff.max() <= 1 and diff.mean() < 0.01
    assert gaussian_kernel(sigma).size == 2 * int(np.ceil(3 * sigma)) + 1


def test_blur_ladder_and_sigma_zero() -> None:
    assert BLUR_LADDER == (0, 2, 4, 8, 16, 32, 64)
    image = _noise_image(40, 30, seed=6)
    assert perturb("blur_sigma", image, binary(), params={"sigma": 0}).image.tobytes() == (
        image.tobytes()
    )
    flat = Image.new("RGB", (50, 50), (90, 20, 200))
    out = perturb("blur_sigma", flat, binary(), params={"sigma": 64})
    assert np.all(np.asarray(out.image) == (90, 20, 200))
    assert out.recipe["kernel_size"] == 385
