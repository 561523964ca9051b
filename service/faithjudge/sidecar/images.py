"""Safe image loading and the primary paper's preprocessing (METHODS §1.14).

Image names come from item files written by others, so they are untrusted: ``resolve_image_path``
confines them to a configured root (no ``..``, no absolute paths elsewhere, symlinks resolved
before the check). ``load_image`` reads at most ``max_bytes``, reads the header before decoding and
refuses more than ``max_pixels`` (decompression bombs), and only opens a fixed list of raster
formats so that no plugin that shells out (EPS) is ever reachable. Every failure is an
``ImageError`` whose message names the path and whose ``.reason`` is a short code.
"""

from __future__ import annotations

import io
import threading
import warnings
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from faithjudge.errors import UserInputError

__all__ = [
    "ALLOWED_FORMATS",
    "ImageError",
    "decoded_bytes",
    "load_image",
    "mean_colour",
    "pad_to_square",
    "preprocess",
    "resolve_image_path",
]

ALLOWED_FORMATS: tuple[str, ...] = ("PNG", "JPEG", "TIFF", "BMP", "WEBP", "GIF", "PPM")

# PIL keeps its bomb limit in a module global; it is swapped only while the header is read.
_PIL_LIMIT_LOCK = threading.Lock()


class ImageError(UserInputError, ValueError):
    """An image that cannot be used; ``reason`` is a short code, ``path`` the path concerned."""

    def __init__(self, path: object, reason: str, detail: str) -> None:
        super().__init__(f"image {str(path)!r}: {detail}", field="image")
        self.path = str(path)
        self.reason = reason


def _unusable(name: str, exc: OSError) -> ImageError:
    # the name is cut: an issue line quoting a 5,000-character name helps no one
    shown = name if len(name) <= 200 else f"{name[:200]}... ({len(name):,} characters)"
    return ImageError(shown, "bad_name", f"the path cannot be used ({exc.strerror or exc})")


def resolve_image_path(name: str, *, root: Path) -> Path:
    """The file ``name`` refers to, guaranteed to lie under ``root`` after resolving symlinks.

    ``name`` is relative to ``root``; an absolute name is accepted only when it points inside the
    root. Raises ImageError (reasons ``bad_name``, ``root_missing``, ``traversal``,
    ``absolute_outside_root``, ``not_found``, ``not_a_file``).
    """
    if not isinstance(name, str) or not name.strip() or "\x00" in name:
        raise ImageError(name, "bad_name", "the image name must be a non-empty path string")
    try:
        base = Path(root).resolve(strict=True)
    except (OSError, RuntimeError) as exc:
        raise ImageError(root, "root_missing", f"the images root does not exist ({exc})") from None
    if not base.is_dir():
        raise ImageError(root, "root_missing", "the images root is not a directory")
    raw = Path(name)
    try:
        candidate = (raw if raw.is_absolute() else base / raw).resolve(strict=False)
    except (OSError, RuntimeError) as exc:  # symlink loops
        raise ImageError(name, "bad_name", f"the path cannot be resolved ({exc})") from None
    if not candidate.is_relative_to(base):
        if raw.is_absolute():
            raise ImageError(name, "absolute_outside_root", f"absolute path outside {base}")
        raise ImageError(name, "traversal", f"the path leaves the images root {base}")
    try:
        exists, regular = candidate.exists(), candidate.is_file()
    except OSError as exc:  # a name longer than the file system allows, a permission error
        raise _unusable(name, exc) from None
    if not exists:
        raise ImageError(name, "not_found", f"no such file under {base}")
    if not regular:
        raise ImageError(name, "not_a_file", "the path is not a regular file")
    return candidate


def _read_capped(path: Path, max_bytes: int) -> bytes:
    try:
        with open(path, "rb") as handle:
            data = handle.read(max_bytes + 1)
    except IsADirectoryError:
        raise ImageError(path, "not_a_file", "the path is a directory") from None
    except FileNotFoundError:
        raise ImageError(path, "not_found", "no such file") from None
    except OSError as exc:
        raise ImageError(path, "not_found", f"cannot read the file ({exc.strerror})") from None
    if not data:
        raise ImageError(path, "empty", "the file is empty (0 bytes)")
    if len(data) > max_bytes:
        raise ImageError(path, "too_large", f"the file is larger than {max_bytes:,} bytes")
    return data


