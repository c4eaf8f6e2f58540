"""Single-pass patch MMSE denoising under a Gaussian-mixture patch prior (Zoran & Weiss 2011, §2's
patch estimates averaged over overlapping patches; Hughes & Sudderth 2013, §4.4).

Every overlapping patch :math:`y_i = P_i y` of the noisy image is denoised by its posterior mean
under :math:`p(x) = \\sum_k w_k N(x; 0, \\Sigma_k)` with noise :math:`N(0, \\sigma^2 I)`:

.. math::  p(k \\mid y) \\propto w_k N(y; 0, \\Sigma_k + \\sigma^2 I), \\qquad
           E[x \\mid y] = \\sum_k p(k \\mid y)\\, \\Sigma_k (\\Sigma_k + \\sigma^2 I)^{-1} y
                        = y - \\sigma^2 \\sum_k p(k \\mid y) (\\Sigma_k + \\sigma^2 I)^{-1} y,

on the zero-mean patch (its DC removed and added back after), and each pixel of the result is
the mean of the estimates of the patches covering it, :math:`\\hat x = (\\sum_i P_i^T P_i)^{-1}
\\sum_i P_i^T \\hat x_i`.
"""

import torch

from .images import check_sigma
from .patches import PATCH, as_image_tensor, average_patches, image_patches, like_input
from .prior import MAX_ELEMENTS, component_scores, row_chunks


def mmse_patches(y, prior, noise_var, max_elements=MAX_ELEMENTS):
    """:math:`E[x_i \\mid y_i]` of zero-mean noisy patches ``y`` ``(n, D)`` under ``prior`` with white
    noise of variance ``noise_var`` (the module's equation; :math:`p(k \\mid y)` by log-sum-exp),
    in chunks of at most ``max_elements`` numbers of ``(rows, K, D)`` intermediates."""
    precisions, log_norms = prior.noisy_terms(noise_var)
    out = torch.empty_like(y)
    for rows in row_chunks(y.shape[0], prior.K, prior.dim, max_elements):
        log_joint, solves = component_scores(y[rows], precisions, log_norms)
        resp = torch.softmax(log_joint, dim=-1)
        out[rows] = y[rows] - noise_var * torch.einsum("nk,nkd->nd", resp, solves)
    return out


def mmse_denoise(noisy, prior, sigma, size=PATCH, max_elements=MAX_ELEMENTS):
    """Denoise the grayscale image ``noisy`` (noise standard deviation ``sigma``, on the image's
    scale) by the averaged patch posterior means of the module docstring.

    :param noisy: ``(H, W)`` array or tensor (a tensor gives a tensor on the prior's device).
    :param prior: a :class:`~pyro_memo.denoising.GaussianMixturePrior` of ``size**2``-pixel patches.
    :returns: the denoised image, unclipped.
    """
    check_sigma(sigma)
    y = as_image_tensor(noisy, prior)
    patches = image_patches(y, size)
    dc = patches.mean(-1, keepdim=True)
    estimates = mmse_patches(patches - dc, prior, float(sigma) ** 2, max_elements) + dc
    return like_input(average_patches(estimates, tuple(y.shape), size), noisy)
