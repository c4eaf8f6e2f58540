"""The assortative HDP relational model with non-linked pairs' roles tied to the memberships.

Same model and globals as :mod:`pyro_memo.posterior.relational`; another variational family for
the roles of the non-linked pairs. Kim et al. (2013) give every pair a role factor ``q(s, r)`` free
of the memberships (eqs. R1, R2 of :mod:`pyro_memo.posterior.relational_pairs`). A non-linked pair
is almost uninformative about its roles (``1 - w_k`` against ``1 - epsilon``, both near 1), so its
optimal factor stays near the node's current membership, and the ``N - 1`` roles of each node then
hold its Dirichlet ``theta_i`` near ``N`` pseudo-counts at its current value: coordinate ascent moves
a membership by about ``degree / N`` of the way per lap, and the bound favours splitting communities
that the data do not support (measured in ``benchmarks/bench_relational_synthetic.py``).

Here a **linked** pair keeps the structured factor at its optimum (eq. R1), and a **non-linked**
pair's roles follow the memberships: ``q(s = k, r = l | pi) = pi~_ik pi~_jl`` with
:math:`\\tilde\\pi_{ik} = \\pi_{ik} / (1 - \\pi_{i,K+1})` over the ``K`` explicit communities (nested
truncation: no role in the tail). Its terms of the bound are then exact in closed form (eq. T1):

.. math::

    E\\Big[\\log\\frac{p(y_{ij} = 0, s, r \\mid \\pi, w)}{q(s, r \\mid \\pi)}\\Big]
    = \\sum_k \\bar e_{ik} \\bar e_{jk} E\\log(1 - w_k) + \\Big(1 - \\sum_k \\bar e_{ik} \\bar e_{jk}\\Big)
    \\log(1 - \\epsilon) + \\lambda_i + \\lambda_j,

with :math:`\\bar e_{ik} = E[\\tilde\\pi_{ik}] = \\theta_{ik} / (\\theta_{i0} - \\theta_{i,K+1})` (the
explicit part of a Dirichlet renormalised is Dirichlet, independent of its total) and
:math:`\\lambda_i = E\\log(1 - \\pi_{i,K+1}) = \\psi(\\theta_{i0} - \\theta_{i,K+1}) - \\psi(\\theta_{i0})`
(``log p(s | pi) - log q(s | pi) = log(1 - pi_tail)``). Over all ``U`` non-linked pairs (eq. T2):

.. math::

    U\\log(1 - \\epsilon) + \\sum_i n_i\\lambda_i + \\sum_k c_k D^0_k, \\quad
    D^0_k = \\tfrac12\\Big[\\Big(\\sum_i \\bar e_{ik}\\Big)^2 - \\sum_i \\bar e_{ik}^2\\Big]
    - \\sum_{(i,j) \\in E \\cup M} \\bar e_{ik}\\bar e_{jk},

:math:`c_k = E\\log(1 - w_k) - \\log(1 - \\epsilon)`, :math:`n_i` the node's non-linked partners and
:math:`E \\cup M` the links and unobserved pairs: O((E + M + N) K), no N x N loop. These terms depend
on the globals only, so a batch's summary holds its links alone (:func:`link_summary`).

Global step (eq. T3): :math:`q(w_k) = \\mathrm{Beta}(\\tau_a + D^1_k, \\tau_b + D^0_k)` in closed form;
the memberships raise their terms (links' roles, Dirichlet KL, eq. T2) by
damped natural-gradient fixed-point steps (eq. T4, :func:`_ascent_direction`; each kept only where
the bound rises, so the step never lowers it); sticks as the HDP's; the three alternate.
"""

import math
import warnings
from collections import namedtuple

import torch

from ..allocation.hdp_sticks import expected_beta, fit_top_level, top_level_objective
from .hdp import expected_log_dirichlet, log_dirichlet_norm
from .relational import RelationalPosterior
from .relational_pairs import link_summary, pair_terms

__all__ = ["GraphPairs", "TiedRelationalPosterior", "graph_pairs", "nonlink_diag", "tied_nonlink_terms"]

