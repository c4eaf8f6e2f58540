"""Stochastic gradient ascent for the DP mixture (Lim & Jiang, §3–4): SGA, SGA+M, SGA+F."""

import time
from dataclasses import dataclass, field

import numpy as np
import torch

from ..allocation import log_stick_weights
from ..checks import as_positive_float, as_positive_int
from .initialization import initial_responsibilities

VARIANTS = ("sga", "sga+m", "sga+f")


@dataclass
class SGAResult:
    """What :class:`SGA` returns.

    :ivar torch.Tensor means: ``(K, D)`` point estimates :math:`E[\\mu_k]` of the kept components.
    :ivar torch.Tensor sticks: ``(K,)`` :math:`E[v_k]`, in decreasing order when re-ordering.
    :ivar torch.Tensor variance: ``(D,)`` the fixed likelihood variance :math:`\\sigma^2`.
    :ivar torch.Tensor labels: ``(N,)`` MAP assignments of all items (eq. 19) at the end.
    :ivar list num_components: components left after each iteration's pruning.
    :ivar list iteration_seconds: wall time of each iteration.
    :ivar float seconds: total wall time.
    """

    means: torch.Tensor
    sticks: torch.Tensor
    variance: torch.Tensor
    labels: torch.Tensor = None
    num_components: list = field(default_factory=list)
    iteration_seconds: list = field(default_factory=list)
    seconds: float = 0.0


