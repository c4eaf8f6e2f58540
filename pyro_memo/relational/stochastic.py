"""Stochastic variational inference for the assortative relational model: the stochastic HDP
relational algorithm of Kim, Gopalan, Blei & Sudderth (2013) and fixed-K stochastic a-MMSB
(Gopalan, Mimno, Gerrish, Freedman & Blei 2012), the baselines of memoized inference.

Each step draws a uniform random set ``S`` of ``n`` nodes (``n = ceil(N / batches)``) and takes every
pair that touches ``S`` (``i`` or ``j`` in ``S``; Kim et al.'s node sampling). The nodes are relabelled
so that ``S`` comes first; the touched pairs are then exactly the pairs ``i < j`` whose smaller node is
a source, so :meth:`~pyro_memo.relational.RelationalPosterior.local_step` gives their local
factors: linked pairs the structured diagonal-coupled factor (eq. R1 of
``pyro_memo.posterior.relational_pairs``), non-linked pairs the node factors of eq. R5 from the
mean-field start :math:`A / S` (``nonlink_iters`` block rounds; 0 keeps the mean-field factor). Kim et
al. subsample a node's non-links (stratified sampling, reweighted); here their per-community sums
(eq. R3) give the exact total in O(N K), so node sampling is the only noise.

A uniform set of ``n`` nodes touches a given pair with probability
:math:`p = 1 - \\frac{(N - n)(N - n - 1)}{N (N - 1)}` (eq. S1), so the touched pairs' statistics over
``p`` estimate the whole graph's without bias. With :math:`\\rho_t = (t + d)^{-\\kappa}` (Robbins-Monro:
:math:`\\kappa \\in (0.5, 1]`, :math:`d \\ge 0`), the natural-gradient steps of the conjugate factors
(Hoffman, Blei, Wang & Paisley 2013, eq. 37) are (eq. S2):

.. math::

    a_k \\leftarrow (1 - \\rho_t) a_k + \\rho_t(\\tau_a + D^1_k / p), \\quad
    b_k \\leftarrow (1 - \\rho_t) b_k + \\rho_t(\\tau_b + D^0_k / p), \\quad
    \\theta_i \\leftarrow (1 - \\rho_t)\\theta_i + \\rho_t(\\alpha E[\\beta] + N_i) \\;\\; (i \\in S),

with :math:`D^1, D^0` the diagonal masses and :math:`N_i` node ``i``'s role counts over all its pairs
(exact: every pair of a sampled node is touched). Each target is the closed-form coordinate update of
eq. G1 of ``pyro_memo.posterior.relational`` for the estimated statistics, so with
:math:`\\rho_t = 1` and ``S`` all nodes a step *is* that update. The top-level sticks (non-conjugate)
take the convex step toward those optimal for the new memberships
(``optimize_sticks()``, as
:class:`~pyro_memo.topics.stochastic_hdp.StochasticHDP` does); the memberships of every node are
global, so :math:`\\sum_i E\\log\\pi_i` is exact.

Pruning (Kim et al. 2013 prune communities whose top-level weight becomes negligible): after the
first pass, a community whose expected weight :math:`E[\\beta_k]` falls below ``prune_threshold``
(default :data:`PRUNE_THRESHOLD` = 1e-3) is removed; its membership mass joins the tail (the
Dirichlet's aggregation property keeps each :math:`q(\\pi_i)` exact) and its stick weight the tail's.

a-MMSB (Gopalan et al. 2012): memberships :math:`\\pi_i \\sim \\mathrm{Dir}(\\alpha 1_K)` with ``K``
fixed, no top level and no pruning; the same loop with target :math:`\\alpha + N_i`
(:class:`StochasticAMMSB`, :class:`~pyro_memo.relational.stochastic.AMMSBPosterior`).
"""

import math

import numpy as np
import torch

