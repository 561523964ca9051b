"""Items and images for the sidecar tests (synthetic radiograph-like images, made here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import orjson
from PIL import Image

EFFUSION_RIGHT = "Is there a pleural effusion on the right? (yes or no)"
COMPARATIVE = "Which side shows more severe pleural effusion? (right, left, same severity, none)"
MALROTATED = "Is the X-ray image malrotated? (yes or no)"


def write_image(path: Path, *, seed: int = 0, size: tuple[int, int] = (96, 80)) -> Path:
    """A grey 16-bit-like gradient with noise, saved as 8-bit PNG."""
    rng = np.random.default_rng(seed)
    width, height = size
    base = np.linspace(30, 200, width)[None, :] + rng.normal(0, 10, (height, width))
    Image.fromarray(np.clip(base, 0, 255).astype(np.uint8), mode="L").save(path)
    return path


def items_and_images(root: Path) -> tuple[Path, Path]:
    """(ITEMS.jsonl, images folder) with three good items, one bad image, one bad line."""
    images = root / "images"
    images.mkdir(parents=True, exist_ok=True)
    write_image(images / "a.png", seed=1)
    write_image(images / "b.png", seed=2, size=(64, 64))
    write_image(images / "c.png", seed=3)
    (images / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n not really a png")
    rows: list[dict[str, Any] | bytes] = [
        {"item_id": "eff-r", "image": "a.png", "question": EFFUSION_RIGHT, "ground_truth": "yes",
         "metadata": {"split": "test"}},
        {"item_id": "cmp", "image": "b.png", "question": COMPARATIVE, "ground_truth": "left"},
        {"item_id": "rot", "image": "c.png", "question": MALROTATED, "ground_truth": "no"},
        {"item_id": "bad-img", "image": "broken.png", "question": MALROTATED,
         "ground_truth": "no"},
        b'{"item_id": "bad-line", "question": 3',
    ]  # fmt: skip
    path = root / "items.jsonl"
    path.write_bytes(
        b"\n".join(r if isinstance(r, bytes) else orjson.dumps(r) for r in rows) + b"\n"
    )
    return path, images


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