def _open_header(path: Path, data: bytes, max_pixels: int, formats: tuple[str, ...]) -> Image.Image:
    """Open (header only) with PIL's bomb limit set to ``max_pixels`` for this call."""
    with _PIL_LIMIT_LOCK, warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        previous = Image.MAX_IMAGE_PIXELS
        Image.MAX_IMAGE_PIXELS = max_pixels
        try:
            return Image.open(io.BytesIO(data), formats=list(formats))
        except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
            raise ImageError(
                path,
                "too_many_pixels",
                f"the header declares more than {max_pixels:,} pixels, refused before decoding "
                f"(possible decompression bomb; {exc})",
            ) from None
        except UnidentifiedImageError:
            raise ImageError(
                path, "not_an_image", f"not a readable image (accepted: {', '.join(formats)})"
            ) from None
        except (OSError, SyntaxError, ValueError, EOFError, IndexError) as exc:
            raise ImageError(path, "corrupt", f"the image header is damaged ({exc})") from None
        finally:
            Image.MAX_IMAGE_PIXELS = previous


def decoded_bytes(img: Image.Image) -> int:
    """What decoding ``img`` costs in memory: PIL stores 1, 2 or 4 bytes per pixel by mode."""
    width, height = img.size
    return width * height * _BYTES_PER_PIXEL.get(img.mode, 4)


# PIL's in-memory pixel size per mode (RGB is stored padded to 4 bytes).
_BYTES_PER_PIXEL = {"1": 1, "L": 1, "P": 1, "I;16": 2, "I;16B": 2, "I;16L": 2, "I;16N": 2,
                    "LA": 4, "La": 4, "PA": 4}  # fmt: skip


def load_image(
    path: Path,
    *,
    max_bytes: int = 50_000_000,
    max_pixels: int = 64_000_000,
    max_decoded_bytes: int = 256 * 2**20,
    max_side: int | None = None,
    formats: tuple[str, ...] = ALLOWED_FORMATS,
) -> Image.Image:
    """Decode one image with size, pixel and memory limits; the mode is kept, EXIF applied.

    The header's dimensions are checked against ``max_pixels`` and the memory decoding would
    take (``decoded_bytes``) against ``max_decoded_bytes`` before any pixel is decoded: a small
    file can declare a huge image. With ``max_side`` (the model's processor resizes anyway) a
    larger image is downscaled on load, keeping its aspect ratio: JPEGs are decoded at a reduced
    scale, others resized right after decoding, before any array copy multiplies the cost.
    Raises ImageError for empty, oversized, truncated, corrupt or non-image files.
    """
    path = Path(path)
    try:
        special = path.exists() and not path.is_file()
    except OSError as exc:
        raise _unusable(str(path), exc) from None
    if special:  # a directory, FIFO or device would block or lie
        raise ImageError(path, "not_a_file", "the path is not a regular file")
    data = _read_capped(path, max_bytes)
    img = _open_header(path, data, max_pixels, formats)
    width, height = img.size
    if width <= 0 or height <= 0:
        raise ImageError(path, "zero_size", f"the image has zero size ({width}x{height})")
    if width * height > max_pixels:
        raise ImageError(
            path,
            "too_many_pixels",
            f"{width}x{height} = {width * height:,} pixels exceeds the limit of {max_pixels:,}",
        )
    if max_side is not None and max(width, height) > max_side and img.format == "JPEG":
        img.draft(img.mode, (max_side, max_side))  # the decoder scales by 1/2, 1/4 or 1/8
    cost = decoded_bytes(img)
    if cost > max_decoded_bytes:
        raise ImageError(
            path,
            "too_much_memory",
            f"{width}x{height} {img.mode} would take {cost / 2**20:,.0f} MiB to decode, more "
            f"than the limit of {max_decoded_bytes / 2**20:,.0f} MiB",
        )
    try:
        img.load()
        if max_side is not None and max(img.size) > max_side:
            img = _downscaled(img, max_side)
        ImageOps.exif_transpose(img, in_place=True)  # a copy would double the peak
    except OSError as exc:
        reason = "truncated" if "truncated" in str(exc).lower() else "corrupt"
        raise ImageError(path, reason, f"the image data cannot be decoded ({exc})") from None
    except (SyntaxError, ValueError, EOFError, IndexError, MemoryError) as exc:
        raise ImageError(path, "corrupt", f"the image data cannot be decoded ({exc})") from None
    return img