class GraphPairs(namedtuple("GraphPairs", ["excluded", "nonlinks", "adjacency"])):
    """What the non-linked terms need of the graph: ``excluded`` ``(P, 2)`` the links and unobserved
    pairs ``i < j``, ``nonlinks`` ``(N,)`` each node's non-linked partners :math:`n_i`, and
    ``adjacency`` the ``N x N`` sparse symmetric 0/1 matrix of the excluded pairs."""

    __slots__ = ()

    def partner_sums(self, e):
        """``(N, K)`` :math:`\\sum_{j : (i, j) \\in E \\cup M} e_j` for each node ``i`` (both ends): one sparse
        product, with no ``(P, K)`` temporary."""
        return self.adjacency @ e.to(self.adjacency.dtype)

    def means(self, theta, K):
        """``(e, partner_sums(e))`` of memberships ``theta`` ``(N, K + 1)``: :math:`\\bar e_{ik}`
        (eq. T1) and their sums over each node's links and unobserved pairs."""
        e = _explicit_means(theta, K)
        return e, self.partner_sums(e)

    def to(self, dtype=None, device=None):
        """These pairs with float tensors in ``dtype`` on ``device``."""
        return graph_pairs(self.excluded.to(device), None, self.nonlinks.shape[0], dtype or self.nonlinks.dtype)

    def __deepcopy__(self, memo):
        """A copy rebuilt from the excluded pairs: torch cannot deep-copy the sparse CSR ``adjacency``, and
        ``copy.deepcopy`` of a fit's state or posterior failed with its NotImplementedError."""
        return graph_pairs(self.excluded.clone(), None, self.nonlinks.shape[0], self.nonlinks.dtype)


def graph_pairs(edges, missing, N, dtype=torch.float64):
    """The :class:`GraphPairs` of an ``N``-node graph with links ``edges`` and unobserved pairs
    ``missing`` (``(E, 2)`` and ``(M, 2)`` long tensors of pairs ``i < j``; ``missing=None``: none)."""
    excluded = edges.reshape(-1, 2) if missing is None else torch.cat([edges.reshape(-1, 2), missing.reshape(-1, 2)])
    index = torch.cat([excluded, excluded.flip(1)]).T
    ones = torch.ones(index.shape[1], dtype=dtype, device=excluded.device)
    with warnings.catch_warnings():  # torch calls its sparse CSR support beta; its product is what is used
        warnings.simplefilter("ignore", UserWarning)
        adjacency = torch.sparse_coo_tensor(index, ones, (N, N)).coalesce().to_sparse_csr()
    touched = torch.zeros(N, dtype=dtype, device=excluded.device).index_add_(0, index[0], ones)
    return GraphPairs(excluded, (N - 1) - touched, adjacency)


class RememberedPairs:
    """:class:`GraphPairs` that remember :meth:`GraphPairs.means` of the last memberships asked about. Within
    a global step (eq. T3) :math:`D^0`, the bound and the ascent direction each ask for those of one ``theta``,
    and each answer costs a sparse product over every excluded pair (at 20,000 nodes the largest single cost
    of the step)."""

    def __init__(self, pairs):
        self.pairs, self.nonlinks = pairs, pairs.nonlinks
        self._theta = self._K = self._means = None

    def means(self, theta, K):
        """As :meth:`GraphPairs.means`, computed once for the same ``theta`` tensor (the code that asks never
        changes a tensor in place: each trial is a new one)."""
        if theta is not self._theta or K != self._K:
            self._theta, self._K, self._means = theta, K, self.pairs.means(theta, K)
        return self._means


def _explicit_means(theta, K):
    """``(N, K)`` :math:`\\bar e_{ik} = \\theta_{ik} / (\\theta_{i0} - \\theta_{i,K+1})`."""
    return theta[:, :K] / theta[:, :K].sum(1, keepdim=True)


def nonlink_diag(theta, K, pairs):
    """``(K,)`` :math:`D^0_k` (eq. T2): the non-linked pairs' expected mass on ``s = r = k``."""
    e, partners = pairs.means(theta, K)
    total = e.sum(0)
    return 0.5 * (total * total - (e * e).sum(0) - (e * partners).sum(0))


def tied_nonlink_terms(theta, K, pairs, e_log_1mw, log_1meps):
    """The non-linked pairs' exact terms of the bound (eq. T2) under memberships ``theta``
    ``(N, K + 1)`` and :math:`E\\log(1 - w)` ``(K,)``."""
    t0 = theta.sum(1)
    lam = torch.digamma(t0 - theta[:, K]) - torch.digamma(t0)
    d0 = nonlink_diag(theta, K, pairs)
    return (0.5 * pairs.nonlinks.sum() * log_1meps + (pairs.nonlinks * lam).sum()
            + (d0 * (e_log_1mw - log_1meps)).sum())


def membership_objective(theta, roles, pairs, e_log_1mw, log_1meps, rho, omega, alpha, gamma):
    """The terms of the bound that depend on the memberships ``theta`` ``(N, K + 1)``, given the
    links' role counts ``roles`` ``(N, K)``: :math:`\\sum_{ik} N_{ik}E\\log\\pi_{ik}`, the memberships'
    entropy terms, the top level and the non-linked pairs (eq. T2)."""
    K = roles.shape[1]
    e_log_pi = expected_log_dirichlet(theta)
    return ((roles * e_log_pi[:, :K]).sum() - log_dirichlet_norm(theta).sum() - (theta * e_log_pi).sum()
            + top_level_objective(rho, omega, theta.shape[0], e_log_pi.sum(0), alpha, gamma)
            + tied_nonlink_terms(theta, K, pairs, e_log_1mw, log_1meps))


