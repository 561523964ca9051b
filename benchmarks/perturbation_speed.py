"""Perturbation throughput on one core: images/s for 2,048 x 2,048 inputs, per code and family.

Every sidecar perturbation (``faithjudge.sidecar.perturb``) runs on the same seeded synthetic
radiograph-like RGB image (smooth anatomy-ish gradients plus noise), as the sidecar calls it:
``perturb(code, image, item, params=..., seed=...)``, PIL image in, PIL image out. Preprocessing
(``images.preprocess``: 16-bit grey to 8-bit RGB, with and without the square pad) and loading a
16-bit PNG are timed the same way. Two references are measured in the same run: a patch shuffle
that copies patch by patch in a Python loop (vs the gather through a patch-grid view, both
array to array) and the σ = 64 blur as a direct separable convolution (vs the FFT path).

The process pins itself to one CPU; each figure is the median over repeats (at least
``--min-time`` seconds or ``--max-repeats`` calls per code), as images per CPU-second of this
process (headline; the machine is shared) and as images per wall-clock second. Run:
``python -m benchmarks.perturbation_speed [--size 2048] [--min-time 1.0]``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from benchmarks._common import load_average, machine_facts, median, write_result

if TYPE_CHECKING:
    from faithjudge.sidecar.perturb import ImagePool
    from PIL import Image

# The sidecar (and PIL) are imported where they are used, so that ``run_all`` can build its
# summary table from the results file without them.

__all__ = ["main", "summary_rows"]

NAME = "perturbation_speed"
COMPARATIVE_Q = "Which side shows more severe pleural effusion? (right, left, same severity, none)"
BINARY_Q = "Is there a pleural effusion on the left? (yes or no)"


def _pin_one_core() -> int | None:
    try:
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[-1]})
        return cpus[-1]
    except (AttributeError, OSError):
        return None


def synthetic_radiograph(size: int, seed: int) -> np.ndarray:
    """(size, size) uint16 image: two bright lung fields, a mediastinum, ribs-like bands, noise."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:size, 0:size].astype(np.float32) / size
    lungs = np.exp(-(((x - 0.3) / 0.15) ** 2 + ((y - 0.5) / 0.3) ** 2))
    lungs += np.exp(-(((x - 0.7) / 0.15) ** 2 + ((y - 0.5) / 0.3) ** 2))
    body = 0.6 * np.exp(-(((x - 0.5) / 0.08) ** 2)) + 0.2 * np.sin(40 * y) ** 2
    image = 3000 * (body + 0.5 * (1 - lungs)) + rng.normal(0, 60, (size, size))
    return np.clip(image, 0, 65535).astype(np.uint16)


def _time(call: Callable[[], Any], min_time: float, max_repeats: int) -> dict[str, Any]:
    """Median wall and CPU time per call.

    The machine is shared, so wall time includes waiting for the core; the CPU time of this
    (single-threaded, pinned) process is the fairer per-core figure and is the headline.
    """
    call()  # warm-up: imports, caches
    walls: list[float] = []
    cpus: list[float] = []
    start = time.perf_counter()
    while len(walls) < max_repeats and (time.perf_counter() - start < min_time or len(walls) < 3):
        w0, c0 = time.perf_counter(), time.process_time()
        call()
        cpus.append(time.process_time() - c0)
        walls.append(time.perf_counter() - w0)
    cpu, wall = max(median(cpus), 1e-6), median(walls)
    return {
        "images_per_cpu_s": round(1.0 / cpu, 2),
        "cpu_ms_per_image": round(cpu * 1000, 2),
        "images_per_s": round(1.0 / wall, 2),
        "wall_ms_per_image": round(wall * 1000, 2),
        "repeats": len(walls),
    }


def _shuffle_loop_reference(array: np.ndarray, patch: int, seed: int) -> np.ndarray:
    """Patch-by-patch copy in a Python loop (the obvious way, for the ratio)."""
    rows, cols = array.shape[0] // patch, array.shape[1] // patch
    order = np.random.default_rng(seed).permutation(rows * cols)
    out = array.copy()
    for dst, src in enumerate(order):
        sr, sc = divmod(int(src), cols)
        dr, dc = divmod(dst, cols)
        out[dr * patch : (dr + 1) * patch, dc * patch : (dc + 1) * patch] = array[
            sr * patch : (sr + 1) * patch, sc * patch : (sc + 1) * patch
        ]
    return out


def _direct_blur_reference(array: np.ndarray, sigma: float) -> np.ndarray:
    from faithjudge.sidecar.perturb.medvigil import gaussian_kernel
    from scipy import ndimage

    weights = gaussian_kernel(sigma)
    data = array.astype(np.float32)
    data = ndimage.correlate1d(data, weights, axis=0, mode="mirror")
    data = ndimage.correlate1d(data, weights, axis=1, mode="mirror")
    return np.clip(np.rint(data), 0, 255).astype(np.uint8)


