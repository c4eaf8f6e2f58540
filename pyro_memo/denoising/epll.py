"""Expected patch log likelihood (EPLL) restoration by half-quadratic splitting (Zoran & Weiss 2011, §3).

EPLL denoising maximises :math:`-\\tfrac\\lambda2 \\lVert x - y\\rVert^2 + \\sum_i \\log p(P_i x)` over
the image :math:`x` (eq. 2 with :math:`A = I`). Half-quadratic splitting adds auxiliary patches
:math:`z_i` and minimises, for an increasing schedule of :math:`\\beta`,

.. math::  \\tfrac\\lambda2 \\lVert x - y\\rVert^2
           + \\sum_i \\tfrac\\beta2 \\lVert P_i x - z_i\\rVert^2 - \\log p(z_i)      \\qquad \\text{(eq. 3)}

alternately in :math:`z` and :math:`x`:

* :math:`z`-step: each :math:`z_i` is the approximate MAP patch given :math:`P_i x` observed with
  noise variance :math:`1/\\beta`: the most probable component
  :math:`k^* = \\arg\\max_k w_k N(P_i x; 0, \\Sigma_k + \\beta^{-1} I)` and its Wiener filter
  :math:`z_i = \\Sigma_{k^*} (\\Sigma_{k^*} + \\beta^{-1} I)^{-1} P_i x` (on the zero-mean patch, DC added back);
  with ``z_step="mmse"`` instead the posterior mean :math:`E[z_i \\mid P_i x]` under noise variance
  :math:`1/\\beta`, the responsibility-weighted Wiener filters of :mod:`~pyro_memo.denoising.mmse`
  (a variant: it keeps the splitting but averages over components rather than choosing one);
* :math:`x`-step (eq. 4 with :math:`A = I`), pixel by pixel since :math:`\\sum_i P_i^T P_i` is diagonal:
  :math:`x_j = (\\lambda_j y_j + \\beta (\\sum_i P_i^T z_i)_j) / (\\lambda_j + \\beta c_j)`, with :math:`c_j`
  the number of patches covering pixel :math:`j`.

Constants. The schedule is the paper's, :math:`\\beta = \\sigma^{-2} (1, 4, 8, 16, 32, 64)`. The data weight
balances the prior: the likelihood of the image is :math:`N(y; x, \\sigma^2 I)`, i.e. :math:`1/\\sigma^2` per
pixel, but the prior term counts pixel :math:`j` once for each of the :math:`c_j` patches that cover it, so the
data term counts it :math:`c_j` times too: :math:`\\lambda_j = \\lambda c_j / D` with :math:`\\lambda = D / \\sigma^2`
and :math:`D` the number of pixels of a patch. Inside the image :math:`c_j = D` and this is the setting of
Zoran & Weiss's code; they keep :math:`\\lambda` at the borders too, where fewer patches cover a pixel, which
weights the noisy pixel up to :math:`D` times more than the prior there: on ``camera`` at :math:`\\sigma = 25`
their rule left the outer 7 pixels 1.7 dB noisier than the single pass, the whole image 0.06 dB below it; with
:math:`\\lambda_j` the borders are restored as the interior and EPLL scores 0.06-0.08 dB above the single pass
(``benchmarks/results/bench_epll_borders.txt``). The objective is then
:math:`\\sum_i \\tfrac{\\lambda}{2D} \\lVert P_i x - P_i y\\rVert^2 - \\log p(P_i x)`: each patch its own data term.
"""

import math
from collections.abc import Iterable

import torch

from ..checks import as_positive_int
from ..engine.threads import ThreadPolicy
from .images import check_sigma
from .mmse import mmse_patches
from .patches import PATCH, as_image_tensor, coverage, fold_strips, like_input
from .prior import MAX_ELEMENTS, restore_patches

#: the paper's schedule of :math:`\beta` in units of :math:`\sigma^{-2}`
BETAS = (1.0, 4.0, 8.0, 16.0, 32.0, 64.0)
#: the z-steps: each patch's most probable component (the paper's) or its posterior mean
Z_STEPS = ("map", "mmse")


def map_patches(y, prior, noise_var, max_elements=MAX_ELEMENTS, policy=None):
    """The :math:`z`-step: each zero-mean patch of ``y`` ``(n, D)`` Wiener-filtered toward its most
    probable component under noise of variance ``noise_var`` (module docstring), by
    ``restore_patches()`` in chunks, each a step of the entered thread
    ``policy`` when given."""
    return restore_patches(y, prior, noise_var, _most_probable, max_elements, policy)


