"""Zafar's image conditions (METHODS §3.1): blank, patch shuffle, corruptions, hard negative.

Patch operations work on the grid of whole 32 x 32 patches from the top-left corner; border
remainders that do not fill a patch stay in place. The shuffle is one gather through a view of
the patch grid, so a 2048 x 2048 image is permuted without a Python loop.
"""

from __future__ import annotations

import hashlib
import io
from typing import Any

import numpy as np
from PIL import Image

from faithjudge.sidecar.images import mean_colour
from faithjudge.sidecar.perturb.base import (
    NotApplicable,
    Params,
    PerturbationError,
    PerturbItem,
    norm_answer,
)
from faithjudge.sidecar.perturb.lotfinia import pool_choice
from faithjudge.sidecar.perturb.medvigil import gaussian_blur
from faithjudge.sidecar.perturb.pool import ImagePool, as_vector, thumbnail_embedding

__all__ = [
    "CORRUPTIONS",
    "blank",
    "corrupt",
    "hard_negative",
    "occlude_patches",
    "shuffle_patches",
    "to_patches",
]

CORRUPTIONS = ("noise", "blur", "jpeg", "patch_occlusion")


def blank(image: Image.Image, colour: tuple[int, int, int] | None) -> tuple[Image.Image, list[int]]:
    """A uniform image at the per-channel mean (rounded half to even) or at ``colour``."""
    fill = list(mean_colour(image) if colour is None else colour)
    return Image.new("RGB", image.size, (fill[0], fill[1], fill[2])), fill


def to_patches(array: np.ndarray, patch: int) -> tuple[np.ndarray, int, int]:
    """(rows*cols, patch, patch, C) copy of the whole-patch grid in row-major order, rows, cols."""
    height, width, channels = array.shape
    rows, cols = height // patch, width // patch
    grid = array[: rows * patch, : cols * patch].reshape(rows, patch, cols, patch, channels)
    tiles = grid.transpose(0, 2, 1, 3, 4).reshape(rows * cols, patch, patch, channels)
    return tiles, rows, cols


def _grid(array: np.ndarray, patch: int) -> np.ndarray:
    """A (rows, patch, cols, patch * C) view of the whole-patch part of an (H, W, C) array.

    The last axis is one patch row of pixels, contiguous in memory, so gathers copy 96-byte runs.
    """
    height, width, channels = array.shape
    rows, cols = height // patch, width // patch
    grid = array[: rows * patch, : cols * patch].reshape(rows, patch, cols, patch * channels)
    if grid.size and not np.shares_memory(grid, array):  # reshape silently copies otherwise
        raise AssertionError("patch grid is not a view of the image")
    return grid


def shuffle_patches(
    array: np.ndarray, patch: int, rng: np.random.Generator
) -> tuple[np.ndarray, dict[str, Any]]:
    """Permute the whole patches with ``rng``: patch i of the output is patch order[i] of the input.

    One gather of all patches in destination order, one strided copy back; no Python loop.
    """
    rows, cols = array.shape[0] // patch, array.shape[1] // patch
    order = rng.permutation(rows * cols)
    out = array.copy()
    if rows * cols:
        src_r, src_c = np.divmod(order.reshape(rows, cols), cols)
        gathered = _grid(array, patch)[src_r, :, src_c]  # (rows, cols, patch, patch * C)
        _grid(out, patch)[...] = gathered.transpose(0, 2, 1, 3)
    digest = hashlib.sha256(order.astype("<u4").tobytes()).hexdigest()[:16]
    return out, {"grid": [rows, cols], "permutation_sha256": digest}


def occlude_patches(
    array: np.ndarray,
    patch: int,
    fraction: float,
    fill: tuple[int, int, int],
    rng: np.random.Generator,
) -> tuple[np.ndarray, dict[str, Any]]:
    """Fill round(fraction * n) randomly chosen whole patches with ``fill``."""
    rows, cols = array.shape[0] // patch, array.shape[1] // patch
    count = round(fraction * rows * cols)
    chosen = np.sort(rng.choice(rows * cols, size=count, replace=False))
    out = array.copy()
    if count:
        r, c = np.divmod(chosen, cols)
        _grid(out, patch)[r, :, c] = np.tile(np.asarray(fill, dtype=np.uint8), patch)
    return out, {"grid": [rows, cols], "patches_occluded": int(count)}


def _jpeg(array: np.ndarray, quality: int) -> np.ndarray:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="JPEG", quality=quality, subsampling=2)
    buffer.seek(0)
    with Image.open(buffer, formats=["JPEG"]) as decoded:
        return np.array(decoded.convert("RGB"))


