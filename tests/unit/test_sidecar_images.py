"""Sidecar image safety (paths confined to a root, size and pixel limits) and preprocessing."""

from __future__ import annotations

import io
import os
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from faithjudge.errors import UserInputError
from faithjudge.sidecar.images import (
    ImageError,
    load_image,
    mean_colour,
    pad_to_square,
    preprocess,
    resolve_image_path,
)
from PIL import Image


@pytest.fixture
def root(tmp_path: Path) -> Path:
    images = tmp_path / "images"
    (images / "sub").mkdir(parents=True)
    Image.new("L", (4, 3), 7).save(images / "sub" / "a.png")
    (tmp_path / "secret.png").write_bytes(b"outside the root")
    return images


def _reason(excinfo: pytest.ExceptionInfo[ImageError]) -> str:
    return excinfo.value.reason


# ---------------------------------------------------------------- path confinement


def test_relative_and_absolute_inside_paths_resolve(root: Path) -> None:
    assert resolve_image_path("sub/a.png", root=root) == (root / "sub" / "a.png").resolve()
    assert resolve_image_path("sub/../sub/a.png", root=root).name == "a.png"
    inside = str((root / "sub" / "a.png").resolve())
    assert resolve_image_path(inside, root=root) == Path(inside)


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("../secret.png", "traversal"),
        ("sub/../../secret.png", "traversal"),
        ("/etc/passwd", "absolute_outside_root"),
        ("sub/missing.png", "not_found"),
        ("sub", "not_a_file"),
        ("", "bad_name"),
        ("a\x00.png", "bad_name"),
    ],
)
def test_bad_paths_are_refused(root: Path, name: str, reason: str) -> None:
    with pytest.raises(ImageError) as info:
        resolve_image_path(name, root=root)
    assert _reason(info) == reason
    assert isinstance(info.value, UserInputError) and isinstance(info.value, ValueError)


def test_symlink_escapes_are_refused_and_inside_links_allowed(root: Path) -> None:
    os.symlink(root.parent / "secret.png", root / "escape.png")
    os.symlink(root.parent, root / "up")
    os.symlink(root / "sub" / "a.png", root / "alias.png")
    with pytest.raises(ImageError, match="leaves the images root") as info:
        resolve_image_path("escape.png", root=root)
    assert _reason(info) == "traversal"
    with pytest.raises(ImageError):
        resolve_image_path("up/secret.png", root=root)
    assert resolve_image_path("alias.png", root=root).name == "a.png"


def test_missing_root_is_reported(tmp_path: Path) -> None:
    with pytest.raises(ImageError) as info:
        resolve_image_path("a.png", root=tmp_path / "nope")
    assert _reason(info) == "root_missing"


# ---------------------------------------------------------------- loading


def _png_bytes(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def _forged_png(width: int, height: int) -> bytes:
    """A tiny PNG whose header claims ``width`` x ``height`` (valid CRC, tiny payload)."""
    data = bytearray(_png_bytes(Image.new("L", (10, 10))))
    ihdr = struct.pack(">II", width, height) + bytes(data[24:29])
    data[16:29] = ihdr
    data[29:33] = struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))
    return bytes(data)


def test_load_keeps_the_mode_and_detaches_from_the_file(tmp_path: Path) -> None:
    grey16 = Image.fromarray(np.arange(12, dtype=np.uint16).reshape(3, 4) * 5000)
    grey16.save(tmp_path / "g.png")
    loaded = load_image(tmp_path / "g.png")
    assert loaded.mode.startswith("I") and loaded.size == (4, 3)
    assert np.array_equal(np.asarray(loaded).astype(np.int64), np.asarray(grey16).astype(np.int64))
    (tmp_path / "g.png").unlink()  # the image no longer needs the file
    assert loaded.getpixel((3, 2)) == 55000


def test_exif_orientation_is_applied(tmp_path: Path) -> None:
    image = Image.new("RGB", (40, 20), (200, 10, 10))
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees clockwise to display
    image.save(tmp_path / "r.jpg", exif=exif)
    assert load_image(tmp_path / "r.jpg").size == (20, 40)


