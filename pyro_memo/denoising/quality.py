"""Image quality: peak signal-to-noise ratio."""

import math
import numbers

import numpy as np
import torch


def _as_real_image(image, name):
    """``image`` (an array or tensor of real numbers) as a float64 array, else :class:`ValueError` naming
    ``name``: a string, complex (whose imaginary part a cast drops) or boolean image is not one."""
    array = image.detach().cpu().numpy() if torch.is_tensor(image) else np.asarray(image)
    if array.dtype.kind not in "iuf":
        raise ValueError(f"{name} must be an image of real numbers; got dtype {array.dtype}")
    return array.astype(np.float64)


def _log10_mse(a, b):
    """:math:`\\log_{10}` of the mean squared difference of ``a`` and ``b`` (not both equal), computed on the
    differences scaled by their largest, so that huge or tiny pixels neither overflow nor underflow."""
    half = a / 2 - b / 2
    scale = float(np.abs(half).max())
    return math.log10(4 * float(np.mean((half / scale) ** 2))) + 2 * math.log10(scale)


def psnr(clean, estimate, peak=255.0):
    """:math:`10 \\log_{10}(\\text{peak}^2 / \\text{MSE})` in dB between two images of one shape
    (arrays or tensors of real numbers; the standard PSNR of Zoran & Weiss 2011, §4). ``peak`` is the
    largest pixel value of the images' scale: 255 for the denoisers' 0-255 images, ``peak=1`` for images in
    [0, 1] (with the default they would score 48.1 dB too high).

    :raises ValueError: for images of other shapes, empty, not real or not finite, or a ``peak`` that is
        not a positive finite number.
    """
    a, b = _as_real_image(clean, "clean"), _as_real_image(estimate, "estimate")
    if a.shape != b.shape:
        raise ValueError(f"the images differ in shape: {a.shape} and {b.shape}")
    if a.size == 0:
        raise ValueError("the images are empty")
    if isinstance(peak, bool) or not (isinstance(peak, numbers.Real) and np.isfinite(peak) and peak > 0):
        raise ValueError(f"peak must be a positive number; got {peak!r}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("the images have NaN or inf pixels")
    with np.errstate(over="ignore", under="ignore"):
        mse = float(np.mean((a - b) ** 2))
        if np.isfinite(mse) and mse > 0 and np.isfinite(float(peak) ** 2):
            return 10.0 * np.log10(peak**2 / mse)
        if np.array_equal(a, b):
            return float("inf")
        return 20.0 * math.log10(peak) - 10.0 * _log10_mse(a, b)
