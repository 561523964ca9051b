"""Lotfinia's causal image audit (METHODS §2.2): target mask, irrelevant mask, same-label swap.

The target box is the item's normalised ``mask_box``, rescaled to the image and rounded to whole
pixels. The irrelevant mask has the same size, flush with the corner farthest from the target's
centroid, and is undefined (``NotApplicable``) when it would overlap the target box.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from PIL import Image

from faithjudge.sidecar.perturb.base import (
    NotApplicable,
    Params,
    PerturbationError,
    PerturbItem,
    norm_answer,
)
from faithjudge.sidecar.perturb.geometry import (
    PixelBox,
    boxes_intersect,
    far_corner_box,
    moll_box_pixels,
    rounded_box_pixels,
)
from faithjudge.sidecar.perturb.pool import ImagePool

__all__ = [
    "irrelevant_box",
    "mask_pixels",
    "no_candidate",
    "pool_choice",
    "swap_candidates",
    "swap_same_label",
]


def mask_pixels(
    item: PerturbItem, code: str, width: int, height: int, rounding: str = "round"
) -> PixelBox:
    """The item's ``mask_box`` in pixels; PerturbationError naming ``mask_box`` when unusable."""
    if item.mask_box is None:
        raise PerturbationError(
            f"{code}: the item has no mask_box (normalised x0, y0, x1, y1)",
            code=code,
            param="mask_box",
        )
    try:
        if rounding == "moll":
            return moll_box_pixels(item.mask_box, width, height, clip="full")
        return rounded_box_pixels(item.mask_box, width, height)
    except (TypeError, ValueError) as exc:
        raise PerturbationError(f"{code}: mask_box {exc}", code=code, param="mask_box") from None


def irrelevant_box(target: PixelBox, width: int, height: int, code: str) -> tuple[PixelBox, str]:
    box, corner = far_corner_box(target, width, height)
    if boxes_intersect(box, target):
        raise NotApplicable(
            f"{code}: a box of the target's size at the far corner ({corner}) would overlap the "
            "target box, so the irrelevant mask is undefined for this item",
            code=code,
        )
    return box, corner


def fill_box(array: np.ndarray, box: PixelBox, colour: tuple[int, int, int]) -> None:
    x0, y0, x1, y1 = box
    array[y0:y1, x0:x1] = colour


def pool_choice(pool: ImagePool, index: int) -> dict[str, Any]:
    entry = pool.entries[index]
    return {
        "image_id": entry.image_id,
        "label": entry.label,
        "finding": entry.finding,
        "patient_id": entry.patient_id,
        "path": entry.path,
    }


def _same(a: str | None, b: str | None) -> bool:
    return a is not None and b is not None and norm_answer(a) == norm_answer(b)


def swap_candidates(
    pool: ImagePool, item: PerturbItem, params: Params, code: str
) -> tuple[list[int], dict[str, Any]]:
    """Indices of pool entries with the item's label (and finding), other image and patient."""
    finding = params.text("finding", None)
    image_id = params.text("image_id", None)
    patient_id = params.text("patient_id", None)
    if finding is None and any(e.finding is not None for e in pool.entries):
        raise PerturbationError(
            f"{code}: the pool's entries name findings, so params.finding is required to match "
            "the queried finding",
            code=code,
            param="finding",
        )
    label = norm_answer(item.ground_truth)
    eligible = [
        i
        for i, entry in enumerate(pool.entries)
        if norm_answer(entry.label) == label
        and (finding is None or _same(entry.finding, finding))
        and entry.image_id != image_id
        and not _same(entry.patient_id, patient_id)
    ]
    query = {"label": label, "finding": finding, "image_id": image_id, "patient_id": patient_id}
    return eligible, query


def swap_same_label(
    image: Image.Image,
    item: PerturbItem,
    params: Params,
    pool: ImagePool | None,
    rng: np.random.Generator,
    code: str,
) -> tuple[Image.Image, dict[str, Any]]:
    """A seeded draw among same-label, different-patient pool images (never a pixel duplicate)."""
    resize = params.flag("resize_to_input", False)
    if pool is None:
        raise PerturbationError(f"{code} needs a candidate pool (pool=ImagePool(...))", code=code)
    eligible, query = swap_candidates(pool, item, params, code)
    order = (eligible[int(position)] for position in rng.permutation(len(eligible)))
    found = pool.first_distinct(order, image, resize=resize)
    if found is not None:
        index, chosen = found
        return chosen, {
            "pool_choice": pool_choice(pool, index),
            "query": query,
            "candidates": len(eligible),
            "pool_size": len(pool),
        }
    raise no_candidate(query, code)


def no_candidate(query: dict[str, Any], code: str) -> NotApplicable:
    finding = f" for finding {query['finding']!r}" if query["finding"] else ""
    return NotApplicable(
        f"{code}: no pool image has label {query['label']!r}{finding} from another image and "
        "patient",
        code=code,
    )
