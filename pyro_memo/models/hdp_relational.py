"""The assortative HDP relational model written as an ordinary Pyro program, and the guide of a
fitted :class:`~pyro_memo.relational.MemoizedRelational` (its posterior and, for ``nonlinks="free"``,
the batches' non-linked factors)."""

import math

import pyro
import pyro.distributions as dist
import torch
from pyro.ops.indexing import Vindex

from ..allocation import stick_breaking_weights
from ..checks import as_index_tensor, as_positive_int
from ..posterior.relational import check_hyperparameters

__all__ = ["HDPRelationalGuide", "HDPRelationalModel", "sample_pair_roles"]


def _pairs(src, dst, num_nodes):
    src, dst = as_index_tensor(src, num_nodes, "src"), as_index_tensor(dst, num_nodes, "dst")
    if src.shape != dst.shape or src.dim() != 1:
        raise ValueError(f"src and dst must be 1-D long tensors of one length; got {tuple(src.shape)} and "
                         f"{tuple(dst.shape)}")
    return src, dst


def _links(y, src):
    """The observed links ``y`` as float64 0/1 on ``src``'s device (integer or bool links read as such;
    ``Bernoulli`` takes floats), one per pair; ``None`` stays ``None`` (links to generate)."""
    if y is None:
        return None
    y = torch.as_tensor(y, device=src.device)
    if y.shape != src.shape:
        raise ValueError(f"y must hold one link per pair, shape {tuple(src.shape)}; got {tuple(y.shape)}")
    return y.to(torch.float64)


class HDPRelationalModel:
    """The assortative HDP relational model (Kim, Gopalan, Blei & Sudderth, "Efficient online inference
    for Bayesian nonparametric relational models", NIPS 2013), the HDP extension of the assortative
    mixed-membership stochastic blockmodel (Gopalan, Mimno, Gerrish, Freedman & Blei, "Scalable
    inference of overlapping communities", NIPS 2012).

    ``K`` top-level sticks :math:`u_k \\sim \\mathrm{Beta}(1, \\gamma)` give global weights
    :math:`\\beta` over ``K + 1`` entries (the last the tail beyond the truncation); each node's
    memberships :math:`\\pi_i \\sim \\mathrm{Dir}(\\alpha\\beta)`; each community's link probability
    :math:`w_k \\sim \\mathrm{Beta}(\\tau_a, \\tau_b)`; and for each unordered pair :math:`i < j`, roles
    :math:`s_{ij} \\sim \\mathrm{Cat}(\\pi_i)`, :math:`r_{ij} \\sim \\mathrm{Cat}(\\pi_j)` and a link
    :math:`y_{ij} \\sim \\mathrm{Bern}(w_k)` if :math:`s_{ij} = r_{ij} = k \\le K`, else
    :math:`\\mathrm{Bern}(\\epsilon)`. Two roles in the tail entry (which lumps together the
    infinitely many communities beyond ``K``) link with the background probability :math:`\\epsilon`;
    a guide with nested truncation (:class:`HDPRelationalGuide`) puts no mass there.

    :param int N: number of nodes.
    :param int K: truncation (number of explicit communities).
    :param float alpha: membership concentration; ``gamma``: top-level concentration.
    :param tau: ``(tau_a, tau_b)``, the link probabilities' Beta prior.
    :param float eps: background link probability, in (0, 1).
    """

    def __init__(self, N, K, alpha=1.0, gamma=5.0, tau=(1.0, 1.0), eps=1e-4):
        if as_positive_int(N, "N") < 2:
            raise ValueError(f"N must be at least 2; got N={N}")
        as_positive_int(K, "K")
        check_hyperparameters(alpha, gamma, tau, eps)
        self.N, self.K = int(N), int(K)
        self.alpha, self.gamma = float(alpha), float(gamma)
        self.tau, self.eps = (float(tau[0]), float(tau[1])), float(eps)

    def __call__(self, src, dst, y=None, batch=None):
        """Run the model on the pairs ``(src[e], dst[e])`` (each unordered pair at most once; every
        pair for the full model, a pair left out is unobserved), ``y`` ``(E,)`` their observed links
        as floats 0/1 (``None`` to generate). ``batch``: the positions of a batch's pairs, the pair
        plate's subsample (:func:`~pyro_memo.batch_pairs` gives a batch
        of nodes' pairs; default every pair). Returns the batch's links. The model runs on ``src``'s device."""
        src, dst = _pairs(src, dst, self.N)
        if not len(src):
            raise ValueError("src and dst list no pairs; the model needs at least one pair of nodes")
        y = _links(y, src)
        one = torch.ones((), dtype=torch.float64, device=src.device)
        with pyro.plate("sticks", self.K):
            u = pyro.sample("u", dist.Beta(one, self.gamma * one))
        beta = stick_breaking_weights(u)  # (..., K + 1)
        with pyro.plate("nodes", self.N):
            pi = pyro.sample("pi", dist.Dirichlet(self.alpha * beta.unsqueeze(-2)))  # (..., N, K + 1)
        with pyro.plate("communities", self.K):
            w = pyro.sample("w", dist.Beta(self.tau[0] * one, self.tau[1] * one))  # (..., K)
        w_tail = torch.cat([w, torch.full_like(w[..., :1], self.eps)], -1)  # the tail links at eps
        with pyro.plate("pairs", len(src), subsample=batch) as idx:
            s = pyro.sample("s", dist.Categorical(pi[..., src[idx], :]))
            r = pyro.sample("r", dist.Categorical(pi[..., dst[idx], :]))
            p = torch.where(s == r, Vindex(w_tail.unsqueeze(-2))[..., s], torch.full_like(w_tail[..., :1], self.eps))
            return pyro.sample("y", dist.Bernoulli(p), obs=None if y is None else y[idx])


