"""A Gaussian-mixture prior over zero-mean image patches, :math:`p(x) = \\sum_k w_k N(x; 0, \\Sigma_k)`
(Zoran & Weiss 2011, §2; Hughes & Sudderth 2013, §4.4), built from a fitted DP mixture or from
scikit-learn's ``GaussianMixture``, and the Gaussian algebra of a noisy patch under it.

For a patch observed with white noise of variance :math:`s`, :math:`y = x + n`,
:math:`n \\sim N(0, sI)`, each component gives (Bishop 2006, eqs. 2.115-2.116)

.. math::  p(y \\mid k) = N(y; 0, \\Sigma_k + sI), \\qquad
           E[x \\mid y, k] = \\Sigma_k (\\Sigma_k + sI)^{-1} y = y - s (\\Sigma_k + sI)^{-1} y.
"""

import contextlib
import math
import numbers

import numpy as np
import torch

from ..checks import as_positive_int
from ..families._special import logdet_from_cholesky, safe_cholesky
from ..families.base import check_dtype_device, packed_outer, packed_quadratic_weights

#: components with a smaller (normalised) weight are dropped from a fitted DP mixture
MIN_WEIGHT = 1e-5
#: the largest number of floats of a chunk of patches' packed outer products and log joints held at
#: once: 2**20 (8 MB in float64, 492 patches of 8 x 8 pixels at K = 50). On one CPU thread 2**20 and
#: 2**21 were the fastest of 2**18 to 2**24 (within 3%); 2**24 took twice as long
#: (benchmarks/results/bench_denoise_speed.txt)
MAX_ELEMENTS = 2**20


