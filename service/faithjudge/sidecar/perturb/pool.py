"""Candidate images for the substitution conditions: same-label swap and hard negatives.

A pool is a list of ``PoolEntry`` rows sorted by ``image_id`` (so choices do not depend on the
order the caller listed them in). Images are given in memory or as paths under a root, loaded and
preprocessed on demand. Embeddings are precomputed by the caller (e.g. CLIP image embeddings);
nothing is downloaded here. A pool without embeddings falls back to a cheap deterministic one:
the grey image shrunk to 16 x 16, centred and L2-normalised.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from faithjudge.sidecar.images import load_image, preprocess, resolve_image_path
from faithjudge.sidecar.perturb.base import PerturbationError, norm_answer

__all__ = [
    "THUMBNAIL_SIDE",
    "ImagePool",
    "PoolEntry",
    "as_vector",
    "pixel_digest",
    "thumbnail_embedding",
]

THUMBNAIL_SIDE = 16


@dataclass(frozen=True)
class PoolEntry:
    """One candidate: its id, label (normalised answer/label state) and where its pixels are."""

    image_id: str
    label: str
    finding: str | None = None
    patient_id: str | None = None
    image: Image.Image | None = field(default=None, compare=False, repr=False)
    path: str | None = None
    embedding: Any = field(default=None, compare=False, repr=False)


def pixel_digest(image: Image.Image) -> str:
    """sha256 of mode, size and pixels: equal digests mean identical images."""
    digest = hashlib.sha256(f"{image.mode}:{image.size[0]}x{image.size[1]}:".encode())
    digest.update(image.tobytes())
    return digest.hexdigest()


def thumbnail_embedding(image: Image.Image) -> np.ndarray:
    """Grey 16x16 box-filtered thumbnail, mean removed, unit length (zero for flat images)."""
    grey = image.convert("L").resize((THUMBNAIL_SIDE, THUMBNAIL_SIDE), Image.Resampling.BOX)
    vector = np.asarray(grey, dtype=np.float64).reshape(-1)
    vector -= vector.mean()
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector


class ImagePool:
    """Candidates for ``swap_same_label`` and ``hard_negative``.

    ``root`` is where entry paths live (they go through ``resolve_image_path``); ``prepare`` is
    applied to every loaded or given image (default: ``preprocess``, the same as the query image).
    """

    def __init__(
        self,
        entries: Iterable[PoolEntry],
        *,
        root: Path | None = None,
        prepare: Callable[[Image.Image], Image.Image] | None = preprocess,
        load: Callable[[Path], Image.Image] = load_image,
    ) -> None:
        given = list(entries)
        if not all(isinstance(entry, PoolEntry) for entry in given):
            raise PerturbationError("pool entries must be PoolEntry objects", param="pool")
        rows = sorted(given, key=lambda e: e.image_id)
        counts = Counter(e.image_id for e in rows)
        dupes = sorted(i for i, n in counts.items() if n > 1)
        if dupes:
            raise PerturbationError(f"pool image ids repeat: {dupes[:5]}", param="pool")
        for entry in rows:
            if entry.image is None and entry.path is None:
                raise PerturbationError(
                    f"pool entry {entry.image_id!r} has neither image nor path", param="pool"
                )
            if entry.path is not None and root is None:
                raise PerturbationError(
                    f"pool entry {entry.image_id!r} has a path but the pool has no root",
                    param="pool",
                )
        self.entries: tuple[PoolEntry, ...] = tuple(rows)
        self.root = root
        self._prepare = prepare
        self._load = load
        self._index = {e.image_id: i for i, e in enumerate(rows)}
        self._images: dict[int, Image.Image] = {}
        self._digests: dict[int, str] = {}
        self._matrix: np.ndarray | None = None
        self._matrix_kind: str | None = None

    def __len__(self) -> int:
        return len(self.entries)

    def index_of(self, image_id: str | None) -> int | None:
        return None if image_id is None else self._index.get(image_id)

    def image(self, index: int) -> Image.Image:
        """The prepared image of entry ``index`` (cached)."""
        cached = self._images.get(index)
        if cached is not None:
            return cached
        entry = self.entries[index]
        if entry.image is not None:
            img = entry.image
        else:
            assert entry.path is not None and self.root is not None
            img = self._load(resolve_image_path(entry.path, root=self.root))
        if self._prepare is not None:
            img = self._prepare(img)
        self._images[index] = img
        return img

    def digest(self, index: int) -> str:
        if index not in self._digests:
            self._digests[index] = pixel_digest(self.image(index))
        return self._digests[index]

    def first_distinct(
        self, candidates: Iterable[int], query: Image.Image, *, resize: bool
    ) -> tuple[int, Image.Image] | None:
        """The first candidate that is not a pixel duplicate of ``query``, as a fresh copy
        (resized to the query's size when ``resize``); None when every candidate is one."""
        query_digest: str | None = None
        for index in candidates:
            index = int(index)
            chosen = self.image(index)
            if chosen.size == query.size and chosen.mode == query.mode:  # maybe a duplicate
                if query_digest is None:
                    query_digest = pixel_digest(query)
                if self.digest(index) == query_digest:
                    continue
            if resize and chosen.size != query.size:
                return index, chosen.resize(query.size, Image.Resampling.BILINEAR)
            return index, chosen.copy()
        return None

    def labels(self) -> list[str]:
        return [norm_answer(e.label) for e in self.entries]

    def embedding_kind(self) -> str:
        """'supplied' when every entry has an embedding, 'thumbnail' when none has."""
        given = [e.embedding is not None for e in self.entries]
        if all(given) and given:
            return "supplied"
        if not any(given):
            return "thumbnail"
        missing = [e.image_id for e in self.entries if e.embedding is None][:5]
        raise PerturbationError(
            f"pool embeddings must be given for all entries or none; missing for {missing}",
            param="pool",
        )

    def matrix(self) -> tuple[np.ndarray, str]:
        """(N, D) L2-normalised embeddings and which kind they are."""
        if self._matrix is None:
            kind = self.embedding_kind()
            if kind == "supplied":
                rows = [as_vector(e.embedding, e.image_id) for e in self.entries]
                dims = {r.shape[0] for r in rows}
                if len(dims) != 1:
                    raise PerturbationError(
                        f"pool embeddings differ in length: {sorted(dims)}", param="pool"
                    )
                matrix = np.stack(rows)
                norms = np.linalg.norm(matrix, axis=1, keepdims=True)
                matrix = np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)
            else:
                matrix = np.stack([thumbnail_embedding(self.image(i)) for i in range(len(self))])
            self._matrix, self._matrix_kind = matrix, kind
        assert self._matrix_kind is not None
        return self._matrix, self._matrix_kind


def as_vector(value: Any, name: str) -> np.ndarray:
    try:
        vector = np.asarray(value, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise PerturbationError(
            f"embedding of {name!r} is not numeric", param="embedding"
        ) from None
    if vector.size == 0 or not np.all(np.isfinite(vector)):
        raise PerturbationError(f"embedding of {name!r} is empty or not finite", param="embedding")
    return vector