class HDPRelationalGuide:
    """The variational distribution of a memoized relational fit as a Pyro guide for
    :class:`HDPRelationalModel` (same signature):
    ``q(u_k) = Beta(rho_k omega_k, (1 - rho_k) omega_k)``, ``q(pi_i) = Dir(theta_i)``,
    ``q(w_k) = Beta(a_k, b_k)``, and per pair ``(i, j)`` a joint ``q(s, r)`` with no mass on the tail
    role: a linked pair's structured factor (eq. R1 of ``pyro_memo.posterior.relational_pairs``)
    at its optimum under the posterior's globals; a non-linked pair's roles drawn from the sampled
    memberships renormalised over the explicit communities, :math:`\\tilde\\pi_i \\otimes \\tilde\\pi_j`
    (eq. T1 of ``pyro_memo.posterior.relational_tied``, the default family), or, for a fit with
    ``nonlinks="free"``, the product ``m_i (x) m_bar_j`` of the batch ``b`` whose sources hold ``i``
    (eq. R2). ``s`` is drawn from its marginal, then ``r`` from ``q(r | s)``.

    :param posterior: the fit's posterior (a
        :class:`~pyro_memo.posterior.relational_tied.TiedRelationalPosterior` or a
        :class:`~pyro_memo.posterior.relational.RelationalPosterior`).
    :param factors: ``nonlinks="free"`` only: the batches' non-linked factors, ``factors[b]`` is
        ``(m, m_bar)`` (or a ``(2, N, K)`` tensor), e.g. ``fit.state.warm_starts``.
    :param masks: ``nonlinks="free"`` only: the batches' ``(N,)`` bool source masks
        (``NodeBatches.masks``); every node is a source of exactly one batch.
    """

    def __init__(self, posterior, factors=None, masks=None):
        self.posterior = posterior
        self.tied = factors is None
        if self.tied:
            if not hasattr(posterior, "pairs"):
                raise ValueError("a fit with nonlinks='free' needs its batches' factors and masks")
            return
        masks = torch.stack([torch.as_tensor(m, dtype=torch.bool) for m in masks])  # (B, N)
        if masks.shape[1] != posterior.N or not bool((masks.sum(0) == 1).all()):
            raise ValueError("masks must be (N,) bool masks under which every node is a source of exactly one batch")
        self.batch_of = masks.to(torch.long).argmax(0)  # (N,)
        self.m = torch.stack([torch.as_tensor(factors[b][0]) for b in range(len(masks))])  # (B, N, K)
        self.m_bar = torch.stack([torch.as_tensor(factors[b][1]) for b in range(len(masks))])
        if self.m.shape[1:] != (posterior.N, posterior.K):
            raise ValueError(f"each batch's factors must be (N, K) = ({posterior.N}, {posterior.K}); got "
                             f"{tuple(self.m.shape[1:])}")

    def pair_table(self, src, dst, y, pi=None):
        """``(..., E, K, K)`` the joint ``q(s = k, r = l)`` of each pair over the explicit communities;
        ``pi`` ``(..., N, K + 1)`` sampled memberships (the tied family's non-linked pairs; default
        their means)."""
        src, dst = _pairs(src, dst, self.posterior.N)
        post = self.posterior
        e_log_pi = post.e_log_pi[:, : post.K]
        e_log_w, _ = post.e_log_w()
        K = post.K
        g = torch.full((K, K), math.log(post.eps), dtype=e_log_pi.dtype, device=e_log_pi.device)
        g = g + torch.diag(e_log_w - math.log(post.eps))  # eq. R1: E log w_k on the diagonal, log eps off it
        logits = e_log_pi[src][:, :, None] + e_log_pi[dst][:, None, :] + g
        linked = torch.softmax(logits.reshape(len(src), K * K), -1).reshape(len(src), K, K)
        if self.tied:  # eq. T1
            explicit = (post.theta if pi is None else pi)[..., :K]
            tilde = explicit / explicit.sum(-1, keepdim=True)
            nonlinked = tilde[..., src, :, None] * tilde[..., dst, None, :]
        else:  # eq. R2
            b = self.batch_of[src]
            nonlinked = self.m[b, src][:, :, None] * self.m_bar[b, dst][:, None, :]
        return torch.where(torch.as_tensor(y).to(torch.bool)[:, None, None], linked, nonlinked.to(linked.dtype))

    def __call__(self, src, dst, y=None):
        if y is None:
            raise ValueError("the guide of a fitted relational model needs the observed links y")
        post = self.posterior
        with pyro.plate("sticks", post.K):
            pyro.sample("u", dist.Beta(post.rho * post.omega, (1 - post.rho) * post.omega))
        with pyro.plate("nodes", post.N):
            pi = pyro.sample("pi", dist.Dirichlet(post.theta))
        with pyro.plate("communities", post.K):
            pyro.sample("w", dist.Beta(post.w_a, post.w_b))
        table = self.pair_table(src, dst, y, pi)  # (..., E, K, K)
        with pyro.plate("pairs", table.shape[-3]):
            sample_pair_roles(table, "s", "r")


def sample_pair_roles(table, source_site, receiver_site):
    """Inside the pair plate, the roles of each pair from its joint ``q(s, r)`` over the explicit
    communities, ``table`` ``(..., E, K, K)``, extended by a tail role with no mass: ``s`` from its
    marginal, then ``r`` from ``q(r | s)``. At an ``s`` of probability 0 (the tail role, which
    ``TraceEnum_ELBO`` visits when ``s`` is enumerated) ``q(r | s)`` is 0/0; it carries no weight, and
    ``r`` is drawn uniformly there so that its distribution stays valid (not NaN). Returns ``(s, r)``."""
    table = torch.nn.functional.pad(table, (0, 1, 0, 1))  # no mass on the tail role
    s = pyro.sample(source_site, dist.Categorical(table.sum(-1)))
    row = Vindex(table)[..., s, :]  # (..., E, K + 1): the pair axis is a batch axis of the table
    total = row.sum(-1, keepdim=True)
    some = total > 0
    probs = torch.where(some, row / torch.where(some, total, torch.ones_like(total)),
                        torch.full_like(row, 1.0 / row.shape[-1]))
    r = pyro.sample(receiver_site, dist.Categorical(probs))
    return s, r
