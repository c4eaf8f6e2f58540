"""Posterior predictive densities of DP mixtures from summaries (Blei & Jordan 2006, §3, §4).

For a conjugate family, the predictive density of a new item under a component whose
posterior came from summary :math:`S_k` is the ratio of marginal likelihoods

.. math:: p(x^* \\mid S_k) = \\exp\\{\\log p(S_k + s(x^*)) - \\log p(S_k)\\}

(``family.log_marginal``), which equals :math:`E_{q(\\phi_k)}[p(x^* \\mid \\phi_k)]` when
:math:`q(\\phi_k)` is the conjugate posterior for :math:`S_k`. Each family computes it
(``family.log_predictive``): by that ratio by default, in closed form (a multivariate Student-t)
for the full-covariance Gaussians, whose ratio would factorise an ill-conditioned scale matrix.
A mixture predictive is the weighted log-sum-exp of these over components, plus an empty
(prior) component for the mass not given to any occupied one.
"""

import math

import torch

from ..summaries import Summary


def log_predictive_components(family, summary, x):
    """:math:`\\log p(x_n \\mid S_k)` for all items and components: ``(n, K)``, the family's
    :meth:`~pyro_memo.ConjugateFamily.log_predictive` computed in chunks of at most 512 rows
    whose ``(rows, K, ...)`` statistics stay near 4M numbers."""
    K = summary.K
    per_item = max(1, sum(v[:1].numel() for v in summary.stats.values()))
    rows = max(1, min(512, 2**22 // (K * per_item)))
    return torch.cat([family.log_predictive(x[lo:lo + rows], summary.counts, summary.stats)
                      for lo in range(0, x.shape[0], rows)])


def rounding_slack(weights):
    """How far past one the sum of ``weights`` that sum to one may round: 1e-9, or in a low precision
    a few units in the last place per weight (50 float32 weights of a fit summed to ``1 + 1.2e-7``)."""
    return max(1e-9, 4 * len(weights) * torch.finfo(weights.dtype).eps)


def log_predictive(family, summary, weights, x):
    """Log predictive density of each row of ``x`` under a mixture.

    :param family: the :class:`~pyro_memo.ConjugateFamily` (with its prior).
    :param Summary summary: the components' summaries (``K`` of them).
    :param torch.Tensor weights: ``(K,)`` mixture weights summing to at most 1 (to rounding in their
        dtype, ``rounding_slack``); the rest,
        ``1 - sum(weights)``, goes to a new component at the prior.
    :param torch.Tensor x: ``(n, D)`` items (checked by the family).
    :returns: ``(n,)`` tensor of :math:`\\log p(x_n \\mid \\text{data})`.
    """
    x = family.check_data(x)
    weights = torch.as_tensor(weights, dtype=x.dtype, device=x.device)
    if weights.shape != (summary.K,):
        raise ValueError(f"weights must have shape ({summary.K},); got {tuple(weights.shape)}")
    if bool((weights < 0).any()) or float(weights.sum()) > 1 + rounding_slack(weights):
        raise ValueError("weights must be non-negative and sum to at most 1")
    rest = max(0.0, 1.0 - float(weights.sum()))
    terms = log_predictive_components(family, summary, x) + torch.log(weights)
    if rest > 1e-12:
        empty = Summary.zeros(family, 1)
        prior_term = log_predictive_components(family, empty, x) + math.log(rest)
        terms = torch.cat([terms, prior_term], -1)
    return torch.logsumexp(terms, -1)


def vb_log_predictive(posterior, summary, x):
    """Paper 003's VB predictive: :math:`\\sum_k E_q[w_k]\\,E_{q(\\phi_k)}[p(x^* \\mid \\phi_k)]`,
    the remaining stick mass :math:`E_q[\\prod_{k \\le K}(1 - v_k)]` on a prior component.

    :param posterior: a fitted :class:`~pyro_memo.DPMixturePosterior`.
    :param Summary summary: the whole-data summary its component posteriors came from
        (``FitResult.summary``).
    :param torch.Tensor x: ``(n, D)`` held-out items.
    :returns: ``(n,)`` log predictive densities.
    """
    return log_predictive(posterior.family, summary, posterior.expected_weights(), x)
