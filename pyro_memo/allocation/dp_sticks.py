"""Dirichlet-process stick-breaking allocation with a truncated variational family.

Model (Hughes & Sudderth 2013, eq. 1): :math:`v_k \\sim Beta(1, \\alpha)`,
:math:`w_k = v_k \\prod_{\\ell<k} (1 - v_\\ell)`, :math:`z_n \\sim Cat(w)`.
Variational family: :math:`q(v_k) = Beta(\\eta_{k1}, \\eta_{k0})` for ``k <= K``.

* ``"nested"`` truncation (Hughes & Sudderth 2013, §2.1): :math:`q(z_n = k) = 0` for ``k > K``;
  sticks beyond ``K`` stay at their prior and add nothing to the ELBO, so a model
  with ``K`` components embeds exactly into one with more (births rely on this).
* ``"direct"`` truncation (Blei & Jordan 2006, §3): :math:`q(v_K = 1) = 1`, so the last
  component takes all remaining mass and has no stick of its own.

Optionally the concentration is latent (Blei & Jordan 2006, §5): :math:`\\alpha \\sim Gamma(s_1, s_2)`
(rate :math:`s_2`) with :math:`q(\\alpha) = Gamma(w_1, w_2)`. The terms of the ELBO that involve
:math:`\\alpha` are :math:`E[\\log p(\\alpha)] - E[\\log q(\\alpha)] + \\sum_{k \\in J} E[\\log p(v_k \\mid \\alpha)]`
with :math:`E[\\log p(v_k \\mid \\alpha)] = E[\\log \\alpha] + (E[\\alpha] - 1) E[\\log(1 - v_k)]`, where
:math:`J` are the sticks with a factor :math:`q(v_k)`: the first ``K`` under nested truncation, the
first ``K - 1`` under direct truncation (Blei & Jordan's ``T - 1``). Under nested truncation the
sticks beyond ``K`` keep their conditional prior :math:`q(v_k \\mid \\alpha) = p(v_k \\mid \\alpha)`, so
they add exactly nothing, as with a fixed :math:`\\alpha`. These terms are a Gamma log-density in
:math:`\\alpha` up to a constant, so the optimal factor is
:math:`w_1 = s_1 + |J|`, :math:`w_2 = s_2 - \\sum_{k \\in J} E[\\log(1 - v_k)]`; the stick update
uses :math:`E[\\alpha] = w_1 / w_2` in place of :math:`\\alpha` (its terms are linear in
:math:`\\alpha`), and the ELBO's stick terms become
:math:`-KL(q(v_k) \\| Beta(1, E[\\alpha])) - \\log E[\\alpha] + E[\\log \\alpha]` per stick, minus
:math:`KL(q(\\alpha) \\| Gamma(s_1, s_2))`.
"""

import math

import torch

from ..families._special import kl_beta, kl_gamma, lbeta
from .concentration import gamma_prior_pair

TRUNCATIONS = ("nested", "direct")
#: the longest Newton step in :math:`\log E[\alpha]` that :meth:`DPSticks.fit_posterior` takes
MAX_LOG_STEP = 1.0


def stick_breaking_weights(v):
    """Mixture weights from sticks; with ``T - 1`` sticks the last weight closes the stick.

    ``v`` has shape ``(..., T - 1)``; the result ``(..., T)`` sums to one (the
    convention of Pyro's DP-mixture tutorial, :math:`v_T = 1`).
    """
    one = torch.ones_like(v[..., :1])
    remaining = torch.cumprod(torch.cat([one, 1 - v], -1), -1)
    return torch.cat([v, one], -1) * remaining


def log_stick_weights(v):
    """:math:`\\log w_k = \\log v_k + \\sum_{\\ell<k}\\log(1 - v_\\ell)` for stick values ``v``
    of shape ``(K,)`` (point values, e.g. a Gibbs draw; ``v[-1] = 1`` closes the stick)."""
    log_rest = torch.cumsum(torch.log1p(-v[:-1]), 0)
    return torch.log(v) + torch.cat([v.new_zeros(1), log_rest])


