"""Clumps: items tied to share one assignment distribution (Gomes, Welling & Perona 2008, §2.3), the memory of
memory-bounded variational inference.

A clump :math:`c` of :math:`N_c` items keeps only their summed sufficient statistics :math:`\\Phi^c`, and its
items share one :math:`q(z_c)`. The memory holds clumps and *singlets*, items kept as they are. For a DP
mixture the tied bound is the ELBO (Hughes & Sudderth 2013, eq. 8) with every clump's items constrained to one
:math:`q(z_c)`; its optimum over :math:`q(z_c)` is (Gomes et al. 2008, eq. 21 without document groups)

.. math:: \\log q_{ck} = E[\\log w_k] + \\tfrac{1}{N_c} L_{ck} + \\text{const}, \\qquad
          L_{ck} = \\sum_{n \\in c} E[\\log p(x_n \\mid \\phi_k)] = f_k(N_c, \\Phi^c),

where :math:`f_k` is the family's expected log-likelihood of statistics, linear in :math:`(N_c, \\Phi^c)` (an
exponential family's :math:`\\langle E[\\eta_k], \\Phi\\rangle - N E[A(\\eta_k)]`), so :math:`L` is one matrix
product whose coefficients :func:`stats_log_lik` reads off by differentiating :math:`f` once. The clumps'
summary has counts :math:`\\sum_c q_{ck} N_c`, statistics :math:`\\sum_c q_{ck}\\Phi^c` and entropy
:math:`-\\sum_c N_c \\sum_k q_{ck}\\log q_{ck}`; a singlet is a clump of one item, so with no clumps the tied
bound is the ELBO itself, and tying being a constraint, it never exceeds the untied optimum.

Memory is counted as Gomes et al. count it (eq. 26, with no document groups): a clump stores its count and
statistics (``1 + S`` numbers, :math:`(d^2 + 3d)/2 + 1` for a full-covariance Gaussian), a singlet its
:math:`d` numbers.
"""

import math
from dataclasses import dataclass

import torch

from ..families._sparse import drop_underflow
from ..summaries import Summary, entropy_per_component


def log_lik_coefficients(family, component, stats):
    """The coefficients of :math:`f_k(N, \\Phi) = N a_k + \\langle \\Phi, B_k\\rangle`, the family's expected
    log-likelihood of statistics (module docstring), read off by differentiating
    :meth:`~pyro_memo.ConjugateFamily.expected_log_lik_from_stats` once at zero statistics: ``(a, B)``
    with ``a`` ``(K,)`` (``None`` for a family whose term does not depend on the count, the multinomial) and
    ``B`` ``(K, F)``, the statistics' coefficients flattened in the order of ``stats``' keys (:func:`flat_stats`).

    :raises ValueError: if the family's term is not linear in the statistics (it cannot tie items)."""
    K = next(iter(component.values())).shape[0]
    template = next(iter(stats.values()))
    dtype, device = template.dtype, template.device
    with torch.enable_grad():
        zero_counts = torch.zeros(K, dtype=dtype, device=device, requires_grad=True)
        zero_stats = {name: torch.zeros((K,) + s.shape[1:], dtype=dtype, device=device, requires_grad=True)
                      for name, s in stats.items()}
        value = family.expected_log_lik_from_stats(zero_counts, zero_stats, component)
        grads = torch.autograd.grad(value.sum(), [zero_counts, *zero_stats.values()], allow_unused=True)
    if bool(value.detach().abs().max() > 0):
        raise ValueError(f"the {family.name} family's expected log-likelihood of statistics is not linear in them "
                         f"(it is {value.detach().abs().max():.3g} at zero statistics); it cannot tie items")
    parts = [torch.zeros_like(z).reshape(K, -1) if g is None else g.reshape(K, -1)
             for z, g in zip(zero_stats.values(), grads[1:], strict=True)]
    return grads[0], torch.cat(parts, 1)


def flat_stats(stats):
    """Statistics (dict of ``(C, ...)``) as one ``(C, F)`` matrix, keys in order."""
    return torch.cat([s.reshape(len(s), math.prod(s.shape[1:])) for s in stats.values()], 1)


def item_stats(family, x):
    """Every item's own statistics, a dict of ``(N, ...)`` tensors summing to ``family.stats(x, ones)``."""
    one = x.new_ones((1, 1))
    return {k: v.squeeze(1) for k, v in torch.func.vmap(lambda row: family.stats(row[None], one))(x).items()}


def stats_log_lik(family, component, counts, stats):
    """:math:`L_{ck} = f_k(N_c, \\Phi^c)`: the expected log-likelihood of every clump's items under every
    component, ``(C, K)``, for clump ``counts`` ``(C,)`` and statistics ``stats`` (dict of ``(C, ...)``), one
    matrix product with the :func:`log_lik_coefficients`."""
    a, B = log_lik_coefficients(family, component, stats)
    out = flat_stats(stats) @ B.T
    return out if a is None else out + counts[:, None] * a[None, :]


