"""Boxes: the primary paper's normalised box table, pixel conversion and the far-corner rule.

Coordinates are exact: normalised values are turned into ``Fraction``s from their decimal text,
so ``0.95 * 20`` is 19, never 19.000000000000004 (which ``ceil`` would make 20).
All pixel boxes are ``(x_min, y_min, x_max, y_max)`` with inclusive minima and exclusive maxima.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from types import MappingProxyType
from typing import Literal

__all__ = [
    "BOXES",
    "PixelBox",
    "boxes_intersect",
    "far_corner_box",
    "finding_sides",
    "moll_box_pixels",
    "region_for_question",
    "rounded_box_pixels",
    "to_fraction",
]

PixelBox = tuple[int, int, int, int]
Number = float | int | Fraction


def _pct(x0: int, y0: int, x1: int, y1: int) -> tuple[Fraction, Fraction, Fraction, Fraction]:
    return (Fraction(x0, 100), Fraction(y0, 100), Fraction(x1, 100), Fraction(y1, 100))


# Moll Tab. S5 (percent of width/height, origin top-left; patient left is on the image right).
BOXES = MappingProxyType(
    {
        "HeartSize": _pct(30, 35, 70, 65),
        "PulmonaryCongestion": _pct(20, 25, 80, 55),
        "PleuralEffusion_Left": _pct(65, 70, 95, 95),
        "PleuralEffusion_Right": _pct(5, 70, 35, 95),
        "PulmonaryOpacities_Left": _pct(60, 20, 95, 80),
        "PulmonaryOpacities_Right": _pct(5, 20, 40, 80),
        "Atelectasis_Left": _pct(60, 30, 90, 70),
        "Atelectasis_Right": _pct(10, 30, 40, 70),
        "CentralVenousCatheter": _pct(40, 5, 60, 30),
        "GastricTube": _pct(40, 65, 60, 95),
    }
)


def to_fraction(value: Number) -> Fraction:
    """Exact value of a coordinate; floats go through their shortest decimal text."""
    if isinstance(value, bool):
        raise TypeError("a coordinate cannot be a bool")
    if isinstance(value, Fraction | int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"coordinate {value!r} is not finite")
        return Fraction(repr(value))
    raise TypeError(f"coordinate {value!r} is not a number")


def _normalised(box: tuple[Number, Number, Number, Number]) -> tuple[Fraction, ...]:
    if len(box) != 4:
        raise ValueError(f"a box has 4 coordinates (x0, y0, x1, y1), got {len(box)}")
    x0, y0, x1, y1 = (to_fraction(v) for v in box)
    if not (0 <= x0 <= 1 and 0 <= y0 <= 1 and 0 <= x1 <= 1 and 0 <= y1 <= 1):
        raise ValueError(f"box {tuple(box)!r} must lie within [0, 1]")
    if x1 <= x0 or y1 <= y0:
        raise ValueError(f"box {tuple(box)!r} needs x1 > x0 and y1 > y0")
    return x0, y0, x1, y1


def _at_least_one(lo: int, hi: int) -> tuple[int, int]:
    return (lo, hi) if hi > lo else (lo, lo + 1)


def moll_box_pixels(
    box: tuple[Number, Number, Number, Number],
    width: int,
    height: int,
    *,
    clip: Literal["paper", "full"] = "paper",
) -> PixelBox:
    """Moll App. D: floor the minima, ceil the maxima, clip, then at least 1 px each way.

    ``clip="paper"`` clips every bound to ``[0, W-1] x [0, H-1]`` as printed (so the last column
    and row are never reached by an exclusive maximum); ``"full"`` clips maxima to ``W``/``H``.
    """
    if width < 1 or height < 1:
        raise ValueError(f"image size {width}x{height} has no pixels")
    x0, y0, x1, y1 = _normalised(box)
    x_min, y_min = math.floor(x0 * width), math.floor(y0 * height)
    x_max, y_max = math.ceil(x1 * width), math.ceil(y1 * height)
    top_x, top_y = (width - 1, height - 1) if clip == "paper" else (width, height)
    x_min, x_max = min(max(x_min, 0), width - 1), min(max(x_max, 0), top_x)
    y_min, y_max = min(max(y_min, 0), height - 1), min(max(y_max, 0), top_y)
    x_min, x_max = _at_least_one(x_min, x_max)
    y_min, y_max = _at_least_one(y_min, y_max)
    return x_min, y_min, x_max, y_max


def _round_half_up(value: Fraction) -> int:
    return math.floor(value + Fraction(1, 2))


def rounded_box_pixels(
    box: tuple[Number, Number, Number, Number], width: int, height: int
) -> PixelBox:
    """Lotfinia/MedVIGIL boxes: rescale and round each bound to the nearest pixel (half up).

    Bounds are clipped to the image and the box keeps at least 1 px each way (shifted inwards
    when it sits on the far edge).
    """
    if width < 1 or height < 1:
        raise ValueError(f"image size {width}x{height} has no pixels")
    x0, y0, x1, y1 = _normalised(box)
    x_min, x_max = _round_half_up(x0 * width), _round_half_up(x1 * width)
    y_min, y_max = _round_half_up(y0 * height), _round_half_up(y1 * height)
    x_min, x_max = _min_one_inside(x_min, x_max, width)
    y_min, y_max = _min_one_inside(y_min, y_max, height)
    return x_min, y_min, x_max, y_max


def _min_one_inside(lo: int, hi: int, size: int) -> tuple[int, int]:
    lo, hi = min(max(lo, 0), size), min(max(hi, 0), size)
    if hi > lo:
        return lo, hi
    return (lo, lo + 1) if lo < size else (size - 1, size)


def boxes_intersect(a: PixelBox, b: PixelBox) -> bool:
    """True when the two half-open boxes share at least one pixel."""
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


_CORNERS = ("top_left", "top_right", "bottom_left", "bottom_right")


def far_corner_box(target: PixelBox, width: int, height: int) -> tuple[PixelBox, str]:
    """A box of the target's size, flush with the image corner farthest from its centroid.

    Ties are broken in the order top-left, top-right, bottom-left, bottom-right. Distances are
    compared exactly (doubled coordinates keep them integral).
    """
    x_min, y_min, x_max, y_max = target
    w, h = x_max - x_min, y_max - y_min
    cx2, cy2 = x_min + x_max, y_min + y_max  # twice the centroid
    corners = {
        "top_left": (0, 0),
        "top_right": (2 * width, 0),
        "bottom_left": (0, 2 * height),
        "bottom_right": (2 * width, 2 * height),
    }
    best = max(_CORNERS, key=lambda c: (corners[c][0] - cx2) ** 2 + (corners[c][1] - cy2) ** 2)
    # max() keeps the first of equal keys, which is the documented tie order.
    left = best.endswith("left")
    top = best.startswith("top")
    bx0 = 0 if left else width - w
    by0 = 0 if top else height - h
    return (bx0, by0, bx0 + w, by0 + h), best


def finding_sides(stem: str) -> tuple[str, str] | None:
    """The (Right, Left) box keys of a lateralised finding stem, or None."""
    right, left = f"{stem}_Right", f"{stem}_Left"
    return (right, left) if right in BOXES and left in BOXES else None


# METHODS §1.5 [REC] finding -> box map, keyed on words of the question text.
_FINDING_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"pleural effusion"), "PleuralEffusion"),
    (re.compile(r"pulmonary opacit"), "PulmonaryOpacities"),
    (re.compile(r"atelectasis"), "Atelectasis"),
    (re.compile(r"congestion"), "PulmonaryCongestion"),
    (re.compile(r"cardiomegaly|size of the heart"), "HeartSize"),
    (re.compile(r"central venous catheter"), "CentralVenousCatheter"),
    (re.compile(r"gastric tube"), "GastricTube"),
)
_SIDE = re.compile(r"\b(right|left)\b")


def region_for_question(question: str) -> str | None:
    """The Tab. S5 key for a question, the finding stem for comparative ones, else None.

    Only the question part (before the option list in parentheses) is read. Questions without a
    box (malrotation, apex visibility, pneumothorax, nodule, ETT, pacemaker, chest tube) give None.
    """
    text = question.casefold().split("(", 1)[0]
    for pattern, key in _FINDING_PATTERNS:
        if not pattern.search(text):
            continue
        if key in BOXES:
            return key
        if "which side" in text:
            return key
        side = _SIDE.search(text)
        return f"{key}_{side.group(1).capitalize()}" if side else None
    return None