class DPSticks:
    """Stick-breaking allocation of a DP mixture.

    :param float alpha: DP concentration :math:`\\alpha_0 > 0` (with ``alpha_prior``: ignored, the
        prior mean :math:`s_1 / s_2` is used where a fixed value is needed).
    :param str truncation: ``"nested"`` (default) or ``"direct"``.
    :param alpha_prior: ``(s1, s2)``: learn the concentration, :math:`\\alpha \\sim Gamma(s_1, s_2)`
        (shape, rate); ``None`` (default) keeps ``alpha`` fixed.
    """

    def __init__(self, alpha=1.0, truncation="nested", alpha_prior=None):
        if alpha_prior is not None:
            s1, s2 = alpha_prior = gamma_prior_pair(alpha_prior, "alpha_prior")
            alpha = s1 / s2
        try:
            number = None if isinstance(alpha, bool) else float(alpha)
        except (TypeError, ValueError, RuntimeError):
            number = None
        if number is None or not (number > 0 and math.isfinite(number)):
            # inf failed in the first global update as "posterior scale matrix B is not positive definite"
            raise ValueError(f"DP concentration alpha must be positive and finite; got {alpha!r}")
        alpha = number
        if truncation not in TRUNCATIONS:
            raise ValueError(f"truncation must be one of {TRUNCATIONS}; got '{truncation}'")
        self.alpha = alpha
        self.truncation = truncation
        self.alpha_prior = alpha_prior

    def __repr__(self):
        learnt = "" if self.alpha_prior is None else f", alpha_prior={self.alpha_prior}"
        return f"DPSticks(alpha={self.alpha}, truncation='{self.truncation}'{learnt})"

    def expected_alpha(self, q_alpha=None):
        """:math:`E_q[\\alpha] = w_1 / w_2` for ``q_alpha = (w1, w2)``, else the fixed ``alpha``."""
        return self.alpha if q_alpha is None else q_alpha[0] / q_alpha[1]

    def posterior(self, counts, q_alpha=None):
        """Closed-form stick update (Hughes & Sudderth 2013, eq. 10): :math:`\\eta_{k1} = 1 + \\hat N_k`,
        :math:`\\eta_{k0} = \\alpha + \\sum_{\\ell > k} \\hat N_\\ell`, with :math:`E_q[\\alpha]` for
        :math:`\\alpha` when ``q_alpha`` is given. Returns ``(eta1, eta0)``."""
        tail = counts.flip(0).cumsum(0).flip(0) - counts  # sum over l > k
        return 1.0 + counts, self.expected_alpha(q_alpha) + tail.clamp_min(0.0)

    def optimal_elbo(self, counts):
        """:meth:`elbo` of ``counts`` under the optimal sticks (:meth:`posterior`, a fixed :math:`\\alpha`):
        :math:`q(v_k)` is then the exact conditional, so the terms collapse to the Beta-Binomial marginal
        :math:`\\sum_k \\log B(1 + \\hat N_k, \\alpha + \\sum_{\\ell>k}\\hat N_\\ell) - \\log B(1, \\alpha)` over
        the components that own a stick."""
        eta1, eta0 = self.posterior(counts)
        terms = lbeta(eta1, eta0) + math.log(self.alpha)  # log B(1, alpha) = -log(alpha)
        return torch.where(self._has_stick(eta1.shape[0], eta1), terms, torch.zeros_like(terms)).sum()

    def alpha_posterior(self, eta1, eta0):
        """Optimal :math:`q(\\alpha) = Gamma(w_1, w_2)` given the sticks (Blei & Jordan 2006, §5):
        :math:`w_1 = s_1 + |J|`, :math:`w_2 = s_2 - \\sum_{k \\in J} E[\\log(1 - v_k)]`. Returns a
        ``(2,)`` tensor ``(w1, w2)``."""
        s1, s2 = self.alpha_prior
        has = self._has_stick(eta1.shape[0], eta1)
        e_log_1mv = torch.digamma(eta0) - torch.digamma(eta1 + eta0)
        w1 = s1 + has.sum().to(eta1.dtype)
        w2 = s2 - torch.where(has, e_log_1mv, torch.zeros_like(e_log_1mv)).sum()
        return torch.stack([w1, w2])

    def fit_posterior(self, counts, q_alpha=None, max_iter=100, tol=1e-12):
        """The joint optimum of ``q(v)`` and ``q(alpha)`` for fixed ``counts``: ``(eta1, eta0, q_alpha)``.

        Coordinate ascent (:meth:`posterior`, then :meth:`alpha_posterior`) is a fixed-point iteration in
        :math:`a = E[\\alpha]`: the sticks given :math:`a` have :math:`\\eta_{k0} = a + T_k`,
        :math:`T_k = \\sum_{\\ell>k}\\hat N_\\ell`, and then :math:`w_2 = s_2 + S(a)` with
        :math:`S(a) = \\sum_{k \\in J} \\psi(a + T_k + 1 + \\hat N_k) - \\psi(a + T_k)`, so its fixed points are
        the roots of :math:`F(a) = a (s_2 + S(a)) - (s_1 + |J|)`. Each term
        :math:`a (\\psi(a + T + n) - \\psi(a + T))` is nondecreasing in :math:`a` for :math:`n \\ge 1`, so
        :math:`F` increases strictly from below zero: the root is unique, the one stationary point and so
        the optimum of the ELBO over both factors, at least as high as any coordinate step reaches.

        Newton's method in :math:`\\log a` finds it from ``q_alpha``'s mean (default: the prior's). A step
        that leaves the bracket the signs of :math:`F` give, or is longer than ``MAX_LOG_STEP`` (far
        from the root :math:`F` is far from linear), is replaced by the fixed-point step, which stays
        between :math:`a` and the root. It stops when :math:`\\log a` moves by less than ``tol``; the
        returned :math:`q(\\alpha)` is exactly optimal for the returned sticks."""
        s1, s2 = self.alpha_prior
        has = self._has_stick(counts.shape[0], counts)
        tail = (counts.flip(0).cumsum(0).flip(0) - counts).clamp_min(0.0)[has]
        head = tail + 1.0 + counts[has]
        w1 = s1 + float(has.sum())
        a = s1 / s2 if q_alpha is None else float(q_alpha[0] / q_alpha[1])  # E[alpha] to start from
        lo, hi = -math.inf, math.inf  # bracket of log a
        for _ in range(max_iter):
            at = counts.new_tensor(a)
            rate = s2 + float((torch.digamma(head + at) - torch.digamma(tail + at)).sum())
            f = a * rate - w1
            if f == 0.0:
                break
            if f < 0.0:
                lo = max(lo, math.log(a))
            else:
                hi = min(hi, math.log(a))
            slope = a * rate + a * a * float((torch.polygamma(1, head + at) - torch.polygamma(1, tail + at)).sum())
            step = -f / slope
            u = math.log(a) + step
            if not (slope > 0.0 and lo < u < hi and abs(step) <= MAX_LOG_STEP):
                u = math.log(w1 / rate)  # the fixed-point step
                step = u - math.log(a)
            a = math.exp(u)
            if abs(step) <= tol:
                break
        eta1, eta0 = self.posterior(counts, counts.new_tensor([a, 1.0]))  # any q(alpha) with mean a
        return eta1, eta0, self.alpha_posterior(eta1, eta0)

    def alpha_kl(self, q_alpha):
        """:math:`KL(q(\\alpha) \\| Gamma(s_1, s_2))`: a scalar tensor."""
        s1, s2 = self.alpha_prior
        return kl_gamma(q_alpha[0], q_alpha[1], q_alpha.new_tensor(s1), q_alpha.new_tensor(s2))

    def _has_stick(self, K, like):
        """Mask of components that own a stick (all but the last under direct truncation)."""
        mask = torch.ones(K, dtype=torch.bool, device=like.device)
        if self.truncation == "direct":
            mask[-1] = False
        return mask

    def expected_log_weights(self, eta1, eta0):
        """:math:`E_q[\\log w_k] = E[\\log v_k] + \\sum_{\\ell<k} E[\\log(1 - v_\\ell)]`: ``(K,)``."""
        total = torch.digamma(eta1 + eta0)
        e_log_v = torch.digamma(eta1) - total
        e_log_1mv = torch.digamma(eta0) - total
        if self.truncation == "direct":
            e_log_v = torch.cat([e_log_v[:-1], torch.zeros_like(e_log_v[-1:])])
        prefix = torch.cumsum(e_log_1mv, 0) - e_log_1mv
        return e_log_v + prefix

    def kl_to_prior(self, eta1, eta0, q_alpha=None):
        """:math:`KL(q(v_k) \\| Beta(1, \\alpha))` per component, zero for a fixed last stick. With
        ``q_alpha``: :math:`E_q[\\log q(v_k) - \\log p(v_k \\mid \\alpha)]`, that is
        :math:`KL(q(v_k) \\| Beta(1, E[\\alpha])) + \\log E[\\alpha] - E[\\log \\alpha]`."""
        one = torch.ones_like(eta1)
        mean = self.expected_alpha(q_alpha)
        kl = kl_beta(eta1, eta0, one, mean * one)
        if q_alpha is not None:
            kl = kl + torch.log(mean) - (torch.digamma(q_alpha[0]) - torch.log(q_alpha[1]))
        return torch.where(self._has_stick(eta1.shape[0], eta1), kl, torch.zeros_like(kl))

    def elbo(self, counts, eta1, eta0, q_alpha=None):
        """Allocation part of Hughes & Sudderth 2013, eq. 8:
        :math:`\\sum_k \\hat N_k E[\\log w_k] - KL(q(v_k) \\| p(v_k))`, and with ``q_alpha`` also
        :math:`- KL(q(\\alpha) \\| p(\\alpha))`."""
        value = (counts * self.expected_log_weights(eta1, eta0)).sum() - self.kl_to_prior(eta1, eta0, q_alpha).sum()
        if q_alpha is not None:
            value = value - self.alpha_kl(q_alpha)
        return value


