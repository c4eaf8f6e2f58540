"""Global variational factors of the assortative HDP relational model and its exact bound.

The model and the pairs' factors are those of :mod:`pyro_memo.posterior.relational_pairs`. The
globals: top-level sticks :math:`q(u_k)` (:mod:`pyro_memo.allocation.hdp_sticks`, the HDP's), node
memberships :math:`q(\\pi_i) = \\mathrm{Dir}(\\theta_i)` over ``K + 1`` entries (the last the tail), and
community link probabilities :math:`q(w_k) = \\mathrm{Beta}(a_k, b_k)`. Node memberships are global
(each node's roles live in pairs of every batch), as in bnpy's relational models.

The bound (Kim, Gopalan, Blei & Sudderth 2013, with the surrogate of Hughes, Kim & Sudderth 2015,
eq. 11, for the memberships' Dirichlet normalisers):

.. math::

    \\mathcal L = \\text{pairs (eq. R4)} - \\sum_i \\Big[c(\\theta_i) + \\sum_{k \\le K+1} \\theta_{ik}
    E\\log\\pi_{ik}\\Big] + \\text{top level}(N, \\textstyle\\sum_i E\\log\\pi_i)
    - \\sum_k KL(q(w_k) \\| \\mathrm{Beta}(\\tau_a, \\tau_b)),

where the top level is the HDP's (:func:`~pyro_memo.allocation.hdp_sticks.top_level_objective`, the
nodes playing the documents). Global step, each part exact given the others (eq. G1):
:math:`a_k = \\tau_a + D^1_k`, :math:`b_k = \\tau_b + D^0_k`; :math:`\\theta_i = \\alpha E[\\beta] + N_i`
(roles, tail :math:`\\alpha E[\\beta_{K+1}]`); sticks (and learnt concentrations) by
:func:`~pyro_memo.allocation.hdp_sticks.fit_top_level`; memberships and sticks alternate.

Optionally (``learn_eps``) the background probability is an empirical-Bayes point estimate: the
bound depends on it only through :math:`A\\log\\epsilon + B\\log(1 - \\epsilon)`, with
:math:`A = \\sum_{y_{ij}=1} q(s_{ij} \\ne r_{ij})` and :math:`B = \\sum_{y_{ij}=0} q(s_{ij} \\ne r_{ij})`
the linked and non-linked pairs' expected mass off the diagonal, so each global step ends with
:math:`\\epsilon^* = A / (A + B)` (eq. E1, ``optimal_eps()``), which never lowers the bound. Kim et
al. (2013) fix :math:`\\epsilon` to a small constant; on graphs dense between communities a fixed
:math:`10^{-4}` charges every link between communities about 9 nats and the bound then prefers
merging communities (measured in ``benchmarks/bench_relational_networks.py``).
"""

import copy
import math

import numpy as np
import torch

from ..allocation.concentration import (
    GammaConcentration,
    concentration_from_state,
    concentration_state,
    gamma_prior_pair,
)
from ..allocation.hdp_sticks import expected_beta, fit_top_level, prior_sticks, top_level_objective
from ..checks import as_bool, check_positive_finite
from ..families._special import kl_beta
from .base import VariationalPosterior
from .hdp import expected_log_dirichlet, log_dirichlet_norm
from .relational_pairs import nonlink_factors, pair_summary, pair_terms

__all__ = ["RelationalPosterior", "check_hyperparameters", "optimal_eps"]

#: the learnt background probability stays inside [EPS_FLOOR, 1 - EPS_FLOOR]
EPS_FLOOR = 1e-10


def check_hyperparameters(alpha, gamma, tau, eps):
    """Raise a ValueError naming the first bad hyperparameter of the relational model: ``alpha``,
    ``gamma`` and ``tau = (tau_a, tau_b)`` must be positive and finite, ``eps`` in (0, 1)."""
    try:
        tau_a, tau_b = tau
    except (TypeError, ValueError):
        raise ValueError(f"tau must be a pair (tau_a, tau_b) of the link strengths' Beta prior; got {tau!r}") from None
    for name, value in (("alpha", alpha), ("gamma", gamma), ("tau_a", tau_a), ("tau_b", tau_b)):
        check_positive_finite(value, name)
    if not 0 < float(eps) < 1:
        raise ValueError(f"eps must lie in (0, 1); got {eps}")


