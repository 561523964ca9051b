"""Pixel geometry of the sidecar perturbations: box rules, mask areas, far corner, heatmaps."""

from __future__ import annotations

import numpy as np
import pytest
from faithjudge.sidecar.perturb import BOXES, PerturbItem, perturb, region_for_question
from faithjudge.sidecar.perturb.geometry import (
    boxes_intersect,
    far_corner_box,
    moll_box_pixels,
    rounded_box_pixels,
)
from faithjudge.sidecar.perturb.moll import blend_heatmap, gaussian_weights, heatmap_overlay
from PIL import Image

SIZES = [(1, 1), (3, 5), (5, 3), (2, 2), (7, 1), (20, 20), (224, 224), (1023, 1025), (2048, 2048)]
EFFUSION_Q = "Is there a pleural effusion on the left? (yes or no)"


def _ref_moll(pct: tuple[int, int, int, int], w: int, h: int) -> tuple[int, int, int, int]:
    """The App. D rule in integer arithmetic on the percent table (independent of the code)."""
    x0, y0, x1, y1 = pct
    x_min, y_min = (x0 * w) // 100, (y0 * h) // 100
    x_max, y_max = -((-x1 * w) // 100), -((-y1 * h) // 100)
    x_min, x_max = min(max(x_min, 0), w - 1), min(max(x_max, 0), w - 1)
    y_min, y_max = min(max(y_min, 0), h - 1), min(max(y_max, 0), h - 1)
    if x_max <= x_min:
        x_max = x_min + 1
    if y_max <= y_min:
        y_max = y_min + 1
    return x_min, y_min, x_max, y_max


def _pct(key: str) -> tuple[int, int, int, int]:
    x0, y0, x1, y1 = (int(v * 100) for v in BOXES[key])
    return x0, y0, x1, y1


@pytest.mark.parametrize(("width", "height"), SIZES)
@pytest.mark.parametrize("key", sorted(BOXES))
def test_moll_box_pixels_follow_the_floor_ceil_clip_rule(key: str, width: int, height: int) -> None:
    box = moll_box_pixels(BOXES[key], width, height)
    assert box == _ref_moll(_pct(key), width, height)
    x0, y0, x1, y1 = box
    assert 0 <= x0 < x1 <= width and 0 <= y0 < y1 <= height  # at least 1 px, inside the image


def test_float_boxes_are_exact_where_binary_floats_are_not() -> None:
    # In binary floating point 0.55 * 100 = 55.00000000000001 (ceil would give 56) and
    # 0.29 * 100 = 28.999999999999996 (floor would give 28); the exact values are 55 and 29.
    assert 0.55 * 100 > 55 and 0.29 * 100 < 29
    assert moll_box_pixels((0.05, 0.29, 0.55, 0.95), 100, 100) == (5, 29, 55, 95)
    assert moll_box_pixels((0.05, 0.05, 0.95, 0.95), 20, 20) == (1, 1, 19, 19)
    assert moll_box_pixels((0.1, 0.2, 0.3, 0.7), 10, 10) == (1, 2, 3, 7)


def test_paper_clip_never_reaches_the_last_column_but_full_clip_does() -> None:
    assert moll_box_pixels((0.5, 0.5, 1.0, 1.0), 10, 10) == (5, 5, 9, 9)
    assert moll_box_pixels((0.5, 0.5, 1.0, 1.0), 10, 10, clip="full") == (5, 5, 10, 10)


@pytest.mark.parametrize(
    "box", [(0.5, 0.5, 0.4, 0.6), (0.0, 0.0, 1.2, 1.0), (-0.1, 0, 0.5, 0.5), (0, 0, 1)]
)
def test_bad_normalised_boxes_are_refused(box: tuple[float, ...]) -> None:
    with pytest.raises(ValueError, match="box"):
        moll_box_pixels(box, 10, 10)  # type: ignore[arg-type]


@pytest.mark.parametrize(("width", "height"), SIZES)
def test_rounded_boxes_round_half_up_and_keep_one_pixel(width: int, height: int) -> None:
    box = rounded_box_pixels((0.25, 0.25, 0.75, 0.75), width, height)
    x0, y0, x1, y1 = box
    assert 0 <= x0 < x1 <= width and 0 <= y0 < y1 <= height
    assert x0 == int(0.25 * width + 0.5) or x1 - x0 == 1
    # A box squeezed onto the far edge is shifted inwards, not lost.
    assert rounded_box_pixels((0.999, 0.999, 1.0, 1.0), width, height)[2:] == (width, height)


def _mask_item(box: tuple[float, float, float, float]) -> PerturbItem:
    return PerturbItem("m1", EFFUSION_Q, ("yes", "no"), "yes", mask_box=box)


def _image(width: int, height: int, value: int = 200) -> Image.Image:
    return Image.new("RGB", (width, height), (value, value, value))


@pytest.mark.parametrize(("width", "height"), [(1, 1), (3, 5), (64, 48), (1023, 1025)])
def test_occlusion_masks_cover_exactly_their_box(width: int, height: int) -> None:
    item = PerturbItem("o1", EFFUSION_Q, ("yes", "no"), "yes")
    out = perturb("VO-BB", _image(width, height), item)
    x0, y0, x1, y1 = out.recipe["box_px"][0]
    black = np.all(np.asarray(out.image) == 0, axis=2)
    assert black.sum() == (x1 - x0) * (y1 - y0)
    assert black[y0:y1, x0:x1].all()


@pytest.mark.parametrize(
    ("code", "fill"), [("target_mask", 0), ("roi_masked", 128), ("irrelevant_mask", 0)]
)
def test_box_masks_count_their_pixels(code: str, fill: int) -> None:
    item = _mask_item((0.1, 0.15, 0.35, 0.4))
    out = perturb(code, _image(101, 77), item)
    x0, y0, x1, y1 = out.recipe["box_px"]
    filled = np.all(np.asarray(out.image) == fill, axis=2)
    assert filled.sum() == (x1 - x0) * (y1 - y0)
    assert filled[y0:y1, x0:x1].all()


def test_roi_only_keeps_exactly_the_box() -> None:
    out = perturb("roi_only", _image(90, 60, 17), _mask_item((0.2, 0.2, 0.5, 0.9)))
    x0, y0, x1, y1 = out.recipe["box_px"]
    kept = np.all(np.asarray(out.image) == 17, axis=2)
    assert kept.sum() == (x1 - x0) * (y1 - y0) and kept[y0:y1, x0:x1].all()
    assert np.all(np.asarray(out.image)[~kept] == 128)


@pytest.mark.parametrize("k", [0, 1, 2, 3])
def test_progressive_mask_covers_the_top_k_thirds(k: int) -> None:
    out = perturb(
        "roi_progressive_mask", _image(50, 50), _mask_item((0.2, 0.2, 0.8, 0.8)), params={"k": k}
    )
    x0, y0, x1, y1 = out.recipe["box_px"]
    grey = np.all(np.asarray(out.image) == 128, axis=2)
    assert grey.sum() == (x1 - x0) * ((k * (y1 - y0)) // 3)
    assert grey[y0 : y0 + (k * (y1 - y0)) // 3, x0:x1].all()


@pytest.mark.parametrize(
    ("target", "corner", "expected"),
    [
        ((0, 0, 10, 10), "bottom_right", (90, 70, 100, 80)),
        ((90, 70, 100, 80), "top_left", (0, 0, 10, 10)),
        ((85, 5, 95, 15), "bottom_left", (0, 70, 10, 80)),
        ((10, 60, 20, 75), "top_right", (90, 0, 100, 15)),
        ((45, 35, 55, 45), "top_left", (0, 0, 10, 10)),  # centred: tie goes to top-left
    ],
)
def test_far_corner_rule(
    target: tuple[int, int, int, int], corner: str, expected: tuple[int, int, int, int]
) -> None:
    box, chosen = far_corner_box(target, 100, 80)
    assert (box, chosen) == (expected, corner)
    assert (box[2] - box[0], box[3] - box[1]) == (target[2] - target[0], target[3] - target[1])


def test_irrelevant_mask_is_flush_with_the_far_corner_and_undefined_when_overlapping() -> None:
    out = perturb("irrelevant_mask", _image(100, 80), _mask_item((0.05, 0.05, 0.2, 0.25)))
    assert out.recipe["corner"] == "bottom_right"
    assert out.recipe["box_px"][2:] == [100, 80]
    assert boxes_intersect((0, 0, 60, 50), (40, 30, 100, 80))
    assert not boxes_intersect((0, 0, 50, 40), (50, 40, 100, 80))


def test_outline_is_four_pixels_thick_inside_the_box() -> None:
    item = PerturbItem("h1", EFFUSION_Q, ("yes", "no"), "yes")
    out = perturb("VH-BB", _image(200, 200, 0), item)
    x0, y0, x1, y1 = out.recipe["box_px"][0]
    red = np.all(np.asarray(out.image) == (255, 0, 0), axis=2)
    w, h = x1 - x0, y1 - y0
    assert red.sum() == w * h - (w - 8) * (h - 8)
    assert red[y0 : y0 + 4, x0:x1].all() and red[y1 - 4 : y1, x0:x1].all()
    assert not red[y0 + 4 : y1 - 4, x0 + 4 : x1 - 4].any()
    assert not red[:y0].any() and not red[y1:].any()


def test_outline_on_a_tiny_image_fills_the_one_pixel_box() -> None:
    item = PerturbItem("h1", EFFUSION_Q, ("yes", "no"), "yes")
    out = perturb("VH-BB", _image(1, 1, 0), item)
    assert out.recipe["box_px"] == [[0, 0, 1, 1]]
    assert np.asarray(out.image)[0, 0].tolist() == [255, 0, 0]


def test_heatmap_blending_matches_hand_computation() -> None:
    width, height = 40, 30
    rng = np.random.default_rng(3)
    base = rng.integers(0, 128, (height, width, 3), dtype=np.uint8) * 2  # even values
    box = (8, 6, 24, 22)  # centre (15.5, 13.5) in pixel indices, sigma (4, 4)
    gy, gx = gaussian_weights(box, width, height)
    out = blend_heatmap(base, np.outer(gy, gx), 0.5, (255, 0, 0))
    # Off-centre pixels: g = exp(-0.5 * ((x - 15.5)^2 + (y - 13.5)^2) / 16), by hand in float64.
    for x, y in [(15, 13), (16, 14), (8, 6), (0, 0), (39, 29), (20, 10)]:
        g = np.exp(-0.5 * ((x - 15.5) ** 2 + (y - 13.5) ** 2) / 16.0)
        pixel = base[y, x].astype(np.float64)
        expected = (1 - 0.5 * g) * pixel + 0.5 * g * np.array([255.0, 0.0, 0.0])
        assert np.all(np.abs(out[y, x] - expected) <= 0.5 + 1e-6), (x, y, out[y, x], expected)
    # Far from the box the heatmap vanishes and the pixel is untouched.
    assert out[0, 39].tolist() == base[0, 39].tolist()


def test_heatmap_peak_is_exact_on_an_odd_box() -> None:
    width = height = 21
    gy, gx = gaussian_weights((5, 5, 16, 16), width, height)  # 11 px box: centre pixel 10
    assert gx[10] == 1.0 and gy[10] == 1.0
    base = np.full((height, width, 3), 100, dtype=np.uint8)
    out = blend_heatmap(base, np.outer(gy, gx), 0.5, (255, 0, 0))
    assert out[10, 10].tolist() == [178, 50, 50]  # 0.5*100 + 0.5*255 = 177.5 -> 178 (half even)


def test_region_map_follows_the_question_text() -> None:
    assert region_for_question(EFFUSION_Q) == "PleuralEffusion_Left"
    assert region_for_question("What is the size of the heart? (normal, ...)") == "HeartSize"
    assert region_for_question("Does the chest X-ray show cardiomegaly? (yes or no)") == "HeartSize"
    comparative = "Which side shows more severe atelectasis? (right, left, same severity, none)"
    assert region_for_question(comparative) == "Atelectasis"
    assert region_for_question("Is there a pneumothorax on the right side? (yes or no)") is None
    assert (
        region_for_question("Is a central venous catheter visible in this image? (yes or no)")
        == "CentralVenousCatheter"
    )


@pytest.mark.parametrize("alpha", [0.2, 0.5, 0.8, 1.0])
def test_cropped_heatmap_equals_blending_the_whole_image(alpha: float) -> None:
    rng = np.random.default_rng(8)
    base = rng.integers(0, 256, (300, 260, 3), dtype=np.uint8)
    boxes = [(13, 60, 91, 241), (156, 60, 234, 241)]
    whole = np.zeros((300, 260))
    for box in boxes:
        gy, gx = gaussian_weights(box, 260, 300)
        whole = np.maximum(whole, np.outer(gy, gx))
    expected = blend_heatmap(base, whole, alpha, (255, 0, 0))
    assert np.array_equal(heatmap_overlay(base.copy(), boxes, alpha, (255, 0, 0)), expected)
    question = "Which side shows more severe atelectasis? (right, left, same severity, none)"
    item = PerturbItem("hm", question, ("right", "left", "same severity", "none"), "left")
    out = perturb("VH-HM", Image.fromarray(base), item, params={"alpha": alpha})
    full = np.zeros((300, 260))
    for box in out.recipe["box_px"]:
        gy, gx = gaussian_weights(tuple(box), 260, 300)
        full = np.maximum(full, np.outer(gy, gx))
    assert np.array_equal(np.asarray(out.image), blend_heatmap(base, full, alpha, (255, 0, 0)))