@dataclass
class Clumps:
    """Tied items: ``counts`` ``(C,)`` items per clump, ``stats`` the family's statistics summed over each
    clump's items (dict of ``(C, ...)``), and ``points`` ``(S, D)`` singlets kept as they are."""

    counts: torch.Tensor
    stats: dict
    points: torch.Tensor

    @classmethod
    def of_points(cls, family, x):
        """Singlets only: the items ``x`` as they are."""
        x = family.check_data(x)
        empty = Summary.zeros(family, 0)
        return cls(empty.counts, empty.stats, x)

    @classmethod
    def from_groups(cls, family, x, groups, num_groups):
        """The items ``x`` summed into ``num_groups`` clumps by their group index ``groups`` ``(N,)``
        (clump statistics are exact sums of their items' statistics)."""
        onehot = torch.zeros((len(x), num_groups), dtype=x.dtype, device=x.device)
        onehot[torch.arange(len(x), device=x.device), groups] = 1.0
        summary = Summary.from_responsibilities(family, x, onehot)
        return cls(summary.counts, summary.stats, x[:0])

    @property
    def num_clumps(self):
        return int(self.counts.shape[0])

    @property
    def num_singlets(self):
        return int(self.points.shape[0])

    @property
    def num_items(self):
        """Items summarised: the clumps' counts and the singlets."""
        return int(round(float(self.counts.sum()))) + self.num_singlets

    def __len__(self):
        return self.num_clumps + self.num_singlets

    def cat(self, other):
        """These clumps and singlets with ``other``'s."""
        return Clumps(torch.cat([self.counts, other.counts]),
                      {k: torch.cat([v, other.stats[k]]) for k, v in self.stats.items()},
                      torch.cat([self.points, other.points]))

    def clump_cost(self):
        """Numbers one clump stores: its count and its statistics (:func:`clump_size`)."""
        return clump_size(self.stats)

    def memory(self):
        """Stored numbers (Gomes et al. 2008, eq. 26 with no document groups): ``1 + S`` per clump (its count
        and its ``S`` statistics), ``D`` per singlet."""
        return self.num_clumps * self.clump_cost() + self.points.numel()

    def from_leaves(self, units, leaves):
        """The memory of a compression's final partition of these clumps' ``units``
        (:class:`~pyro_memo.memo.compression.Units`), ``leaves`` lists of unit indices: a leaf that costs its
        singlets keeps them (``units.as_singlets``), any other becomes one clump with the summed count and
        statistics of its units, in the order of ``leaves``."""
        stored, kept = self._partition(units, leaves)
        device = self.counts.device
        labels = torch.repeat_interleave(torch.arange(len(stored), device=device),
                                         torch.tensor([len(leaves[i]) for i in stored], device=device))
        counts, flat = units.sums(labels, len(stored), torch.cat([leaves[i] for i in stored]) if stored else
                                  torch.zeros(0, dtype=torch.long, device=device))
        points = [leaves[i] - units.first_singlet for i in kept]
        return Clumps(counts, units.unflatten(flat), self.points[torch.cat(points)] if points else self.points[:0])

    @staticmethod
    def _partition(units, leaves):
        """Positions in ``leaves`` of the leaves stored as clumps and of those kept as singlets."""
        singlets = [units.as_singlets(leaf) for leaf in leaves]
        return [i for i, s in enumerate(singlets) if not s], [i for i, s in enumerate(singlets) if s]

    def tied_local_step(self, posterior, summarize=True):
        """:func:`tied_local_step` of this memory under the DP mixture's globals ``posterior`` (its summary
        ``None`` with ``summarize=False``)."""
        return tied_local_step(posterior, self) if summarize else (tied_responsibilities(posterior, self), None)


def clump_size(stats):
    """Numbers one clump stores: its count and its statistics (one item's worth of ``stats``)."""
    return 1 + sum(math.prod(s.shape[1:]) for s in stats.values())


def tied_responsibilities(posterior, clumps):
    """The optimal tied :math:`q(z_c)` of every clump, ``(C, K)`` (module docstring), and the optimal
    :math:`q(z_n)` of every singlet, ``(S, K)`` (Hughes & Sudderth 2013, eq. 9)."""
    e_log_w = posterior.sticks.expected_log_weights(posterior.eta1, posterior.eta0)
    if clumps.num_clumps:
        log_lik = stats_log_lik(posterior.family, posterior.component, clumps.counts, clumps.stats)
        clump_resp = drop_underflow(torch.softmax(e_log_w + log_lik / clumps.counts[:, None], dim=-1))
    else:
        clump_resp = clumps.counts.new_zeros((0, posterior.K))
    point_resp = posterior.responsibilities(clumps.points) if clumps.num_singlets else \
        clumps.points.new_zeros((0, posterior.K))
    return clump_resp, point_resp


def tied_summary(family, clumps, clump_resp, point_resp):
    """The summary of ``clumps`` under tied responsibilities (module docstring): an ordinary
    :class:`~pyro_memo.Summary`, so the tied bound is the model's ELBO of it."""
    summary = Summary.from_responsibilities(family, clumps.points, point_resp)
    if not clumps.num_clumps:
        return summary
    weighted = clump_resp * clumps.counts[:, None]
    stats = {k: (clump_resp.T @ v.reshape(len(v), -1)).reshape((clump_resp.shape[1],) + v.shape[1:])
             for k, v in clumps.stats.items()}
    entropy = entropy_per_component(clump_resp, clumps.counts)
    tied = Summary(weighted.sum(0), stats, entropy, int(round(float(clumps.counts.sum()))))
    return summary + tied


def tied_local_step(posterior, clumps):
    """``((clump_resp, point_resp), summary)``: the optimal tied local factors of ``clumps`` under the
    globals ``posterior`` and their summary."""
    clump_resp, point_resp = tied_responsibilities(posterior, clumps)
    return (clump_resp, point_resp), tied_summary(posterior.family, clumps, clump_resp, point_resp)