class GaussianMixturePrior:
    """Mixture weights ``(K,)`` (normalised to sum to one) and zero-mean covariances ``(K, D, D)``.

    :param weights: nonnegative weights, array or tensor.
    :param covariances: symmetric positive-definite covariances, array or tensor.
    :param dtype: torch dtype of the math (float64 by default).
    :param device: torch device; :meth:`to` moves the prior.
    """

    def __init__(self, weights, covariances, dtype=torch.float64, device=None):
        check_dtype_device(dtype, device)
        w = _real_tensor(weights, "weights").to(dtype=dtype, device=device)
        cov = _real_tensor(covariances, "covariances").to(dtype=dtype, device=device)
        if w.dim() != 1 or cov.dim() != 3 or cov.shape[0] != w.shape[0] or cov.shape[1] != cov.shape[2]:
            raise ValueError(f"expected weights (K,) and covariances (K, D, D); got {tuple(w.shape)} and "
                             f"{tuple(cov.shape)}")
        if w.numel() == 0 or not bool((torch.isfinite(w) & (w >= 0)).all()) or not float(w.sum()) > 0:
            raise ValueError("the mixture weights must be nonnegative and finite with a positive sum")
        if not bool(torch.isfinite(cov).all()):
            raise ValueError("the covariances have NaN or inf entries")
        self.weights = w / w.sum()
        self.covariances = 0.5 * (cov + cov.transpose(-1, -2))

    @property
    def K(self):
        return self.weights.shape[0]

    @property
    def dim(self):
        return self.covariances.shape[-1]

    @property
    def device(self):
        return self.weights.device

    def to(self, device=None, dtype=None):
        """The prior on ``device`` / in ``dtype``."""
        return GaussianMixturePrior(self.weights, self.covariances, dtype or self.weights.dtype, device)

    @classmethod
    def from_posterior(cls, posterior, min_weight=MIN_WEIGHT):
        """The plug-in prior of a DP mixture fitted with the zero-mean Gaussian family (``zm-gauss``):
        weights :math:`E_q[w_k]` (Hughes & Sudderth 2013, eq. 3; renormalised over the components kept)
        and covariances :math:`E_q[\\Lambda_k]^{-1} = B_k / \\nu_k` (the family's point estimates),
        components whose normalised weight is below ``min_weight`` dropped.

        :param posterior: a :class:`~pyro_memo.DPMixturePosterior`, or a model
            :func:`~pyro_memo.load_model` returned (anything with a ``posterior`` attribute).
        """
        posterior = getattr(posterior, "posterior", posterior)
        family = getattr(posterior, "family", None)
        if family is None or not hasattr(posterior, "expected_weights"):
            raise TypeError(f"from_posterior needs a fitted DP mixture's posterior (or a model from load_model); got "
                            f"{type(posterior).__name__} (a scikit-learn GaussianMixture: from_sklearn)")
        if family.name != "zm-gauss":
            raise ValueError(f"a patch prior needs a DP mixture of zero-mean Gaussians (--family zm-gauss); "
                             f"this model's family is {family.name}")
        _check_min_weight(min_weight)
        weights = posterior.expected_weights()
        weights = weights / weights.sum()
        keep = weights >= min_weight
        if not bool(keep.any()):
            raise ValueError(f"min_weight={min_weight!r} drops every component: the largest weight is "
                             f"{float(weights.max()):.4g}; give a smaller min_weight")
        covariances = family.point_estimates(posterior.component)["covariances"]
        return cls(weights[keep], covariances[keep], weights.dtype, weights.device)

    @classmethod
    def from_sklearn(cls, gmm, dtype=torch.float64, device=None):
        """The prior of a fitted :class:`sklearn.mixture.GaussianMixture` with ``covariance_type="full"``:
        its ``weights_`` and ``covariances_``; its ``means_`` (which EM learns, though the patches
        have zero mean) are ignored."""
        if not hasattr(gmm, "covariance_type"):
            raise TypeError(f"from_sklearn needs a fitted sklearn.mixture.GaussianMixture; got {type(gmm).__name__}")
        if gmm.covariance_type != "full":
            raise ValueError("a GaussianMixture prior needs covariance_type='full'")
        if not hasattr(gmm, "weights_"):
            raise ValueError("the GaussianMixture is not fitted: call its fit(patches) first")
        return cls(gmm.weights_, gmm.covariances_, dtype, device)

    def noisy_terms(self, noise_var):
        """``(precisions, log_norms)`` of the noisy marginals :math:`N(y; 0, \\Sigma_k + sI)`:
        :math:`(\\Sigma_k + sI)^{-1}` ``(K, D, D)`` and
        :math:`\\log w_k - \\tfrac12 \\log|\\Sigma_k + sI| - \\tfrac D2 \\log 2\\pi` ``(K,)``, by Cholesky."""
        eye = torch.eye(self.dim, dtype=self.covariances.dtype, device=self.device)
        chol = safe_cholesky(self.covariances + noise_var * eye, "noisy patch covariance")
        log_norms = torch.log(self.weights) - 0.5 * logdet_from_cholesky(chol) - 0.5 * self.dim * math.log(2 * math.pi)
        return torch.cholesky_inverse(chol), log_norms


def _check_min_weight(min_weight):
    """Raise :class:`ValueError` unless ``min_weight`` is a number in ``[0, 1)``: a weight of 1 or more (or
    NaN) drops every component, which the prior would report as bad weights."""
    if isinstance(min_weight, bool) or not isinstance(min_weight, numbers.Real) or not 0 <= min_weight < 1:
        raise ValueError(f"min_weight must be a number in [0, 1); got {min_weight!r}")


def _real_tensor(value, name):
    """``value`` (an array, nested list or tensor of real numbers) as a tensor, or :class:`ValueError` naming
    ``name``: strings fail in torch, and a complex value would lose its imaginary part in the cast."""
    try:
        out = value if torch.is_tensor(value) else torch.as_tensor(np.asarray(value))
    except (TypeError, ValueError, RuntimeError):
        raise ValueError(f"the mixture {name} must be real numbers; got {type(value).__name__}") from None
    if out.dtype == torch.bool or out.is_complex():
        raise ValueError(f"the mixture {name} must be real numbers; got dtype {out.dtype}")
    return out


