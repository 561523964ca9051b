"""MedVIGIL image probes (METHODS §4.2, §4.3): ROI masked / only / progressive, flip, blur ladder.

The ROI is the item's normalised ``mask_box`` rounded to whole pixels; masks are mid-grey
(128, 128, 128). The blur matches ``cv2.GaussianBlur`` with kernel 2k+1, k = ceil(3 sigma), and
reflect-101 borders (up to rounding of the last bit): wide kernels go through an FFT so that the
σ = 64 rung costs about as much as σ = 2.
"""

from __future__ import annotations

import math

import numpy as np

from faithjudge.sidecar.perturb.geometry import PixelBox

__all__ = [
    "BLUR_LADDER",
    "gaussian_blur",
    "gaussian_kernel",
    "grey_outside",
    "progressive_rows",
]

BLUR_LADDER = (0, 2, 4, 8, 16, 32, 64)
# Measured on 2048 x 2048: direct correlation wins below about this radius, FFT above.
_DIRECT_MAX_RADIUS = 8


def gaussian_kernel(sigma: float) -> np.ndarray:
    """Normalised 1-D Gaussian of length 2k+1, k = ceil(3 sigma)."""
    radius = max(1, math.ceil(3 * sigma))
    x = np.arange(-radius, radius + 1, dtype=np.float64)
    weights = np.exp(-0.5 * (x / sigma) ** 2)
    kernel: np.ndarray = weights / weights.sum()
    return kernel


def _blur_axis(data: np.ndarray, weights: np.ndarray, axis: int) -> np.ndarray:
    radius = weights.size // 2
    if radius <= _DIRECT_MAX_RADIUS:
        from scipy import ndimage

        direct: np.ndarray = ndimage.correlate1d(data, weights, axis=axis, mode="mirror")
        return direct
    from scipy import signal

    pad = [(0, 0)] * data.ndim
    pad[axis] = (radius, radius)
    padded = np.pad(data, pad, mode="reflect")  # numpy's reflect is cv2's reflect-101
    shape = [1] * data.ndim
    shape[axis] = weights.size
    via_fft: np.ndarray = signal.fftconvolve(
        padded, weights.reshape(shape), mode="valid", axes=axis
    )
    return via_fft


def gaussian_blur(array: np.ndarray, sigma: float) -> np.ndarray:
    """Separable Gaussian blur of an (H, W, C) uint8 array; sigma 0 returns a copy.

    Works channel-first so that both passes run along contiguous memory.
    """
    if sigma == 0:
        return array.copy()
    weights = gaussian_kernel(sigma).astype(np.float32)
    data = np.ascontiguousarray(array.transpose(2, 0, 1), dtype=np.float32)
    data = _blur_axis(data, weights, 1)
    data = _blur_axis(data, weights, 2)
    np.rint(data, out=data)
    np.clip(data, 0, 255, out=data)
    return np.ascontiguousarray(data.astype(np.uint8).transpose(1, 2, 0))


def grey_outside(array: np.ndarray, box: PixelBox, colour: tuple[int, int, int]) -> np.ndarray:
    """A new array of ``colour`` with only the box's pixels kept."""
    x0, y0, x1, y1 = box
    out = np.empty_like(array)
    out[...] = colour
    out[y0:y1, x0:x1] = array[y0:y1, x0:x1]
    return out


def progressive_rows(box: PixelBox, k: int) -> PixelBox:
    """The top k/3 of the box (rows floor(k*h/3)); k = 3 is the whole box, k = 0 nothing."""
    x0, y0, x1, y1 = box
    rows = (k * (y1 - y0)) // 3
    return x0, y0, x1, y0 + rows
