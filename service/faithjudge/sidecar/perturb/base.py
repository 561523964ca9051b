"""Shared pieces of the perturbation families: item and result types, errors, seeds, arrays."""

from __future__ import annotations

import hashlib
import importlib.metadata
import numbers
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
from PIL import Image, features

from faithjudge.errors import UserInputError

__all__ = [
    "NotApplicable",
    "Params",
    "PerturbItem",
    "PerturbationError",
    "Perturbed",
    "as_rgb_array",
    "from_array",
    "item_rng",
    "library_versions",
    "norm_answer",
]


class PerturbationError(UserInputError, ValueError):
    """A perturbation that cannot be built; the message names the code and the parameter."""

    def __init__(self, message: str, *, code: str | None = None, param: str | None = None) -> None:
        super().__init__(message, field=f"params.{param}" if param else "code")
        self.code = code
        self.param = param


class NotApplicable(PerturbationError):
    """The condition is undefined for this item (skip it; it is not an input error)."""


@dataclass(frozen=True)
class PerturbItem:
    """What a perturbation needs to know about one question-image item."""

    item_id: str
    question: str
    options: tuple[str, ...]
    ground_truth: str
    target_answer: str | None = None
    region: str | None = None
    target_side: str | None = None
    mask_box: tuple[float, float, float, float] | None = None


@dataclass(frozen=True)
class Perturbed:
    """The modified input: image (None when absent), prompt hint and the JSON-able recipe."""

    image: Image.Image | None
    hint: str | None
    recipe: dict[str, Any]


_SPACES = re.compile(r"\s+")


def norm_answer(text: str | None) -> str:
    """Answers compare case-insensitively with collapsed whitespace and no trailing dot."""
    return _SPACES.sub(" ", (text or "").casefold()).strip(" .")