def _cases(size: int) -> list[tuple[str, str, dict[str, Any] | None, str]]:
    """(label, code, params, item kind) for every timed perturbation call."""
    from faithjudge.sidecar.perturb import BLUR_LADDER

    cases: list[tuple[str, str, dict[str, Any] | None, str]] = [
        ("BASELINE", "BASELINE", None, "binary"),
        ("SHAM", "SHAM", None, "binary"),
        ("TB-RAD", "TB-RAD", None, "binary"),
        ("TB-LA", "TB-LA", None, "binary"),
        ("VB-BB", "VB-BB", None, "comparative"),
        ("VB-HM", "VB-HM", None, "comparative"),
        ("VH-BB", "VH-BB", None, "binary"),
        ("VH-HM", "VH-HM", None, "binary"),
        ("VO-BB", "VO-BB", None, "binary"),
        ("target_mask", "target_mask", None, "binary"),
        ("irrelevant_mask", "irrelevant_mask", None, "binary"),
        ("swap_same_label", "swap_same_label", {"image_id": "q"}, "binary"),
        ("blank", "blank", None, "binary"),
        ("shuffle", "shuffle", None, "binary"),
        ("no_image", "no_image", None, "binary"),
    ]
    for kind in ("noise", "blur", "jpeg", "patch_occlusion"):
        cases.append((f"corrupt ({kind})", "corrupt", {"kind": kind}, "binary"))
    cases += [
        ("hard_negative (1,000 x 768 embeddings)", "hard_negative", {"image_id": "q"}, "binary"),
        ("roi_masked", "roi_masked", None, "binary"),
        ("roi_only", "roi_only", None, "binary"),
        ("roi_progressive_mask (k=2)", "roi_progressive_mask", {"k": 2}, "binary"),
        ("lr_flip", "lr_flip", None, "binary"),
    ]
    for sigma in BLUR_LADDER:
        cases.append((f"blur_sigma (σ={sigma})", "blur_sigma", {"sigma": sigma}, "binary"))
    return cases


_FAMILY = {
    "BASELINE": "control",
    "SHAM": "control",
    "TB-RAD": "moll_text",
    "TB-LA": "moll_text",
    "VB-BB": "moll_image",
    "VB-HM": "moll_image",
    "VH-BB": "moll_image",
    "VH-HM": "moll_image",
    "VO-BB": "moll_image",
    "target_mask": "lotfinia",
    "irrelevant_mask": "lotfinia",
    "swap_same_label": "lotfinia",
    "blank": "zafar",
    "shuffle": "zafar",
    "no_image": "zafar",
    "corrupt": "zafar",
    "hard_negative": "zafar",
    "roi_masked": "medvigil",
    "roi_only": "medvigil",
    "roi_progressive_mask": "medvigil",
    "lr_flip": "medvigil",
    "blur_sigma": "medvigil",
}


def _pool(image: Image.Image, size: int, rng: np.random.Generator) -> ImagePool:
    """1,000 entries with 768-d embeddings; 8 distinct full-size images shared among them."""
    from faithjudge.sidecar.perturb import ImagePool, PoolEntry
    from PIL import Image

    images = [
        Image.fromarray(np.roll(np.asarray(image), shift=37 * (i + 1), axis=1)) for i in range(8)
    ]
    entries = [
        PoolEntry(
            f"p{i:04d}",
            "yes" if i % 2 else "no",
            patient_id=f"pt{i}",
            image=images[i % 8],
            embedding=rng.normal(size=768).astype(np.float32),
        )
        for i in range(1000)
    ]
    entries.append(
        PoolEntry("q", "yes", patient_id="ptq", image=image, embedding=rng.normal(size=768))
    )
    # Images are already 8-bit RGB, as the sidecar's prepared pool images are.
    return ImagePool(entries, prepare=None)


def _print(label: str, row: dict[str, Any]) -> None:
    cpu, wall = row["images_per_cpu_s"], row["images_per_s"]
    print(f"{label:54s} {cpu:10.2f} images/CPU-s {wall:10.2f} images/s wall", flush=True)


