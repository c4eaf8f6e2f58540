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
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return float("inf") if mse == 0 else 10.0 * np.log10(peak**2 / mse)
