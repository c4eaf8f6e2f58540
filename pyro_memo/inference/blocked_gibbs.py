"""Blocked Gibbs sampling of the truncated DP mixture (Blei & Jordan 2006, §4; Ishwaran & James 2001)."""

import math
import time

import torch

from ..allocation import DPSticks, log_stick_weights
from ..checks import as_positive_int
from .gibbs import GibbsResult, GibbsSampler, hard_summary
from .initialization import initial_responsibilities


class BlockedGibbs(GibbsSampler):
    """Gibbs sampling of the truncated stick-breaking DP mixture with every block drawn
    jointly: component parameters :math:`\\phi_k \\sim p(\\phi_k \\mid x, z)` (the conjugate
    posterior, ``family.sample_posterior``), sticks
    :math:`v_k \\sim \\mathrm{Beta}(1 + N_k, \\alpha + \\sum_{\\ell>k} N_\\ell)` with
    :math:`v_T = 1`, and all assignments at once,
    :math:`p(z_n = k) \\propto w_k F(x_n \\mid \\phi_k)`.

    :param family: a :class:`~pyro_memo.ConjugateFamily`.
    :param int T: truncation level of the model.
    :param float alpha: DP concentration.
    :param int sweeps: Gibbs sweeps.
    :param int burn_in: sweeps discarded before samples are kept (default ``sweeps // 2``).
    :param int thin: keep every ``thin``-th sweep after burn-in.
    :param int init_K: start from k-means++ with this many clusters (1: all in one).
    :param int seed: seeds every draw (torch's generator is forked, so the caller's is untouched).
    """

    def __init__(self, family, T=20, alpha=1.0, sweeps=100, burn_in=None, thin=1, init_K=1, seed=0):
        T = as_positive_int(T, "T")
        super().__init__(family, alpha, sweeps, burn_in, thin, init_K, seed)
        if self.init_K > T:
            raise ValueError(f"init_K must be at most T; got T = {T}, init_K = {init_K}")
        self.T = T
        self.sticks = DPSticks(alpha, "direct")

    def log_likelihoods(self, x, params):
        """:math:`\\log F(x_n \\mid \\phi_k)`: ``(N, T)``."""
        return self.family.log_density(x.unsqueeze(1), {k: v.unsqueeze(0) for k, v in params.items()})

    def _state_predictive(self, log_w, params):
        def log_predictive(x):
            x = self.family.check_data(x)
            return torch.logsumexp(self.log_likelihoods(x, params) + log_w, -1)

        return log_predictive

    def _draw_globals(self, summary):
        post = self.family.posterior(summary.counts, summary.stats)
        params = self.family.sample_posterior(post)
        eta1, eta0 = self.sticks.posterior(summary.counts)
        v = torch.distributions.Beta(eta1[:-1], eta0[:-1], validate_args=False).sample()
        v = torch.cat([v.clamp(1e-300, 1 - 1e-16), v.new_ones(1)])
        return params, v

    def fit(self, x, callback=None):
        """Run the sampler on ``(N, D)`` data.

        :param callback: optional ``callback(sweep, labels)`` after every sweep; returning ``True``
            stops the sampler.
        :rtype: GibbsResult
        """
        fam = self.family
        x = fam.check_data(x)
        if self.init_K == 1:
            labels = torch.zeros(x.shape[0], dtype=torch.long, device=x.device)
        else:
            labels = initial_responsibilities(x, self.init_K, "kmeans++", self.seed).argmax(-1)
        result = GibbsResult(labels.cpu())
        start = time.perf_counter()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(self.seed))
            for sweep in range(self.sweeps):
                sweep_start = time.perf_counter()
                params, v = self._draw_globals(hard_summary(fam, x, labels, self.T))
                log_w = log_stick_weights(v)
                log_joint = self.log_likelihoods(x, params) + log_w
                gumbel = -torch.log(-torch.log(torch.rand_like(log_joint).clamp_min(1e-300)))
                labels = (log_joint + gumbel).argmax(-1)
                result.sweep_seconds.append(time.perf_counter() - sweep_start)
                chosen = log_joint.gather(1, labels[:, None]).sum()
                stick_prior = (math.log(self.alpha) + (self.alpha - 1) * torch.log1p(-v[:-1])).sum()
                result.log_joint_trace.append(float(chosen + fam.log_prior_density(params).sum() + stick_prior))
                result.num_clusters.append(int(torch.unique(labels).numel()))
                if self.keeps(sweep):
                    result.samples.append(self._state_predictive(log_w, params))
                if callback is not None and callback(sweep, labels) is True:
                    break
        result.labels = labels.cpu()
        result.seconds = time.perf_counter() - start
        return result