def summary_rows(results: dict[str, dict[str, Any] | None]) -> list[tuple[str, str, str, str]]:
    """Headline rows for ``benchmarks.run_all``: slowest and fastest call of each family."""
    data = results.get(NAME)
    if not data:
        return []
    side = data["config"]["size"][0]
    out = [(f"Perturbations on {side} x {side} RGB, 1 core (images per CPU-second)", "", "—", "—")]
    families: dict[str, list[tuple[str, float]]] = {}
    for label, row in data["results"].items():
        families.setdefault(row["family"], []).append((label, row["images_per_cpu_s"]))
    for family, rows in families.items():
        slow = min(rows, key=lambda r: r[1])
        fast = max(rows, key=lambda r: r[1])
        value = f"{slow[1]:,.1f} ({slow[0]})"
        if fast != slow:
            value += f" to {fast[1]:,.1f} ({fast[0]})"
        out.append((f"  {family}", value, "—", "—"))
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=2048)
    parser.add_argument("--min-time", type=float, default=1.0)
    parser.add_argument("--max-repeats", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    from faithjudge.sidecar.images import load_image, preprocess
    from faithjudge.sidecar.perturb import PerturbItem, perturb
    from faithjudge.sidecar.perturb.zafar import shuffle_patches, to_patches
    from PIL import Image

    cpu = _pin_one_core()
    started = time.perf_counter()
    load_at_start = load_average()
    rng = np.random.default_rng(args.seed)

    raw16 = synthetic_radiograph(args.size, args.seed)
    raw_image = Image.fromarray(raw16)
    image = preprocess(raw_image)
    items = {
        "binary": PerturbItem(
            "bench-1", BINARY_Q, ("yes", "no"), "yes", "no", mask_box=(0.6, 0.55, 0.9, 0.9)
        ),
        "comparative": PerturbItem(
            "bench-2", COMPARATIVE_Q, ("right", "left", "same severity", "none"), "right", "left"
        ),
    }
    pool = _pool(image, args.size, rng)
    pool.matrix()  # embeddings are stacked once per pool, not per call

    # One untimed pass first: the allocator settles on reusing 12 MB buffers after the first
    # frees, which would otherwise make whichever case runs first look slow.
    for _label, code, params, kind in _cases(args.size):
        chosen = pool if code in {"swap_same_label", "hard_negative"} else None
        perturb(code, image, items[kind], params=params, seed=1, pool=chosen)

    results: dict[str, Any] = {}
    for label, code, params, kind in _cases(args.size):
        needs_pool = code in {"swap_same_label", "hard_negative"}

        def call(code: str = code, params: Any = params, kind: str = kind, p: bool = needs_pool):
            chosen = pool if p else None
            return perturb(code, image, items[kind], params=params, seed=1, pool=chosen)

        results[label] = {"code": code, "family": _FAMILY[code]} | _time(
            call, args.min_time, args.max_repeats
        )
        _print(label, results[label])

    wide = Image.fromarray(raw16[: args.size * 7 // 8])
    with tempfile.TemporaryDirectory() as tmp:
        png = Path(tmp) / "radiograph16.png"
        raw_image.save(png)
        png_bytes = png.stat().st_size
        prep = {
            "preprocess (16-bit grey -> 8-bit RGB)": lambda: preprocess(raw_image),
            "preprocess + square pad (2048 x 1792 -> 2048 x 2048)": lambda: preprocess(
                wide, square_pad=True
            ),
            "load_image (16-bit PNG)": lambda: load_image(png),
        }
        for label, call in prep.items():
            results[label] = {"code": None, "family": "preprocessing"} | _time(
                call, args.min_time, args.max_repeats
            )
            _print(label, results[label])

    array = np.asarray(image)
    # Array in, array out on both sides: the ratio compares the permutations, not PIL copies.
    ours = _time(
        lambda: shuffle_patches(array, 32, np.random.default_rng(1)),
        args.min_time,
        args.max_repeats,
    )
    loop = _time(lambda: _shuffle_loop_reference(array, 32, 1), args.min_time, args.max_repeats)
    direct = _time(lambda: _direct_blur_reference(array, 64), 0.0, 1)
    ours_blur = results["blur_sigma (σ=64)"]["images_per_cpu_s"]
    references = {
        "shuffle_array_only_gather": ours,
        "shuffle_python_patch_loop": loop
        | {
            "patches": to_patches(array, 32)[0].shape[0],
            "speedup_of_gather": round(ours["images_per_cpu_s"] / loop["images_per_cpu_s"], 2),
        },
        "blur_sigma64_direct_convolution": direct
        | {"speedup_of_fft_path": round(ours_blur / direct["images_per_cpu_s"], 2)},
    }
    payload = {
        "benchmark": NAME,
        "config": {
            "size": [args.size, args.size],
            "input": "seeded synthetic radiograph, preprocessed to 8-bit RGB",
            "min_time_s": args.min_time,
            "max_repeats": args.max_repeats,
            "pinned_cpu": cpu,
            "png_bytes": png_bytes,
        },
        "results": results,
        "references": references,
        "load_average_at_start": load_at_start,
        "duration_s": round(time.perf_counter() - started, 1),
        "machine": machine_facts(),
    }
    path = write_result(NAME, payload)
    print(f"wrote {path}")
    return payload


if __name__ == "__main__":
    main()