def optimal_eps(off_links, off_nonlinks):
    """The background link probability that maximises the bound given the pairs' factors (an
    empirical-Bayes M-step, eq. E1): the bound depends on :math:`\\epsilon` only through
    :math:`A\\log\\epsilon + B\\log(1 - \\epsilon)`, with :math:`A` the linked pairs' expected mass off
    the diagonal (``num_links - sum_k D1_k``) and :math:`B` the non-linked pairs' (``U - sum_k D0_k``),
    so :math:`\\epsilon^* = A / (A + B)`."""
    a, b = float(off_links), float(off_nonlinks)
    value = a / (a + b) if a + b > 0 else EPS_FLOOR
    return min(max(value, EPS_FLOOR), 1.0 - EPS_FLOOR)


def _pair_tensor(pairs, N, device):
    """``pairs`` (a tensor, array or nested lists) as a tensor on ``device``, refusing what torch would
    fail on or wrap around: ids that are not numbers (node names, where the model numbers its nodes
    ``0 .. N - 1``) and uint64 ids at or above 2**63 (reported as given, not as the negative int64 they
    wrap to)."""
    if not torch.is_tensor(pairs):
        array = np.asarray(pairs)
        if array.dtype.kind not in "biuf":
            raise ValueError(f"pairs must hold whole-number node ids, the nodes' positions 0 .. {N - 1} (a networkx "
                             f"graph's in graph.nodes order), not their names; got dtype {array.dtype}")
        if array.dtype.kind == "u" and array.size and int(array.max()) > np.iinfo(np.int64).max:
            raise ValueError(f"node ids must lie in [0, {N}); found [{int(array.min())}, {int(array.max())}]")
        pairs = array
    return torch.as_tensor(pairs, device=device)