from ..allocation.hdp_sticks import expected_beta, optimize_sticks, rho_from_weights
from ..checks import as_count, as_positive_float, as_positive_int, check_own_batch_count
from ..data.batches import random_parts
from ..data.graphs import Graph
from ..engine import StochasticDriver
from ..engine.driver import as_float_dtype
from ..families._special import kl_beta
from ..posterior.hdp import expected_log_dirichlet, log_dirichlet_norm
from ..posterior.relational import RelationalPosterior, check_hyperparameters
from .initialization import initial_memberships
from .memoized_relational import NodeBatches

__all__ = ["PRUNE_THRESHOLD", "AMMSBPosterior", "StochasticAMMSB", "StochasticRelational", "touch_probability"]

#: default top-level weight below which the stochastic HDP relational algorithm prunes a community
PRUNE_THRESHOLD = 1e-3


def touch_probability(N, n):
    """Probability that a uniform set of ``n`` of ``N`` nodes holds either node of a given pair (eq. S1)."""
    return 1.0 - (N - n) * (N - n - 1) / (N * (N - 1))


def _relabel(pairs, rank):
    """``pairs`` ``(M, 2)`` under the node relabelling ``rank``, each row as ``(min, max)``."""
    p = rank[pairs]
    return torch.stack([p.min(1).values, p.max(1).values], 1)


class AMMSBPosterior(RelationalPosterior):
    """The a-MMSB's globals (Gopalan et al. 2012): ``q(pi_i) = Dir(theta_i)`` over ``K`` communities
    (no tail, no sticks) under a symmetric ``Dir(alpha)`` prior, and ``q(w_k) = Beta(a_k, b_k)``; the
    local step, :meth:`~pyro_memo.relational.RelationalPosterior.memberships` and
    :meth:`~pyro_memo.relational.RelationalPosterior.link_probability` are the HDP relational posterior's."""

    def __init__(self, theta, w_a, w_b, alpha, tau=(1.0, 1.0), eps=1e-4):
        super().__init__(theta, None, None, w_a, w_b, alpha, 1.0, tau, eps)

    @property
    def K(self):
        return self.theta.shape[1]

    def expected_beta(self):
        """Mean membership per community, then a zero tail (there is no top level): ``(K + 1,)``."""
        return torch.cat([self.memberships().mean(0), self.theta.new_zeros(1)])

    def updated(self, summary):
        """Closed-form coordinate update: :math:`\\theta_i = \\alpha + N_i`, :math:`a = \\tau_a + D^1`,
        :math:`b = \\tau_b + D^0`."""
        return AMMSBPosterior(self.alpha + summary.role_counts.T, self.tau[0] + summary.link_diag,
                              self.tau[1] + summary.nonlink_diag, self.alpha, self.tau, self.eps)

    def elbo_terms(self, summary):
        e_log_pi, K, a = self.e_log_pi, self.K, float(self.alpha)
        prior = self.N * (math.lgamma(K * a) - K * math.lgamma(a))
        return {"pairs": self.pair_terms(summary),
                "memberships": prior + ((a - self.theta) * e_log_pi).sum() - log_dirichlet_norm(self.theta).sum(),
                "links": -kl_beta(self.w_a, self.w_b, torch.full_like(self.w_a, self.tau[0]),
                                  torch.full_like(self.w_b, self.tau[1])).sum()}

    def _rows(self, order):
        return AMMSBPosterior(self.theta[order], self.w_a, self.w_b, self.alpha, self.tau, self.eps)

    def state_dict(self):
        """Memberships, links and hyperparameters (no sticks: the relational posterior's would read them)."""
        return {"theta": self.theta.cpu(), "w_a": self.w_a.cpu(), "w_b": self.w_b.cpu(), "alpha": float(self.alpha),
                "tau": list(self.tau), "eps": self.eps}

    @classmethod
    def from_state_dict(cls, d, device=None):
        """The inverse of :meth:`state_dict`."""
        return cls(*(d[k].to(device) for k in ("theta", "w_a", "w_b")), d["alpha"], tuple(d["tau"]), d["eps"])

    def to(self, dtype=None, device=None):
        return AMMSBPosterior(*(t.to(dtype=dtype, device=device) for t in (self.theta, self.w_a, self.w_b)),
                              self.alpha, self.tau, self.eps)