def _downscaled(img: Image.Image, max_side: int) -> Image.Image:
    """``img`` with its longer side ``max_side``, aspect kept (reducing first, then Lanczos)."""
    scale = max_side / max(img.size)
    size = (max(1, round(img.width * scale)), max(1, round(img.height * scale)))
    try:
        return img.resize(size, Image.Resampling.LANCZOS, reducing_gap=2.0)
    except ValueError:  # a mode Lanczos does not take (16-bit grey on older Pillow)
        return img.resize(size, Image.Resampling.NEAREST)


def _grey_or_colour_array(img: Image.Image) -> np.ndarray:
    """The pixels as an array without losing bit depth: (H, W) for grey, (H, W, 3) for colour."""
    mode = img.mode
    if mode in {"L", "I", "F", "I;16", "I;16L", "I;16B", "I;16N"}:
        return np.asarray(img)
    if mode in {"1", "LA", "La"}:
        return np.asarray(img.convert("L"))
    if mode in {"RGB", "RGBA", "RGBa", "RGBX", "P", "PA", "CMYK", "YCbCr", "LAB", "HSV"}:
        return np.asarray(img if mode == "RGB" else img.convert("RGB"))
    raise ImageError(getattr(img, "filename", "") or "<image>", "unsupported_mode", f"mode {mode}")


def mean_colour(img: Image.Image) -> tuple[int, int, int]:
    """Per-channel mean of an RGB (or grey) image, rounded half to even.

    Computed from PIL's C histogram: exact integer sums, no float copy of the pixels.
    """
    rgb = img if img.mode == "RGB" else img.convert("RGB")
    counts = np.asarray(rgb.histogram(), dtype=np.int64).reshape(3, 256)
    sums = counts @ np.arange(256, dtype=np.int64)
    total = rgb.width * rgb.height
    red, green, blue = (int(v) for v in np.rint(sums / total))
    return red, green, blue


def pad_to_square(img: Image.Image, colour: tuple[int, int, int] | None = None) -> Image.Image:
    """Centre ``img`` on a square canvas filled with ``colour`` (default: its mean colour)."""
    rgb = img if img.mode == "RGB" else img.convert("RGB")
    width, height = rgb.size
    side = max(width, height)
    if width == height:
        return rgb.copy()
    fill = mean_colour(rgb) if colour is None else (int(colour[0]), int(colour[1]), int(colour[2]))
    canvas = Image.new("RGB", (side, side), fill)
    canvas.paste(rgb, ((side - width) // 2, (side - height) // 2))
    return canvas


def preprocess(
    img: Image.Image,
    *,
    square_pad: bool = False,
    pad_colour: tuple[int, int, int] | None = None,
) -> Image.Image:
    """METHODS §1.14: float32, per-image min-max to [0, 255], clip, uint8, RGB; optional square pad.

    A constant image has no range to stretch and keeps its (clipped) value. ``pad_colour`` is the
    dataset mean colour when known; the image's own mean colour is used otherwise. Overlays are
    drawn on the unpadded image, so pad after perturbing (``pad_to_square``).
    """
    arr = _grey_or_colour_array(img).astype(np.float32)
    if arr.size == 0 or not np.isfinite(arr).all():
        name = getattr(img, "filename", "") or "<image>"
        raise ImageError(name, "corrupt", "the image has no pixels or non-finite values")
    low, high = float(arr.min()), float(arr.max())
    if high > low:
        # (x - min) / (max - min) * 255 in this order maps the maximum to exactly 255.0.
        arr -= np.float32(low)
        arr /= np.float32(high - low)
        arr *= np.float32(255.0)
    np.clip(arr, 0.0, 255.0, out=arr)
    out = Image.fromarray(arr.astype(np.uint8))
    if out.mode != "RGB":
        out = out.convert("RGB")
    return pad_to_square(out, pad_colour) if square_pad else out