class RelationalPosterior(VariationalPosterior):
    """``q(u)``, ``q(pi_i) = Dir(theta_i)`` and ``q(w_k) = Beta(a_k, b_k)`` of the assortative HDP
    relational model.

    :param theta: ``(N, K + 1)`` membership Dirichlets.
    :param rho: ``(K,)`` stick means; ``omega``: ``(K,)`` stick concentrations.
    :param w_a: ``(K,)``; ``w_b``: ``(K,)`` the link probabilities' Beta factors.
    :param alpha: membership concentration (a float or a
        ``GammaConcentration``); ``gamma``: top-level one.
    :param tau: ``(tau_a, tau_b)`` the link probabilities' Beta prior.
    :param float eps: background link probability between different communities.
    :param bool learn_eps: learn ``eps`` by maximising the bound in every global step
        (``optimal_eps()``); ``eps`` is then its current value.
    """

    def __init__(self, theta, rho, omega, w_a, w_b, alpha, gamma, tau=(1.0, 1.0), eps=1e-4, learn_eps=False):
        self.theta, self.rho, self.omega, self.w_a, self.w_b = theta, rho, omega, w_a, w_b
        self.alpha, self.gamma = (c if isinstance(c, GammaConcentration) else float(c) for c in (alpha, gamma))
        self.tau, self.eps, self.learn_eps = (float(tau[0]), float(tau[1])), float(eps), bool(learn_eps)
        self._e_log_pi = None

    @classmethod
    def from_memberships(cls, memberships, alpha=1.0, gamma=5.0, tau=(1.0, 1.0), eps=1e-4, scale=None,
                         learn_eps=False):
        """Sticks at the prior, links at their prior and ``theta = alpha E[beta] + scale * memberships``
        (``memberships`` ``(N, K)`` rows on the simplex; ``scale`` default ``N - 1``, each node's pairs)."""
        N, K = memberships.shape
        rho, omega = prior_sticks(K, float(gamma), memberships.dtype, memberships.device)
        prior = float(alpha) * expected_beta(rho)
        scale = N - 1 if scale is None else scale
        theta = torch.cat([prior[:K] + scale * memberships, prior[K:].expand(N, 1)], 1)
        ones = memberships.new_ones(K)
        return cls(theta, rho, omega, tau[0] * ones, tau[1] * ones, alpha, gamma, tau, eps, learn_eps)

    def learning(self, alpha_prior=None, learn_eps=False):
        """A copy with the same globals that learns, from its next global step, the membership
        concentration (``alpha_prior`` ``(s1, s2)``: :math:`\\alpha \\sim Gamma(s_1, s_2)`, its factor
        starting at the prior) and, with ``learn_eps``, the background probability (eq. E1). Its bound
        has :math:`q(\\alpha)`'s terms, so it is not comparable with this posterior's: empirical Bayes
        started once the memberships have settled at fixed values (the harness's ``memo-eb``)."""
        other = copy.copy(self)
        if alpha_prior is not None:
            other.alpha = GammaConcentration(gamma_prior_pair(alpha_prior, "alpha_prior"))
        other.learn_eps = self.learn_eps or as_bool(learn_eps, "learn_eps")
        return other

    def with_globals(self, theta, rho, omega, w_a, w_b):
        """This posterior's kind with other globals (same hyperparameters)."""
        return RelationalPosterior(theta, rho, omega, w_a, w_b, self.alpha, self.gamma, self.tau, self.eps,
                                   self.learn_eps)

    @property
    def K(self):
        return self.rho.shape[0]

    @property
    def N(self):
        return self.theta.shape[0]

    @property
    def dtype(self):
        return self.theta.dtype

    @property
    def e_log_pi(self):
        """``(N, K + 1)`` :math:`E\\log\\pi_{ik}`."""
        if self._e_log_pi is None:
            self._e_log_pi = expected_log_dirichlet(self.theta)
        return self._e_log_pi

    def e_log_w(self):
        """:math:`(E\\log w_k, E\\log(1 - w_k))`, each ``(K,)``."""
        total = torch.digamma(self.w_a + self.w_b)
        return torch.digamma(self.w_a) - total, torch.digamma(self.w_b) - total

    def expected_beta(self):
        return expected_beta(self.rho)

    def memberships(self):
        """``(N, K)`` :math:`E[\\pi_{ik}]` over the explicit communities."""
        return (self.theta / self.theta.sum(1, keepdim=True))[:, : self.K]

    def link_probabilities(self):
        """``(K,)`` :math:`E[w_k]`."""
        return self.w_a / (self.w_a + self.w_b)

    def link_probability(self, pairs):
        """Predictive probability that each node pair is linked, ``(M,)`` for ``pairs`` ``(M, 2)``
        (node ids, a long tensor or array), under the posterior means:

        .. math::

            p(y_{ij} = 1) = \\sum_k \\bar\\pi_{ik} \\bar\\pi_{jk} E[w_k]
            + \\epsilon \\Big(1 - \\sum_k \\bar\\pi_{ik} \\bar\\pi_{jk}\\Big),

        where :math:`\\bar\\pi_i` is :math:`E[\\pi_i]` over the ``K`` explicit communities
        renormalised to sum to 1 (the tail's mass, which no explicit community holds, is spread over
        them in proportion). Each value is a convex combination of the :math:`E[w_k]` and
        :math:`\\epsilon`, so it lies in ``(0, 1)``.

        :raises ValueError: unless ``pairs`` is ``(M, 2)`` with whole-number ids in ``[0, N)``, two distinct
            nodes a pair (the model has no self links).
        """
        given = _pair_tensor(pairs, self.N, self.theta.device)
        if given.ndim != 2 or given.shape[1] != 2:
            raise ValueError(f"pairs must be an (M, 2) array of node ids; got shape {tuple(given.shape)}")
        if given.dtype == torch.bool or given.is_complex() or \
                (given.is_floating_point() and not bool((given == given.round()).all())):
            raise ValueError("pairs must hold whole-number node ids (found fractions, NaN or a non-numeric dtype)")
        pairs = given.long()
        if pairs.numel() and (int(pairs.min()) < 0 or int(pairs.max()) >= self.N):
            raise ValueError(f"node ids must lie in [0, {self.N}); found [{int(pairs.min())}, {int(pairs.max())}]")
        if bool((pairs[:, 0] == pairs[:, 1]).any()):
            first = int((pairs[:, 0] == pairs[:, 1]).nonzero()[0])
            raise ValueError(f"pair {first} links node {int(pairs[first, 0])} to itself: the model has no self links")
        explicit = self.theta[:, : self.K]
        pi = explicit / explicit.sum(1, keepdim=True)
        both = pi[pairs[:, 0]] * pi[pairs[:, 1]]
        return both @ self.link_probabilities() + self.eps * (1.0 - both.sum(1))

    # ------------------------------------------------------------- local step
    def local_step(self, edges, sources, start=None, iters=10, missing=None):
        """The pairs of the batch with source nodes ``sources`` ``(N,)`` bool: linked pairs at their
        optimum (eq. R1), non-linked factors by ``iters`` block rounds from ``start`` (eq. R5);
        ``missing`` ``(M, 2)`` unobserved pairs are left out. Returns ``(factors, summary)``."""
        e_log_pi = self.e_log_pi[:, : self.K]
        e_log_w, e_log_1mw = self.e_log_w()
        factors = nonlink_factors(e_log_pi, edges, sources, e_log_w, e_log_1mw, math.log1p(-self.eps), iters, start,
                                  missing)
        return factors, pair_summary(e_log_pi, edges, sources, e_log_w, math.log(self.eps), factors, missing)

    def pair_terms(self, summary):
        """The pairs' terms of the bound (eq. R4) under these globals."""
        e_log_w, e_log_1mw = self.e_log_w()
        return pair_terms(summary, self.e_log_pi[:, : self.K], e_log_w, e_log_1mw, math.log(self.eps),
                          math.log1p(-self.eps))

    # ------------------------------------------------------------ global step
    def updated(self, summary, rounds=2, stick_iters=100):
        """The globals optimal for ``summary`` (eq. G1): links in closed form, then memberships and
        top level alternated ``rounds`` times; no step lowers the bound."""
        K, N = self.K, self.N
        w_a, w_b = self.tau[0] + summary.link_diag, self.tau[1] + summary.nonlink_diag
        rho, omega, alpha, gamma = self.rho, self.omega, self.alpha, self.gamma
        roles = summary.role_counts.T
        for _ in range(rounds):
            prior = float(alpha) * expected_beta(rho)
            theta = torch.cat([prior[:K] + roles, prior[K:].expand(N, 1)], 1)
            e_log_pi = expected_log_dirichlet(theta)
            rho, omega, alpha, gamma = fit_top_level(rho, omega, N, e_log_pi.sum(0), alpha, gamma, stick_iters)
        eps = self.next_eps(summary, summary.num_nonlinks - summary.nonlink_diag.sum())
        new = RelationalPosterior(theta, rho, omega, w_a, w_b, alpha, gamma, self.tau, eps, self.learn_eps)
        new._e_log_pi = e_log_pi  # of this theta: computed once
        return new

    def next_eps(self, summary, off_nonlinks):
        """The background probability after a global step: eq. E1 with ``off_nonlinks`` the non-linked
        pairs' expected mass off the diagonal, if learnt; else the fixed value."""
        if not self.learn_eps:
            return self.eps
        return optimal_eps(summary.num_links - summary.link_diag.sum(), off_nonlinks)

    def update(self, summary):
        return self.updated(summary)

    def optimal_for(self, summary):
        return self.updated(summary)

    # ------------------------------------------------------------------ bound
    def elbo_terms(self, summary):
        e_log_pi = self.e_log_pi
        links = -kl_beta(self.w_a, self.w_b, torch.full_like(self.w_a, self.tau[0]),
                         torch.full_like(self.w_b, self.tau[1])).sum()
        terms = {
            "pairs": self.pair_terms(summary),
            "memberships": -(log_dirichlet_norm(self.theta).sum() + (self.theta * e_log_pi).sum()),
            "sticks": top_level_objective(self.rho, self.omega, self.N, e_log_pi.sum(0), self.alpha, self.gamma),
            "links": links,
        }
        learnt = [c for c in (self.alpha, self.gamma) if isinstance(c, GammaConcentration)]
        if learnt:
            terms["concentrations"] = -links.new_tensor(sum(c.kl() for c in learnt))
        return terms

    # ------------------------------------------------------------ persistence
    def tensor_shapes(self, summaries):
        """:meth:`~pyro_memo.posterior.VariationalPosterior.tensor_shapes` of the globals: ``K`` communities from
        ``rho``, ``N`` nodes from ``theta``'s rows where it keeps them (the pair summaries are not checked; a
        posterior without sticks, the stochastic a-MMSB's, declares none)."""
        if any(getattr(self, name, None) is None for name in ("rho", "omega", "w_a", "w_b")):
            return None
        K = self.rho.shape[0]
        expected = {"omega": (K,), "w_a": (K,), "w_b": (K,)}
        if self.theta is not None:
            expected["theta"] = (self.theta.shape[0], K + 1)
        found = {name: getattr(self, name).shape for name in expected}
        return expected, found, f"K = {K} communities from rho"

    def state_dict(self):
        return {"theta": self.theta.cpu(), "rho": self.rho.cpu(), "omega": self.omega.cpu(), "w_a": self.w_a.cpu(),
                "w_b": self.w_b.cpu(), "alpha": concentration_state(self.alpha),
                "gamma": concentration_state(self.gamma), "tau": list(self.tau), "eps": self.eps,
                "learn_eps": self.learn_eps}

    @classmethod
    def from_state_dict(cls, d, device=None):
        return cls(*(d[k].to(device) for k in ("theta", "rho", "omega", "w_a", "w_b")),
                   concentration_from_state(d["alpha"]), concentration_from_state(d["gamma"]), tuple(d["tau"]),
                   d["eps"], d.get("learn_eps", False))

    def to(self, dtype=None, device=None):
        def move(t):
            return t.to(dtype=dtype, device=device)

        return RelationalPosterior(move(self.theta), move(self.rho), move(self.omega), move(self.w_a),
                                   move(self.w_b), self.alpha, self.gamma, self.tau, self.eps, self.learn_eps)