def _rows(post, order):
    """``post`` with its nodes' rows in ``order`` (the globals shared)."""
    if isinstance(post, AMMSBPosterior):
        return post._rows(order)
    view = RelationalPosterior(post.theta[order], post.rho, post.omega, post.w_a, post.w_b, post.alpha, post.gamma,
                               post.tau, post.eps)
    view._e_log_pi = post.e_log_pi[order]
    return view


class StochasticRelational(StochasticDriver):
    """The stochastic HDP relational algorithm (Kim et al. 2013; module docstring, eqs. S1, S2).

    :param int K: initial truncation (communities; pruning may lower it).
    :param float kappa: step-size decay in (0.5, 1]; ``delay``: :math:`d \\ge 0`; step ``t = 1, 2, ...``
        has size :math:`(t + d)^{-\\kappa}`.
    :param float prune_threshold: communities whose :math:`E[\\beta_k]` falls below it after the first
        pass are removed (0: never prune).
    :param int nonlink_iters: block rounds of the non-linked factors per step (eq. R5; 0: mean field).
    :param str init: ``"spectral"`` (as :class:`~pyro_memo.relational.MemoizedRelational`) or ``"random"``.

    ``alpha``, ``gamma``, ``tau``, ``eps``, ``laps``, ``seed``, ``dtype``, ``device`` are as in
    :class:`~pyro_memo.relational.MemoizedRelational`. ``fit(graph, batches)`` takes ``batches`` steps
    per pass, each on a fresh uniform set of ``ceil(N / batches)`` nodes. With ``score`` the exact bound
    of the globals (all pairs' local step recomputed) is logged after each pass, outside the timing.

    :param int threads: the most intra-op threads of the local steps; each fit times one against this many
        and keeps the faster (:class:`~pyro_memo.engine.ThreadPolicy`). ``None``: torch's setting.
    """

    top_level = True
    #: the class of this driver's globals (``nonlinks="free"``)
    posterior_class = RelationalPosterior

    def __init__(self, K=10, kappa=0.6, delay=10.0, alpha=1.0, gamma=5.0, tau=(1.0, 1.0), eps=1e-4,
                 prune_threshold=PRUNE_THRESHOLD, nonlink_iters=5, laps=50, seed=0, dtype=torch.float64, device=None,
                 init="spectral", score=True, threads=None):
        K = as_positive_int(K, "K")
        if not 0.5 < as_positive_float(kappa, "kappa") <= 1.0:
            raise ValueError(f"kappa must lie in (0.5, 1] (Robbins-Monro); got {kappa}")
        check_hyperparameters(alpha, gamma, tau, eps)
        if not 0 <= float(prune_threshold) < 1:
            raise ValueError(f"prune_threshold must lie in [0, 1); got {prune_threshold}")
        if init not in ("spectral", "random"):
            raise ValueError(f"init must be 'spectral' or 'random'; got {init!r}")
        super().__init__(laps=laps, kappa=kappa, delay=delay, seed=seed, score=score, threads=threads)
        self.K, self.alpha, self.gamma, self.eps = int(K), float(alpha), float(gamma), float(eps)
        self.tau, self.prune_threshold = (float(tau[0]), float(tau[1])), float(prune_threshold)
        self.nonlink_iters = as_count(nonlink_iters, "nonlink_iters")
        self.dtype, self.device, self.init = as_float_dtype(dtype), device, init

    # ------------------------------------------------------------ sampling
    def make_source(self, data, num_batches):
        """The graph's links and unobserved pairs as tensors; ``num_batches`` steps per pass."""
        if not isinstance(data, (Graph, NodeBatches)):
            raise ValueError(f"fit needs a pyro_memo.data.Graph; got {type(data).__name__}")
        if isinstance(data, NodeBatches):
            check_own_batch_count(data, num_batches)
        else:
            if data.num_nodes < 2:
                raise ValueError(f"a relational model needs at least 2 nodes; the graph has {data.num_nodes}")
            parts = random_parts(data.num_nodes, 1 if num_batches is None else num_batches, self.seed)  # 0 is no 1
            data = NodeBatches(data, parts, self.device)
        self._sampler, self._steps_per_pass = np.random.default_rng([self.seed, 1]), data.num_batches
        return data

    def read_batch(self, source, b):
        """A fresh uniform set of ``ceil(N / batches)`` nodes (``b`` only counts the steps): the sorted ids."""
        N = source.num_items
        n = -(-N // source.num_batches)
        return source, np.sort(self._sampler.choice(N, size=n, replace=False))

    def resumed(self, state, source):
        """The node sampler draws on past a resumed ``state``'s ``steps`` draws (drawn again and dropped), so a
        resumed fit visits the nodes an uninterrupted one would."""
        for b in range(state.steps):
            self.read_batch(source, b)

    def resume_mismatch(self, posterior, source):
        """A stochastic relational fit goes on from a posterior of its own kind (``posterior_class``) of a
        graph of as many nodes."""
        kind = self.posterior_class
        if type(posterior) is not kind:
            return f"it holds a {type(posterior).__name__}, not a {kind.__name__}"
        if posterior.N != source.num_items:
            return f"it was fitted to a graph of {posterior.N} nodes, this one has {source.num_items}"
        return None

    def initial_posterior(self, source, order=None):
        m = initial_memberships(source.graph, self.K, self.init, self.seed, self.dtype, self.device)
        return RelationalPosterior.from_memberships(m, self.alpha, self.gamma, self.tau, self.eps, scale=1.0)

    # ------------------------------------------------------------ local step
    def fresh_local_step(self, posterior, batch):
        """The local factors of every pair touching the sampled nodes (module docstring): nodes relabelled
        sampled-first, then the pairs whose smaller node is sampled. The summary's ``extras`` hold the
        sampled ``nodes``, their ``roles`` ``(n, K)`` over all their pairs and the touch probability ``p``."""
        source, nodes = batch
        N, n = source.num_items, len(nodes)
        chosen = torch.zeros(N, dtype=torch.bool, device=source.edges.device)
        chosen[torch.as_tensor(nodes, device=chosen.device)] = True
        order = torch.cat([torch.nonzero(chosen).ravel(), torch.nonzero(~chosen).ravel()])
        rank = torch.empty_like(order)
        rank[order] = torch.arange(N, device=order.device)
        sources = torch.arange(N, device=order.device) < n
        local, summary = _rows(posterior, order).local_step(_relabel(source.edges, rank), sources, None,
                                                            self.nonlink_iters, _relabel(source.missing, rank))
        summary.extras = {"nodes": order[:n], "roles": summary.role_counts[:, :n].T, "p": touch_probability(N, n)}
        return local, summary

    def exact_objective(self, posterior, source):
        """The exact bound of ``posterior``'s globals: every pair's local step recomputed, in one batch."""
        everyone = torch.ones(source.num_items, dtype=torch.bool, device=source.edges.device)
        _, summary = posterior.local_step(source.edges, everyone, None, self.nonlink_iters, source.missing)
        return float(posterior.elbo(summary)), summary

    # ------------------------------------------------------------ global step
    def membership_target(self, post, roles):
        """:math:`\\alpha E[\\beta] + N_i` (the tail :math:`\\alpha E[\\beta_{K+1}]`), ``(n, K + 1)``."""
        prior = post.alpha * expected_beta(post.rho)
        return torch.cat([prior[:-1] + roles, prior[-1:].expand(roles.shape[0], 1)], 1)

    def step(self, state, summary, scale, rate):
        """Eq. S2 with step ``rate``; the engine's ``scale`` (nodes per sampled node) is replaced by the
        pairs' ``1 / p`` (eq. S1). Then the sticks' convex step and, after the first pass, pruning."""
        post, extras = state.posterior, summary.extras
        theta = post.theta.clone()
        nodes = extras["nodes"]
        theta[nodes] = (1 - rate) * theta[nodes] + rate * self.membership_target(post, extras["roles"])
        w_a = (1 - rate) * post.w_a + rate * (post.tau[0] + summary.link_diag / extras["p"])
        w_b = (1 - rate) * post.w_b + rate * (post.tau[1] + summary.nonlink_diag / extras["p"])
        state.posterior = self.with_globals(post, theta, w_a, w_b, rate)
        if self.top_level and self.prune_threshold > 0 and state.steps > self._steps_per_pass:
            state.posterior = prune(state.posterior, self.prune_threshold)

    def with_globals(self, post, theta, w_a, w_b, rate):
        """The new posterior: memberships and links given, the sticks a step ``rate`` toward their optimum
        for the new memberships."""
        e_log_pi = expected_log_dirichlet(theta)
        rho, omega = optimize_sticks(post.rho, post.omega, post.N, e_log_pi.sum(0), post.alpha, post.gamma)
        new = RelationalPosterior(theta, (1 - rate) * post.rho + rate * rho, (1 - rate) * post.omega + rate * omega,
                                  w_a, w_b, post.alpha, post.gamma, post.tau, post.eps)
        new._e_log_pi = e_log_pi
        return new


def prune(post, threshold):
    """``post`` without the communities whose :math:`E[\\beta_k]` is below ``threshold`` (the largest
    one always kept): their memberships' Dirichlet mass and their stick weight join the tail."""
    K = post.K
    weights = expected_beta(post.rho)
    keep = weights[:K] >= threshold
    keep[int(weights[:K].argmax())] = True
    if bool(keep.all()):
        return post
    drop = torch.cat([~keep, keep.new_ones(1)])  # what the new tail gathers
    theta = torch.cat([post.theta[:, :K][:, keep], post.theta[:, drop].sum(1, keepdim=True)], 1)
    rho = rho_from_weights(torch.cat([weights[:K][keep], weights[drop].sum().reshape(1)]))
    return RelationalPosterior(theta, rho, post.omega[keep], post.w_a[keep], post.w_b[keep], post.alpha, post.gamma,
                               post.tau, post.eps)


class StochasticAMMSB(StochasticRelational):
    """Fixed-K stochastic a-MMSB (Gopalan et al. 2012): :class:`StochasticRelational`'s loop with
    memberships under a symmetric ``Dir(alpha)`` prior (default ``alpha = 1 / K``), no top level and no
    pruning; returns an :class:`~pyro_memo.relational.stochastic.AMMSBPosterior`."""

    top_level = False
    posterior_class = AMMSBPosterior

    def __init__(self, K=10, kappa=0.6, delay=10.0, alpha=None, tau=(1.0, 1.0), eps=1e-4, nonlink_iters=5, laps=50,
                 seed=0, dtype=torch.float64, device=None, init="spectral", score=True, threads=None):
        alpha = 1.0 / max(int(K), 1) if alpha is None else alpha
        super().__init__(K, kappa, delay, alpha, 1.0, tau, eps, 0.0, nonlink_iters, laps, seed, dtype, device, init,
                         score, threads)

    def initial_posterior(self, source, order=None):
        m = initial_memberships(source.graph, self.K, self.init, self.seed, self.dtype, self.device)
        ones = m.new_ones(self.K)
        return AMMSBPosterior(self.alpha + m, self.tau[0] * ones, self.tau[1] * ones, self.alpha, self.tau, self.eps)

    def membership_target(self, post, roles):
        """:math:`\\alpha + N_i`, ``(n, K)``."""
        return post.alpha + roles

    def with_globals(self, post, theta, w_a, w_b, rate):
        return AMMSBPosterior(theta, w_a, w_b, post.alpha, post.tau, post.eps)