def item_rng(seed: int, code: str, item_id: str) -> np.random.Generator:
    """A generator that depends only on (seed, code, item id): the same in every process.

    Python's ``hash()`` is salted per process, so the item id goes through sha256.
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise PerturbationError(f"seed must be a non-negative int, got {seed!r}", code=code)
    digest = hashlib.sha256(f"{code}\x00{item_id}".encode()).digest()
    words = [int.from_bytes(digest[i : i + 4], "little") for i in range(0, 16, 4)]
    return np.random.default_rng(np.random.SeedSequence([seed, *words]))


def as_rgb_array(image: Image.Image, code: str) -> np.ndarray:
    """The image as a writable (H, W, 3) uint8 array; grey images are expanded to RGB."""
    if not isinstance(image, Image.Image):
        raise PerturbationError(
            f"{code}: image must be a PIL image, got {type(image).__name__}", code=code
        )
    if image.mode == "RGB":
        return np.array(image)
    if image.mode in {"L", "1", "P", "RGBA", "LA"}:
        return np.array(image.convert("RGB"))
    raise PerturbationError(
        f"{code}: image mode {image.mode} is not 8-bit; run images.preprocess() first", code=code
    )


def from_array(array: np.ndarray) -> Image.Image:
    return Image.fromarray(np.ascontiguousarray(array, dtype=np.uint8))


@cache
def library_versions() -> Mapping[str, str | None]:
    """Versions that can change output bytes (PIL resampling and JPEG, numpy's generator)."""
    try:
        sidecar = importlib.metadata.version("faithjudge")
    except importlib.metadata.PackageNotFoundError:
        sidecar = None
    return {
        "faithjudge": sidecar,
        "pillow": importlib.metadata.version("pillow"),
        "numpy": np.__version__,
        "libjpeg": features.version("jpg"),
    }


_MISSING = object()


class Params:
    """Typed reads of a code's parameters; records what was used and rejects unknown keys.

    Every family reads all the parameters it accepts before branching, so a key nobody read is a
    typo or a parameter of another code, and ``finish`` reports it.
    """

    def __init__(self, code: str, given: Mapping[str, Any] | None) -> None:
        if given is not None and not isinstance(given, Mapping):
            raise PerturbationError(f"{code}: params must be a mapping", code=code, param="params")
        self.code = code
        self._given = dict(given or {})
        self.used: dict[str, Any] = {}

    def _raw(self, name: str, default: Any) -> Any:
        value = self._given.get(name, _MISSING)
        return default if value is _MISSING or value is None else value

    def _fail(self, name: str, message: str) -> PerturbationError:
        text = f"{self.code}: params.{name} {message}"
        return PerturbationError(text, code=self.code, param=name)

    def number(
        self, name: str, default: float | None, *, lo: float | None = None, hi: float | None = None
    ) -> float | None:
        value = self._raw(name, default)
        if value is None:
            self.used[name] = None
            return None
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or value != value:
            raise self._fail(name, f"must be a number, got {value!r}")
        value = int(value) if isinstance(value, numbers.Integral) else float(value)
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            raise self._fail(name, f"must lie in [{lo}, {hi}], got {value!r}")
        self.used[name] = value
        return float(value)

    def integer(
        self, name: str, default: int | None, *, lo: int | None = None, hi: int | None = None
    ) -> int | None:
        value = self._raw(name, default)
        if value is None:
            self.used[name] = None
            return None
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise self._fail(name, f"must be an integer, got {value!r}")
        value = int(value)
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            raise self._fail(name, f"must lie in [{lo}, {hi}], got {value!r}")
        self.used[name] = value
        return value

    def required_number(self, name: str, *, lo: float, hi: float | None = None) -> float:
        if self._raw(name, None) is None:
            raise self._fail(name, "is required")
        value = self.number(name, None, lo=lo, hi=hi)
        assert value is not None
        return value

    def choice(self, name: str, default: str, allowed: tuple[str, ...]) -> str:
        value = self._raw(name, default)
        if value not in allowed:
            raise self._fail(name, f"must be one of {', '.join(allowed)}, got {value!r}")
        self.used[name] = value
        return str(value)

    def flag(self, name: str, default: bool) -> bool:
        value = self._raw(name, default)
        if not isinstance(value, bool):
            raise self._fail(name, f"must be true or false, got {value!r}")
        self.used[name] = value
        return value

    def colour(self, name: str, default: tuple[int, int, int]) -> tuple[int, int, int]:
        value = self._raw(name, default)
        if isinstance(value, int) and not isinstance(value, bool):
            value = (value, value, value)
        ok = isinstance(value, list | tuple) and len(value) == 3
        if not ok or not all(
            isinstance(c, int) and not isinstance(c, bool) and 0 <= c <= 255 for c in value
        ):
            raise self._fail(name, f"must be an RGB triple of 0..255 integers, got {value!r}")
        rgb = (int(value[0]), int(value[1]), int(value[2]))
        self.used[name] = list(rgb)
        return rgb

    def optional_colour(self, name: str) -> tuple[int, int, int] | None:
        if self._raw(name, None) is None:
            self.used[name] = None
            return None
        return self.colour(name, (0, 0, 0))

    def text(self, name: str, default: str | None) -> str | None:
        value = self._raw(name, default)
        if value is not None and not isinstance(value, str):
            raise self._fail(name, f"must be a string, got {value!r}")
        self.used[name] = value
        return value

    def raw(self, name: str) -> Any:
        """A value the family validates itself (arrays); not copied into the recipe."""
        value = self._raw(name, None)
        self.used.setdefault(name, None if value is None else "<given>")
        return value

    def finish(self) -> dict[str, Any]:
        unknown = sorted(set(self._given) - set(self.used))
        if unknown:
            accepted = ", ".join(sorted(self.used)) or "none"
            raise PerturbationError(
                f"{self.code}: unknown parameter(s) {', '.join(unknown)}; accepted: {accepted}",
                code=self.code,
                param=unknown[0],
            )
        return dict(self.used)