def corrupt(
    array: np.ndarray, params: Params, rng: np.random.Generator
) -> tuple[np.ndarray, dict[str, Any]]:
    """One corruption; ``kind="random"`` (default) draws it from the item's seeded generator."""
    kind = params.choice("kind", "random", ("random", *CORRUPTIONS))
    noise_sigma = params.number("noise_sigma", 25.0, lo=0.0)
    blur_sigma = params.number("blur_sigma", 3.0, lo=0.0)
    quality = params.integer("jpeg_quality", 10, lo=1, hi=95)
    fraction = params.number("occlusion_fraction", 0.30, lo=0.0, hi=1.0)
    patch = params.integer("patch", 32, lo=1)
    fill = params.colour("fill", (0, 0, 0))
    assert noise_sigma is not None and blur_sigma is not None and quality is not None
    assert fraction is not None and patch is not None
    if kind == "random":
        kind = CORRUPTIONS[int(rng.integers(len(CORRUPTIONS)))]
    extra: dict[str, Any] = {"corruption": kind}
    if kind == "noise":
        noisy = rng.standard_normal(size=array.shape, dtype=np.float32)
        noisy *= np.float32(noise_sigma)
        noisy += array
        np.rint(noisy, out=noisy)
        np.clip(noisy, 0, 255, out=noisy)
        return noisy.astype(np.uint8), extra
    if kind == "blur":
        return gaussian_blur(array, blur_sigma), extra
    if kind == "jpeg":
        return _jpeg(array, quality), extra
    out, facts = occlude_patches(array, patch, fraction, fill, rng)
    return out, {**extra, **facts}


def _query_embedding(
    image: Image.Image, pool: ImagePool, params: Params, kind: str, image_id: str | None, code: str
) -> np.ndarray:
    given = params.raw("embedding")
    if kind == "thumbnail":
        if given is not None:
            raise PerturbationError(
                f"{code}: params.embedding is given but the pool has no embeddings to compare "
                "it with",
                code=code,
                param="embedding",
            )
        return thumbnail_embedding(image)
    if given is not None:
        vector = as_vector(given, "the query")
    else:
        index = pool.index_of(image_id)
        if index is None:
            raise PerturbationError(
                f"{code}: the pool has precomputed embeddings; give the query's as "
                "params.embedding or name a pool image in params.image_id",
                code=code,
                param="embedding",
            )
        vector = as_vector(pool.entries[index].embedding, str(image_id))
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector


def hard_negative(
    image: Image.Image,
    item: PerturbItem,
    params: Params,
    pool: ImagePool | None,
    code: str,
) -> tuple[Image.Image, dict[str, Any]]:
    """The most cosine-similar pool image whose label differs from the gold answer.

    The same image id, the same patient and pixel-identical images are never chosen; ties go to
    the smaller image id. ``max_cosine`` optionally drops near-duplicates above that similarity.
    """
    image_id = params.text("image_id", None)
    patient_id = params.text("patient_id", None)
    max_cosine = params.number("max_cosine", None, lo=-1.0, hi=1.0)
    resize = params.flag("resize_to_input", False)
    if pool is None:
        raise PerturbationError(f"{code} needs a candidate pool (pool=ImagePool(...))", code=code)
    params.raw("embedding")
    matrix, kind = pool.matrix()
    query = _query_embedding(image, pool, params, kind, image_id, code)
    if query.shape[0] != matrix.shape[1]:
        raise PerturbationError(
            f"{code}: query embedding has {query.shape[0]} values, the pool's have "
            f"{matrix.shape[1]}",
            code=code,
            param="embedding",
        )
    scores = matrix @ query
    gold = norm_answer(item.ground_truth)
    labels = pool.labels()
    ok = np.array(
        [
            labels[i] != gold
            and entry.image_id != image_id
            and not (patient_id is not None and entry.patient_id == patient_id)
            for i, entry in enumerate(pool.entries)
        ],
        dtype=bool,
    )
    if max_cosine is not None:
        ok &= scores <= max_cosine
    order = np.lexsort((np.arange(len(scores)), -scores))  # best first, then pool order
    found = pool.first_distinct(order[ok[order]], image, resize=resize)
    if found is not None:
        index, chosen = found
        return chosen, {
            "pool_choice": pool_choice(pool, index),
            "cosine": round(float(scores[index]), 6),
            "embedding": kind,
            "query": {"label": gold, "image_id": image_id, "patient_id": patient_id},
            "pool_size": len(pool),
        }
    raise NotApplicable(f"{code}: no pool image has a label other than {gold!r}", code=code)