def _ascent_direction(theta, prior, roles, pairs, c):
    """The natural-gradient fixed point of each node's membership terms (eq. T4), ``(N, K + 1)``:
    :math:`\\theta^* = a + F(\\theta)^{-1} g(\\theta)` with :math:`a = \\alpha E[\\beta] + N_i` (the links'
    roles), :math:`F` the Dirichlet's Fisher information :math:`\\mathrm{diag}\\,\\psi'(\\theta_k) -
    \\psi'(\\theta_0) 1 1^T` (inverted by Sherman-Morrison) and :math:`g` the gradient of the
    non-linked terms (eq. T2) with the other nodes held: :math:`n_i \\partial\\lambda_i` plus
    :math:`(G_{ik} - \\sum_l G_{il}\\bar e_{il}) / S_i` on the explicit entries, where
    :math:`G_{ik} = c_k \\sum_{j \\ne i, y_{ij} = 0} \\bar e_{jk}` and :math:`S_i = \\sum_{k \\le K}\\theta_{ik}`.
    At a stationary point of the node's terms it returns ``theta``."""
    K = roles.shape[1]
    e, partners = pairs.means(theta, K)
    G = c * (e.sum(0) - e - partners)
    explicit = theta[:, :K].sum(1, keepdim=True)
    t0 = theta.sum(1, keepdim=True)
    g = torch.cat([(G - (G * e).sum(1, keepdim=True)) / explicit, torch.zeros_like(t0)], 1)
    on_explicit = torch.cat([torch.ones_like(e), torch.zeros_like(t0)], 1)
    g = g + pairs.nonlinks[:, None] * (torch.polygamma(1, explicit) * on_explicit - torch.polygamma(1, t0))
    d_inv = 1.0 / torch.polygamma(1, theta)
    c0 = torch.polygamma(1, t0)
    fisher_inv_g = d_inv * g + d_inv * c0 * (d_inv * g).sum(1, keepdim=True) / (1.0 - c0 * d_inv.sum(1, keepdim=True))
    a = torch.cat([prior[:K] + roles, prior[K:].expand(theta.shape[0], 1)], 1)
    return a + fisher_inv_g


def optimize_memberships(theta, objective, direction, iters=5):
    """Up to ``iters`` damped fixed-point steps toward ``direction(theta)`` (eq. T4): each moves every
    node part of the way (at most 90% of the way to zero for a falling entry, so all stay positive)
    and is kept only where ``objective`` rises, halving the step up to 10 times; so no step lowers it."""
    value = float(objective(theta))
    for _ in range(int(iters)):
        step = direction(theta) - theta
        falling = step < 0
        room = torch.where(falling, 0.9 * theta / (-step).clamp_min(1e-300), torch.ones_like(theta))
        step = step * room.min(1, keepdim=True).values.clamp(max=1.0)
        for _ in range(10):
            trial = theta + step
            new = float(objective(trial))
            if new > value:
                theta, value = trial, new
                break
            step = 0.5 * step
        else:
            break
    return theta