def _weight(value, name, zero=False):
    """``value`` as a float if it is finite and positive (or zero, with ``zero``: :math:`\\lambda = 0` drops
    the data term; a :math:`\\beta` of 0 has no splitting), else :class:`ValueError` naming ``name``."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not (math.isfinite(number) and (number > 0 or zero and number == 0)):
        kind = "non-negative" if zero else "positive"
        raise ValueError(f"{name} must be a {kind} finite number; got {value!r}")
    return number


def _schedule(betas):
    """``betas`` (a non-empty sequence of positive finite numbers) as a list of floats, else
    :class:`ValueError`: a single number or a string is not a schedule (a string's characters would pass
    as numbers)."""
    if isinstance(betas, (str, bytes)) or not isinstance(betas, Iterable) or getattr(betas, "ndim", 1) == 0:
        raise ValueError(f"betas must be a sequence of positive numbers; got {betas!r}")
    betas = [_weight(b, "each of betas") for b in betas]
    if not betas:
        raise ValueError("betas is empty: give at least one beta")
    return betas


def _most_probable(log_joint):
    """One-hot ``(n, K)`` weights of each row's largest log joint."""
    return torch.zeros_like(log_joint).scatter_(1, log_joint.argmax(-1, keepdim=True), 1.0)


def epll_denoise(noisy, prior, sigma, betas=None, lam=None, size=PATCH, max_elements=MAX_ELEMENTS, z_step="map",
                 threads=None):
    """Denoise ``noisy`` (noise standard deviation ``sigma``) by EPLL half-quadratic splitting
    (module docstring), starting from :math:`x = y`.

    :param noisy: ``(H, W)`` array or tensor (a tensor gives a tensor on the prior's device).
    :param prior: a :class:`~pyro_memo.denoising.GaussianMixturePrior` of ``size**2``-pixel patches.
    :param betas: the :math:`\\beta` schedule in absolute units (inverse pixel variances, as
        :math:`1/\\sigma^2`); default :math:`\\sigma^{-2}` times :data:`BETAS`, which is in units of
        :math:`\\sigma^{-2}` (pass ``[b / sigma**2 for b in BETAS]``, not ``BETAS`` itself).
    :param float lam: the data weight :math:`\\lambda` of a pixel that all :math:`D` patches around it cover
        (inside the image; a pixel that :math:`c` patches cover weighs :math:`\\lambda c / D`); default
        :math:`D / \\sigma^2` (module docstring).
    :param str z_step: ``"map"`` (Zoran & Weiss's most probable component) or ``"mmse"`` (each patch's
        posterior mean; module docstring).
    :param int size: the patch side in pixels (default :data:`~pyro_memo.denoising.PATCH`, 8).
    :param int max_elements: the most numbers of the patches' packed products and log joints held at once
        (a memory bound): the patches are restored in chunks of rows that fit (default
        ``MAX_ELEMENTS``, 2**20), and formed a strip of patch rows at a time holding at most as many pixels
        (one row of patches at least).
    :param threads: the most intra-op threads, under one thread policy for all the z-steps' chunks of
        patches (as :func:`~pyro_memo.denoising.mmse_denoise`).
    :returns: the restored image, unclipped.
    """
    check_sigma(sigma)
    if z_step not in Z_STEPS:
        raise ValueError(f"z_step must be one of {', '.join(map(repr, Z_STEPS))}, not {z_step!r}")
    restore = map_patches if z_step == "map" else mmse_patches
    var = float(sigma) ** 2
    y = as_image_tensor(noisy, prior, size)
    betas = [b / var for b in BETAS] if betas is None else _schedule(betas)
    lam = size * size / var if lam is None else _weight(lam, "lam", zero=True)
    count = coverage(tuple(y.shape), size, y)
    lam_j = lam * count / (size * size)  # each pixel's data weight, counted as often as the prior counts it
    max_elements = as_positive_int(max_elements, "max_elements")
    x = y
    with ThreadPolicy(threads) as policy:
        for beta in betas:
            def z_step(patches, beta=beta):
                dc = patches.mean(-1, keepdim=True)
                return restore(patches - dc, prior, 1.0 / beta, max_elements, policy) + dc

            x = (lam_j * y + beta * fold_strips(x, z_step, size, max_elements)) / (lam_j + beta * count)
    return like_input(x, noisy)