def test_empty_oversized_and_non_image_files(tmp_path: Path) -> None:
    (tmp_path / "empty.png").write_bytes(b"")
    (tmp_path / "text.png").write_text("this is not an image\n")
    (tmp_path / "fig.eps").write_bytes(b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\n")
    (tmp_path / "big.png").write_bytes(_png_bytes(Image.new("L", (64, 64))))
    cases = [
        ("empty.png", {}, "empty"),
        ("text.png", {}, "not_an_image"),
        ("fig.eps", {}, "not_an_image"),  # EPS would run Ghostscript: never opened
        ("big.png", {"max_bytes": 20}, "too_large"),
        ("missing.png", {}, "not_found"),
    ]
    for name, kwargs, reason in cases:
        with pytest.raises(ImageError) as info:
            load_image(tmp_path / name, **kwargs)
        assert _reason(info) == reason, name
        assert name in str(info.value)


@pytest.mark.parametrize(("width", "height"), [(100_000, 100_000), (9_000, 9_000)])
def test_decompression_bombs_are_refused_from_the_header(
    tmp_path: Path, width: int, height: int
) -> None:
    path = tmp_path / "bomb.png"
    path.write_bytes(_forged_png(width, height))
    before = Image.MAX_IMAGE_PIXELS
    with pytest.raises(ImageError, match="pixels") as info:
        load_image(path)
    assert _reason(info) == "too_many_pixels"
    assert before == Image.MAX_IMAGE_PIXELS  # the per-call limit does not leak


@pytest.mark.parametrize(("width", "height"), [(120, 100), (300, 300), (200, 60)])
def test_pixel_limit_is_per_call(tmp_path: Path, width: int, height: int) -> None:
    # 120x100 sits between the limit and twice it (PIL only warns there), 300x300 beyond.
    path = tmp_path / "real.png"
    Image.new("L", (width, height)).save(path)
    with pytest.raises(ImageError) as info:
        load_image(path, max_pixels=10_000)
    assert _reason(info) == "too_many_pixels"
    assert load_image(path, max_pixels=width * height).size == (width, height)


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "TIFF", "BMP"])
def test_truncated_files_are_reported(tmp_path: Path, fmt: str) -> None:
    rng = np.random.default_rng(0)
    buffer = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (120, 120, 3), dtype=np.uint8)).save(buffer, fmt)
    path = tmp_path / f"cut.{fmt.lower()}"
    path.write_bytes(buffer.getvalue()[: len(buffer.getvalue()) // 2])
    with pytest.raises(ImageError, match="cannot be decoded") as info:
        load_image(path)
    assert _reason(info) == "truncated"


def test_zero_dimension_header_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "zero.png"
    path.write_bytes(_forged_png(0, 10))
    with pytest.raises(ImageError) as info:
        load_image(path)
    assert _reason(info) in {"zero_size", "not_an_image", "corrupt"}


# ---------------------------------------------------------------- preprocessing


def test_preprocess_min_max_to_8_bit_rgb() -> None:
    values = np.array([[1000, 1500], [2000, 3000]], dtype=np.uint16)
    out = preprocess(Image.fromarray(values))
    arr = np.asarray(out)
    assert out.mode == "RGB" and arr.dtype == np.uint8
    assert np.array_equal(arr[..., 0], arr[..., 1]) and np.array_equal(arr[..., 0], arr[..., 2])
    # (x - min) / (max - min) * 255, clipped, truncated to uint8: 0, 63.75, 127.5, 255
    assert arr[..., 0].tolist() == [[0, 63], [127, 255]]


def test_preprocess_stretches_8_bit_and_keeps_constant_images() -> None:
    grey = Image.fromarray(np.array([[50, 100], [150, 150]], dtype=np.uint8))
    assert np.asarray(preprocess(grey))[..., 0].tolist() == [[0, 127], [255, 255]]
    flat = Image.new("L", (3, 3), 42)
    assert np.all(np.asarray(preprocess(flat)) == 42)
    rgba = Image.new("RGBA", (2, 2), (0, 10, 255, 7))
    assert preprocess(rgba).mode == "RGB"


def test_square_pad_with_the_mean_or_a_given_colour() -> None:
    wide = Image.new("RGB", (40, 20), (255, 100, 2))  # full 0..255 range: min-max keeps it
    wide.paste((0, 0, 0), (0, 0, 20, 20))
    assert mean_colour(wide) == (128, 50, 1)  # 127.5 rounds half to even
    padded = preprocess(wide, square_pad=True)
    arr = np.asarray(padded)
    assert padded.size == (40, 40)
    assert arr[0, 0].tolist() == [128, 50, 1] and arr[39, 39].tolist() == [128, 50, 1]
    assert arr[10:30, 30].tolist() == [[255, 100, 2]] * 20  # image centred, rows 10..29
    assert arr[9, 30].tolist() == [128, 50, 1] and arr[30, 30].tolist() == [128, 50, 1]
    given = pad_to_square(Image.new("RGB", (3, 7), (1, 2, 3)), (9, 9, 9))
    assert given.size == (7, 7) and np.asarray(given)[0, 0].tolist() == [9, 9, 9]
    square = Image.new("RGB", (5, 5), (1, 2, 3))
    assert preprocess(square, square_pad=True).size == (5, 5)


def test_preprocess_refuses_non_finite_float_images() -> None:
    data = np.array([[0.0, np.nan], [1.0, 2.0]], dtype=np.float32)
    with pytest.raises(ImageError, match="non-finite") as info:
        preprocess(Image.fromarray(data))
    assert _reason(info) == "corrupt"


def test_special_files_are_not_read(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.png"
    os.mkfifo(fifo)
    with pytest.raises(ImageError) as info:
        load_image(fifo)  # would block forever if opened
    assert _reason(info) == "not_a_file"
    with pytest.raises(ImageError) as info:
        load_image(tmp_path)
    assert _reason(info) == "not_a_file"