def component_scores(y, precisions, log_norms):
    """``(log_joint, solves)`` of zero-mean patches ``y`` ``(n, D)``: :math:`\\log w_k N(y_i; 0, \\Sigma_k + sI)`
    ``(n, K)`` and :math:`(\\Sigma_k + sI)^{-1} y_i` ``(n, K, D)``, from :meth:`GaussianMixturePrior.noisy_terms`:
    every component's solve, a reference (the denoisers need one solve per patch,
    ``restore_patches()``)."""
    solves = torch.einsum("nd,kde->nke", y, precisions)
    return log_norms - 0.5 * (solves * y[:, None, :]).sum(-1), solves


def restore_patches(y, prior, noise_var, pick, max_elements=MAX_ELEMENTS, policy=None):
    """:math:`y_i - s \\sum_k r_{ik} (\\Sigma_k + sI)^{-1} y_i` for zero-mean noisy patches ``y`` ``(n, D)``
    under noise of variance :math:`s`, i.e. :math:`\\sum_k r_{ik} E[x_i \\mid y_i, k]`, with the weights
    :math:`r_{ik}` that ``pick`` makes of the log joints :math:`\\log w_k N(y_i; 0, \\Sigma_k + sI)` ``(n, K)``
    (the posterior probabilities of the components, or the most probable one).

    The log joints are one matrix product of the patches' packed outer products with the packed
    precisions (:func:`~pyro_memo.families.base.packed_quadratic_weights`: half the multiply-adds of
    every component's solve, and no ``(n, K, D)`` intermediate); the solves are then formed only where
    :math:`r_{ik} > 0`, one product per component over its patches (for the most probable component,
    one solve per patch). Formed in chunks of rows holding at most ``max_elements`` numbers of
    packed products. The packed form rounds relative to :math:`\\sum_{ij} |y_i P_{ij} y_j|`, which suits
    float64 (the prior's default); a prior in another dtype scores by every component's solve
    (:func:`component_scores`). Each chunk is one step of ``policy``, an entered
    :class:`~pyro_memo.engine.threads.ThreadPolicy`, when given.

    :raises ValueError: unless ``max_elements`` is a positive whole number.
    """
    max_elements = as_positive_int(max_elements, "max_elements")
    precisions, log_norms = prior.noisy_terms(noise_var)
    packed = precisions.dtype == torch.float64
    quadratic = packed_quadratic_weights(precisions) if packed else None
    width = quadratic.shape[0] + prior.K if packed else prior.K * prior.dim
    step = contextlib.nullcontext if policy is None else policy.step
    out = torch.empty_like(y)
    for rows in row_chunks(y.shape[0], width, max_elements):
        with step():
            patches = y[rows]
            log_joint = (torch.addmm(log_norms, packed_outer(patches), quadratic, alpha=-0.5) if packed
                         else component_scores(patches, precisions, log_norms)[0])
            out[rows] = patches - noise_var * _weighted_solves(patches, precisions, pick(log_joint))
    return out


def _weighted_solves(y, precisions, weights):
    """:math:`\\sum_k r_{ik} (\\Sigma_k + sI)^{-1} y_i` ``(n, D)`` for ``weights`` :math:`r` ``(n, K)``: the
    components that weigh most patches in one product of the weighted patches ``(n, K' D)`` with their
    precisions stacked ``(K' D, D)``, each other component in one product over the patches it weighs
    (the precisions are symmetric)."""
    counts = (weights > 0).sum(0)
    common = (2 * counts > len(y)).nonzero().flatten()
    out = (weights[:, common, None] * y[:, None, :]).flatten(1) @ precisions[common].flatten(0, 1)
    for k in ((counts > 0) & (2 * counts <= len(y))).nonzero().flatten().tolist():
        rows = weights[:, k].nonzero().flatten()
        out.index_add_(0, rows, (weights[rows, k, None] * y[rows]) @ precisions[k])
    return out


def row_chunks(n, width, max_elements=MAX_ELEMENTS):
    """Slices of ``n`` rows such that a chunk's ``(rows, width)`` intermediates hold at most
    ``max_elements`` numbers."""
    step = max(1, int(max_elements) // max(width, 1))
    return [slice(i, min(i + step, n)) for i in range(0, n, step)]