def alpha_posterior_mean(num_clusters, num_items, s1, s2, grid=200_000, upper=None):
    """:math:`E[\\alpha \\mid C]` for :math:`\\alpha \\sim \\mathrm{Gamma}(s_1, s_2)` given only the number of
    clusters ``C`` among ``N`` items of a DP (Antoniak 1974: :math:`p(C \\mid \\alpha) \\propto
    \\alpha^C \\Gamma(\\alpha) / \\Gamma(\\alpha + N)`), by quadrature on a grid up to ``upper``
    (default: far into the tail of the prior and of the likelihood). A reference for a learnt q(alpha)."""
    upper = upper or 10.0 * (s1 + num_clusters) / s2 + 50.0
    a = torch.linspace(upper / grid, upper, grid, dtype=torch.float64)
    log_post = (s1 - 1 + num_clusters) * torch.log(a) - s2 * a + torch.lgamma(a) - torch.lgamma(a + num_items)
    w = torch.exp(log_post - log_post.max())
    return float((a * w).sum() / w.sum())


def ordered_alpha_posterior_mean(sizes, s1, s2, grid=200_000, upper=None):
    """:math:`E[\\alpha \\mid z]` for :math:`\\alpha \\sim \\mathrm{Gamma}(s_1, s_2)` given the assignments
    to labelled sticks with ``sizes`` :math:`N_1, N_2, \\dots` (in stick order), the sticks integrated out:
    :math:`p(z \\mid \\alpha) = \\prod_k \\alpha B(N_k + 1, N_{>k} + \\alpha)
    \\propto \\alpha^C \\Gamma(\\alpha) / \\Gamma(\\alpha + N) \\prod_{k \\le C} (\\alpha + N_{\\ge k})^{-1}`
    over the ``C`` occupied sticks. This is the exact posterior of the stick-breaking model a Pyro DP mixture
    writes (Blei & Jordan 2006), for one labelling; by quadrature on a grid up to ``upper``. Beside
    :func:`alpha_posterior_mean` (the partition alone), the extra factor lowers the mean; it is smallest in
    decreasing size order."""
    sizes = torch.as_tensor(sizes, dtype=torch.float64)
    sizes = sizes[sizes > 0]
    tails = sizes.flip(0).cumsum(0).flip(0)  # N_{>=k}
    num_clusters, num_items = len(sizes), float(sizes.sum())
    upper = upper or 10.0 * (s1 + num_clusters) / s2 + 50.0
    a = torch.linspace(upper / grid, upper, grid, dtype=torch.float64)
    log_post = (s1 - 1 + num_clusters) * torch.log(a) - s2 * a + torch.lgamma(a) - torch.lgamma(a + num_items)
    for tail in tails.tolist():
        log_post -= torch.log(a + tail)
    w = torch.exp(log_post - log_post.max())
    return float((a * w).sum() / w.sum())
