"""Image quality: peak signal-to-noise ratio."""

import numpy as np
import torch


def psnr(clean, estimate, peak=255.0):
    """:math:`10 \\log_{10}(\\text{peak}^2 / \\text{MSE})` in dB between two images of one shape
    (arrays or tensors; the standard PSNR of Zoran & Weiss 2011, §4)."""
    a = clean.detach().cpu().numpy() if torch.is_tensor(clean) else np.asarray(clean)
    b = estimate.detach().cpu().numpy() if torch.is_tensor(estimate) else np.asarray(estimate)
    if a.shape != b.shape:
        raise ValueError(f"the images differ in shape: {a.shape} and {b.shape}")
    if a.size == 0:
        raise ValueError("the images are empty")
    if not (isinstance(peak, (int, float, np.number)) and np.isfinite(peak) and peak > 0):
        raise ValueError(f"peak must be a positive number; got {peak!r}")
    a, b = a.astype(np.float64), b.astype(np.float64)
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("the images have NaN or inf pixels")
    mse = float(np.mean((a - b) ** 2))
    return float("inf") if mse == 0 else 10.0 * np.log10(peak**2 / mse)