class TiedRelationalPosterior(RelationalPosterior):
    """Globals of the assortative HDP relational model whose non-linked pairs' roles follow the
    memberships (eqs. T1-T3 of this module); the graph's ``GraphPairs`` ride along, since the
    non-linked terms are a function of the globals and the graph.

    :param pairs: the graph's ``GraphPairs`` (``graph_pairs()``).
    :param int membership_iters: fixed-point steps of the memberships per global round (eq. T4).

    Other parameters as :class:`~pyro_memo.posterior.relational.RelationalPosterior`.
    """

    def __init__(self, theta, rho, omega, w_a, w_b, alpha, gamma, tau=(1.0, 1.0), eps=1e-4, pairs=None,
                 membership_iters=1, learn_eps=False):
        super().__init__(theta, rho, omega, w_a, w_b, alpha, gamma, tau, eps, learn_eps)
        if pairs is None:
            raise ValueError("a TiedRelationalPosterior needs the graph's pairs (graph_pairs(edges, missing, N))")
        self.pairs, self.membership_iters = pairs, int(membership_iters)

    @classmethod
    def from_memberships(cls, memberships, alpha=1.0, gamma=5.0, tau=(1.0, 1.0), eps=1e-4, scale=None, pairs=None,
                         learn_eps=False):
        """As :meth:`RelationalPosterior.from_memberships`, with the graph's ``pairs``."""
        base = RelationalPosterior.from_memberships(memberships, alpha, gamma, tau, eps, scale, learn_eps)
        return cls.like(base, pairs)

    @classmethod
    def like(cls, post, pairs, membership_iters=1):
        """``post``'s globals (any relational posterior) in this family."""
        return cls(post.theta, post.rho, post.omega, post.w_a, post.w_b, post.alpha, post.gamma, post.tau, post.eps,
                   pairs, membership_iters, post.learn_eps)

    def with_globals(self, theta, rho, omega, w_a, w_b):
        """This posterior's kind with other globals (same hyperparameters and graph)."""
        return TiedRelationalPosterior(theta, rho, omega, w_a, w_b, self.alpha, self.gamma, self.tau, self.eps,
                                       self.pairs, self.membership_iters, self.learn_eps)

    # ------------------------------------------------------------- local step
    def local_step(self, edges, sources, start=None, iters=None, missing=None):
        """The batch's linked pairs at their optimum (eq. R1); returns ``(None, summary)`` (no local
        factors to keep: non-linked roles are tied to the memberships)."""
        e_log_w, _ = self.e_log_w()
        return None, link_summary(self.e_log_pi[:, : self.K], edges, sources, e_log_w, math.log(self.eps))

    # ------------------------------------------------------------ global step
    def updated(self, summary, rounds=1, stick_iters=100):
        """The globals after ``rounds`` of the closed-form links, the memberships (eq. T4) and the
        sticks (eq. T3), each step never lowering the bound."""
        K, N = self.K, self.N
        w_a = self.tau[0] + summary.link_diag
        theta, rho, omega, alpha, gamma = self.theta, self.rho, self.omega, self.alpha, self.gamma
        roles = summary.role_counts.T
        log_1meps = math.log1p(-self.eps)
        if theta.shape[1] != K + 1:
            raise ValueError(f"memberships have {theta.shape[1] - 1} communities; the summary {K}")
        pairs = RememberedPairs(self.pairs)
        for _ in range(rounds):
            w_b = self.tau[1] + nonlink_diag(theta, K, pairs)
            e_log_1mw = torch.digamma(w_b) - torch.digamma(w_a + w_b)
            prior = float(alpha) * expected_beta(rho)

            def objective(t, rho=rho, omega=omega, alpha=alpha, gamma=gamma, e_log_1mw=e_log_1mw):
                return membership_objective(t, roles, pairs, e_log_1mw, log_1meps, rho, omega, alpha, gamma)

            def direction(t, prior=prior, c=e_log_1mw - log_1meps):
                return _ascent_direction(t, prior, roles, pairs, c)

            theta = optimize_memberships(theta, objective, direction, self.membership_iters)
            e_log_pi = expected_log_dirichlet(theta)
            rho, omega, alpha, gamma = fit_top_level(rho, omega, N, e_log_pi.sum(0), alpha, gamma, stick_iters)
        d0 = nonlink_diag(theta, K, pairs)
        w_b = self.tau[1] + d0
        eps = self.next_eps(summary, 0.5 * self.pairs.nonlinks.sum() - d0.sum())  # U = sum_i n_i / 2 non-links
        new = TiedRelationalPosterior(theta, rho, omega, w_a, w_b, alpha, gamma, self.tau, eps, self.pairs,
                                      self.membership_iters, self.learn_eps)
        new._e_log_pi = e_log_pi  # of this theta: computed once
        return new

    # ------------------------------------------------------------------ bound
    def pair_terms(self, summary):
        """The linked pairs' terms (eq. R4 with no non-linked pair) plus the non-linked ones (eq. T2)."""
        e_log_w, e_log_1mw = self.e_log_w()
        log_eps, log_1meps = math.log(self.eps), math.log1p(-self.eps)
        links = pair_terms(summary, self.e_log_pi[:, : self.K], e_log_w, e_log_1mw, log_eps, log_1meps)
        return links + tied_nonlink_terms(self.theta, self.K, self.pairs, e_log_1mw, log_1meps)

    # ------------------------------------------------------------ persistence
    def state_dict(self):
        d = super().state_dict()
        d.update(excluded=self.pairs.excluded.cpu(), membership_iters=self.membership_iters)
        return d

    @classmethod
    def from_state_dict(cls, d, device=None):
        base = RelationalPosterior.from_state_dict(d, device)
        pairs = graph_pairs(d["excluded"].to(device), None, base.N, base.dtype)
        return cls.like(base, pairs, d.get("membership_iters", 1))

    def to(self, dtype=None, device=None):
        base = super().to(dtype, device)
        pairs = self.pairs.to(dtype, device)
        return TiedRelationalPosterior.like(base, pairs, self.membership_iters)
