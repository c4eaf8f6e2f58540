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

from ..checks import as_positive_int
from ..engine.threads import ThreadPolicy
from ..families._sparse import drop_underflow
from .images import check_sigma
from .patches import PATCH, as_image_tensor, coverage, fold_strips, like_input
from .prior import MAX_ELEMENTS, restore_patches


def mmse_patches(y, prior, noise_var, max_elements=MAX_ELEMENTS, policy=None):
    """:math:`E[x_i \\mid y_i]` of zero-mean noisy patches ``y`` ``(n, D)`` under ``prior`` with white
    noise of variance ``noise_var`` (the module's equation; :math:`p(k \\mid y)` by log-sum-exp), by
    ``restore_patches()`` in chunks of at most ``max_elements`` numbers,
    each a step of the entered thread ``policy`` when given."""
    return restore_patches(y, prior, noise_var, _posterior_probabilities, max_elements, policy)


def _posterior_probabilities(log_joint):
    """:math:`p(k \\mid y_i)` ``(n, K)``: the softmax of each row of log joints, probabilities below
    :math:`\\sqrt{\\text{tiny}}` set to zero (:func:`~pyro_memo.families._sparse.drop_underflow`), so
    that ``restore_patches()`` skips their solves: each would move an
    estimate by less than :math:`10^{-150}` of a solve."""
    return drop_underflow(torch.softmax(log_joint, dim=-1))


def mmse_denoise(noisy, prior, sigma, size=PATCH, max_elements=MAX_ELEMENTS, threads=None):
    """Denoise the grayscale image ``noisy`` (noise standard deviation ``sigma``, on the image's
    scale) by the averaged patch posterior means of the module docstring.

    :param noisy: ``(H, W)`` array or tensor (a tensor gives a tensor on the prior's device).
    :param prior: a :class:`~pyro_memo.denoising.GaussianMixturePrior` of ``size**2``-pixel patches.
    :param int size: the patch side in pixels (default :data:`~pyro_memo.denoising.PATCH`, 8).
    :param int max_elements: the most numbers of the patches' packed products and log joints held at once
        (a memory bound): the patches are restored in chunks of rows that fit (default
        ``MAX_ELEMENTS``, 2**20), and formed a strip of patch rows at a time holding at most as many pixels
        (one row of patches at least).
    :param threads: the most intra-op threads; each chunk of patches runs under the fits' thread
        policy (:class:`~pyro_memo.engine.threads.ThreadPolicy`: one thread timed against this many,
        the faster kept, so a busy machine does not slow it down); ``None``: torch's setting; ``1``: one
        thread, nothing timed. Torch's setting is restored afterwards.
    :returns: the denoised image, unclipped.
    """
    check_sigma(sigma)
    y = as_image_tensor(noisy, prior, size)
    with ThreadPolicy(threads) as policy:
        def restore(patches):
            dc = patches.mean(-1, keepdim=True)
            return mmse_patches(patches - dc, prior, float(sigma) ** 2, max_elements, policy) + dc

        total = fold_strips(y, restore, size, as_positive_int(max_elements, "max_elements"))
    return like_input(total / coverage(tuple(y.shape), size, y), noisy)