class SGA:
    """Paper 002's DP mixture of diagonal Gaussians with a fixed variance
    :math:`\\sigma^2` learned by stochastic gradient ascent on point estimates.

    Each iteration draws a random minibatch of ``batch_size`` items, assigns each to its
    MAP component (eq. 19) and moves the component means :math:`E[\\mu_k]` and sticks
    :math:`E[v_k]` along the minibatch-averaged gradients of their variational log
    posteriors (eq. 14, 16, 18):

    * ``"sga"``: a constant step :math:`\\eta` (eq. 6);
    * ``"sga+m"``: momentum, :math:`\\gamma \\leftarrow \\beta\\gamma + \\eta g` (eq. 8);
    * ``"sga+f"``: the step divided by the empirical Fisher information, the minibatch mean
      of the squared per-item scores (eq. 9–11). The prior's curvature
      (:math:`\\lambda_0/\\sigma^2` for the means, :math:`(a_0-1)/(1-v)^2` for the sticks)
      is added to it, so a component with no items in the minibatch takes a finite step
      back towards its prior instead of dividing by zero. For the means this step is
      :math:`\\eta(\\bar x_k - E[\\mu_k])` up to the prior: a natural-gradient step.

    After every iteration components with :math:`E[v_k] <` ``threshold`` are pruned and
    (``reorder``) the rest sorted by :math:`E[v_k]` (§4.5). Initialisation (Algorithm 1):
    k-means++ means, their hard assignments, sticks from the assignment counts; the
    variance :math:`\\sigma^2` is the pooled within-cluster variance of that clustering.

    :param int K: initial truncation level.
    :param str variant: ``"sga"``, ``"sga+m"`` or ``"sga+f"``.
    :param float step: :math:`\\eta` (the paper uses 0.1; 1e-3 to 1e-1).
    :param float momentum: :math:`\\beta` of SGA+M.
    :param float threshold: pruning threshold THR on :math:`E[v_k]`.
    :param float alpha: :math:`a_0` of the stick prior Beta(1, a0).
    :param float prior_strength: :math:`\\lambda_0` of the mean prior :math:`N(m_0, \\sigma^2/\\lambda_0)`.
    :param int iterations: minibatch iterations.
    :param int batch_size: items per minibatch.
    :param bool reorder: sort components by :math:`E[v_k]` after each iteration.
    :param int seed: seeds initialisation and minibatch draws.
    :ivar torch.Tensor variance_: the fixed variance :math:`\\sigma^2` of the last :meth:`fit`.
    """

    def __init__(self, K=50, variant="sga+f", step=0.1, momentum=0.9, threshold=1e-3, alpha=1.0,
                 prior_strength=1e-3, iterations=30, batch_size=300, reorder=True, seed=0):
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}; got '{variant}'")
        K, iterations, batch_size = (as_positive_int(v, name) for v, name in
                                     ((K, "K"), (iterations, "iterations"), (batch_size, "batch_size")))
        step, alpha, prior_strength = (as_positive_float(v, name) for v, name in
                                       ((step, "step"), (alpha, "alpha"), (prior_strength, "prior_strength")))
        if not 0 <= float(momentum) < 1:
            raise ValueError(f"momentum must lie in [0, 1); got {momentum!r}")
        if not 0 <= float(threshold) < 1:
            raise ValueError(f"threshold (the weight below which a component is pruned) must lie in [0, 1); got "
                             f"{threshold!r}")
        self.K, self.variant, self.step, self.momentum = K, variant, step, float(momentum)
        self.threshold, self.alpha, self.prior_strength = float(threshold), alpha, prior_strength
        self.iterations, self.batch_size, self.reorder, self.seed = iterations, batch_size, reorder, seed

    # ------------------------------------------------------------ the model
    #: :math:`\\log v_k + \\sum_{\\ell<k}\\log(1 - v_\\ell)` of the stick point estimates
    log_weights = staticmethod(log_stick_weights)

    def assign(self, x, means, v, variance):
        """MAP assignments (eq. 19): ``(N,)``."""
        quad = (((x.unsqueeze(1) - means) ** 2) / variance).sum(-1)
        return (self.log_weights(v) - 0.5 * quad).argmax(-1)

    def gradients(self, x, z, means, v, variance, m0):
        """Minibatch-mean gradients of the mean and stick log posteriors (eq. 14, 16, 18) and
        their empirical Fisher informations (eq. 11, plus the prior curvature)."""
        K = means.shape[0]
        onehot = torch.nn.functional.one_hot(z, K).to(x.dtype)  # (M, K)
        score_mu = onehot.unsqueeze(-1) * (x.unsqueeze(1) - means) / variance  # (M, K, D)
        prior_mu = self.prior_strength * (means - m0) / variance
        g_mu = score_mu.mean(0) - prior_mu
        f_mu = (score_mu ** 2).mean(0) + self.prior_strength / variance
        later = onehot.flip(-1).cumsum(-1).flip(-1) - onehot  # items assigned after k
        score_v = onehot / v - later / (1 - v)
        g_v = score_v.mean(0) - (self.alpha - 1) / (1 - v)
        f_v = (score_v ** 2).mean(0) + (self.alpha - 1) / (1 - v) ** 2
        return g_mu, f_mu, g_v, f_v

    # ---------------------------------------------------------------- fit
    def _initialise(self, x):
        resp = initial_responsibilities(x, self.K, "kmeans++", self.seed)
        counts = resp.sum(0)
        keep = counts > 0
        resp, counts = resp[:, keep], counts[keep]
        means = (resp.T @ x) / counts[:, None]
        resid = x - means[resp.argmax(-1)]
        variance = (resid ** 2).mean(0).clamp_min(1e-6 * float(x.var(0).mean()) + 1e-300)
        later = counts.flip(0).cumsum(0).flip(0) - counts
        v = (counts / (counts + later)).clamp(1e-6, 1 - 1e-6)
        return means, v, variance

    def fit(self, x, callback=None):
        """Run SGA on ``(N, D)`` data (a float tensor or array).

        :param callback: optional ``callback(iteration, means, sticks)`` after each iteration;
            returning ``True`` stops the fit.
        :rtype: SGAResult
        """
        x = torch.as_tensor(np.asarray(x) if not torch.is_tensor(x) else x, dtype=torch.float64)
        if x.dim() != 2 or not bool(torch.isfinite(x).all()):
            raise ValueError(f"SGA needs a finite (N, D) array; got shape {tuple(x.shape)}")
        rng = np.random.default_rng(self.seed)
        start = time.perf_counter()
        means, v, variance = self._initialise(x)
        self.variance_ = variance
        m0 = x.mean(0)
        vel_mu, vel_v = torch.zeros_like(means), torch.zeros_like(v)
        result = SGAResult(means, v, variance)
        for it in range(self.iterations):
            it_start = time.perf_counter()
            batch = x[torch.as_tensor(rng.choice(x.shape[0], min(self.batch_size, x.shape[0]), replace=False))]
            z = self.assign(batch, means, v, variance)
            g_mu, f_mu, g_v, f_v = self.gradients(batch, z, means, v, variance, m0)
            if self.variant == "sga+f":
                d_mu, d_v = self.step * g_mu / f_mu, self.step * g_v / (f_v + 1e-12)
            elif self.variant == "sga+m":
                vel_mu = self.momentum * vel_mu + self.step * g_mu
                vel_v = self.momentum * vel_v + self.step * g_v
                d_mu, d_v = vel_mu, vel_v
            else:
                d_mu, d_v = self.step * g_mu, self.step * g_v
            means = means + d_mu
            v = (v + d_v).clamp(1e-12, 1 - 1e-9)
            keep = v >= self.threshold
            if not bool(keep.any()):
                keep = v == v.max()
            means, v, vel_mu, vel_v = means[keep], v[keep], vel_mu[keep], vel_v[keep]
            if self.reorder:
                order = torch.argsort(v, descending=True)
                means, v, vel_mu, vel_v = means[order], v[order], vel_mu[order], vel_v[order]
            result.num_components.append(int(v.numel()))
            result.iteration_seconds.append(time.perf_counter() - it_start)
            if callback is not None and callback(it, means, v) is True:
                break
        result.means, result.sticks = means, v
        result.seconds = time.perf_counter() - start
        result.labels = torch.cat([self.assign(x[lo:lo + 20000], means, v, variance)
                                   for lo in range(0, x.shape[0], 20000)])
        return result
