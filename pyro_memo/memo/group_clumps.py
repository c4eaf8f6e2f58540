"""Clumps and document groups of an HDP (Gomes, Welling & Perona 2008, §2.3): the memory of memory-bounded
variational inference over groups of items (images as groups of pixels, documents as groups of tokens).

Two kinds of tying. A clump :math:`c` of :math:`N_c` items, drawn from any groups, keeps its summed statistics
:math:`\\Phi^c` and, per document group :math:`s`, the number :math:`N_{cs}` of its items from that group; its
items share one :math:`q(z_c)`. A *document group* :math:`s` of :math:`D_s` groups shares one
:math:`q(\\pi_s) = \\mathrm{Dir}(\\theta_s)`. Items kept as they are (*singlets*) belong to one document group.

With :math:`N_{sk} = \\sum_c q_{ck} N_{cs} + \\sum_{n \\in s} r_{nk}` (eq. 15), the tied optima are
(eqs. 20-21, in this project's stick parametrisation, :math:`\\alpha E[\\beta_k]` for Gomes et al.'s
:math:`\\alpha_k`)

.. math:: \\theta_{sk} = N_{sk}/D_s + \\alpha E[\\beta_k], \\qquad
          \\log q_{ck} = \\tfrac{1}{N_c} L_{ck} + \\sum_s \\tfrac{N_{cs}}{N_c} E[\\log \\pi_{sk}] + \\text{const},

with :math:`L_{ck}` the clump's expected log-likelihood (:func:`~pyro_memo.memo.clumps.stats_log_lik`), and a
singlet's :math:`\\log r_{nk} = E\\log p(x_n \\mid \\phi_k) + E[\\log\\pi_{sk}]`. The :math:`D_s` groups sharing
:math:`q(\\pi_s)` contribute :math:`D_s` times one group's terms at counts :math:`N_s / D_s`, so the group part
of the bound is

.. math:: \\sum_s \\Big[\\sum_k (N_{sk} - D_s \\theta_{sk}) E\\log\\pi_{sk} - D_s\\, c(\\theta_s)\\Big]

and the top-level sticks see :math:`\\sum_s D_s` groups with :math:`\\sum_s D_s E[\\log \\pi_s]`; with every
:math:`D_s = 1` and no clumps this is the HDP bound itself (:class:`~pyro_memo.posterior.hdp.GroupedHDPPosterior`).

Memory is counted by eq. 26: a clump stores its count, its statistics and its :math:`|S|` group counts, a
singlet its :math:`d` numbers.
"""

from dataclasses import dataclass
from typing import NamedTuple

import torch

from ..families._sparse import drop_underflow
from ..families.base import checked_group
from ..posterior.hdp import expected_log_dirichlet, group_terms
from ..summaries import GroupSummary
from .clumps import Clumps, clump_size, stats_log_lik, tied_summary


@dataclass
class GroupedClumps(Clumps):
    """Clumps and singlets of an HDP's items with their document groups (module docstring).

    :ivar clump_groups: ``(C, S)`` items of each clump per document group, :math:`N_{cs}`.
    :ivar point_groups: ``(P,)`` document group of each singlet.
    :ivar group_sizes: ``(S,)`` groups (documents, images) tied in each document group, :math:`D_s`.
    """

    clump_groups: torch.Tensor = None
    point_groups: torch.Tensor = None
    group_sizes: torch.Tensor = None

    @classmethod
    def of_groups(cls, family, groups, first=0):
        """Singlets only, each group its own document group: ``groups`` a sequence of ``(n_d, D)`` item arrays,
        named in errors about their data as groups ``first``, ``first + 1``, ... (of a stream)."""
        groups = list(groups)
        if not groups:
            raise ValueError("no groups: an epoch of an HDP stream needs at least one group of items")
        empty = [i for i, g in enumerate(groups) if len(g) == 0]
        if empty:
            raise ValueError(f"every group needs at least one item; groups {empty} of this epoch are empty")
        xs = [checked_group(family, g, first + i) for i, g in enumerate(groups)]
        x = torch.cat(xs)
        base = Clumps.of_points(family, x)
        owner = torch.repeat_interleave(torch.arange(len(xs), device=x.device),
                                        torch.tensor([len(g) for g in xs], device=x.device))
        return cls(base.counts, base.stats, x, x.new_zeros((0, len(xs))), owner, x.new_ones(len(xs)))

    @property
    def num_groups(self):
        """Document groups :math:`|S|`."""
        return int(self.group_sizes.shape[0])

    @property
    def num_docs(self):
        """Groups summarised, :math:`\\sum_s D_s`."""
        return int(round(float(self.group_sizes.sum())))

    def clump_cost(self):
        """Numbers one clump stores: its count, statistics and :math:`|S|` group counts (eq. 26)."""
        return clump_size(self.stats) + self.num_groups

    def memory(self):
        """Stored numbers (Gomes et al. 2008, eq. 26): :meth:`clump_cost` per clump, ``D`` per singlet."""
        return self.num_clumps * self.clump_cost() + self.points.numel()

    def cat(self, other):
        """These clumps, singlets and document groups with ``other``'s (whose groups are new)."""
        base = Clumps.cat(self, other)
        S, T = self.num_groups, other.num_groups
        groups = torch.cat([torch.cat([self.clump_groups, self.clump_groups.new_zeros(self.num_clumps, T)], 1),
                            torch.cat([other.clump_groups.new_zeros(other.num_clumps, S), other.clump_groups], 1)])
        return GroupedClumps(base.counts, base.stats, base.points, groups,
                             torch.cat([self.point_groups, other.point_groups + S]),
                             torch.cat([self.group_sizes, other.group_sizes]))

    def unit_group_pairs(self):
        """The items of every unit (clumps ``0 .. C-1``, then singlets) per document group, as ``(unit, group, count)``
        triples of the nonzero entries: each clump's :math:`N_{cs}`, then each singlet's one item in its group."""
        clump, group = torch.nonzero(self.clump_groups, as_tuple=True)
        singlets = torch.arange(self.num_singlets, device=group.device)
        return (torch.cat([clump, self.num_clumps + singlets]), torch.cat([group, self.point_groups]),
                torch.cat([self.clump_groups[clump, group], self.points.new_ones(self.num_singlets)]))

    def from_leaves(self, units, leaves):
        """The memory of a compression's final partition
        (:meth:`Clumps.from_leaves <pyro_memo.memo.clumps.Clumps.from_leaves>`), each new clump's group
        counts the sums of its units' and each kept singlet in its document group."""
        base = Clumps.from_leaves(self, units, leaves)
        stored, kept = self._partition(units, leaves)
        rows = self.clump_groups.new_zeros((len(stored), self.num_groups))
        for row, i in enumerate(stored):
            leaf = leaves[i]
            clumps = leaf[leaf < units.first_singlet]
            singlets = leaf[leaf >= units.first_singlet] - units.first_singlet
            rows[row] = self.clump_groups[clumps].sum(0)
            rows[row].index_add_(0, self.point_groups[singlets], rows.new_ones(len(singlets)))
        points = [self.point_groups[leaves[i] - units.first_singlet] for i in kept]
        return GroupedClumps(base.counts, base.stats, base.points, rows,
                             torch.cat(points) if points else self.point_groups[:0], self.group_sizes.clone())

    def merge_groups(self, keep, drop):
        """Document group ``drop`` tied into ``keep``: its counts and size added to ``keep``'s, its index removed."""
        if keep == drop:
            raise ValueError("cannot merge a document group with itself")
        target = torch.arange(self.num_groups, device=self.point_groups.device)
        target[drop] = keep
        return self.regroup(target - (target > drop).long())

    def regroup(self, target):
        """Document groups tied by ``target`` ``(S,)``, each group's new index (``0 .. S'-1``, every one used):
        counts and sizes of groups sharing an index are added; the singlets keep their order."""
        new = int(target.max()) + 1
        groups = self.clump_groups.new_zeros((self.num_clumps, new)).index_add_(1, target, self.clump_groups)
        sizes = self.group_sizes.new_zeros(new).index_add_(0, target, self.group_sizes)
        return GroupedClumps(self.counts, self.stats, self.points, groups, target[self.point_groups], sizes)

    def sorted_by_group(self):
        """The same memory with its singlets ordered by document group (stably; the tied local step then needs
        no permutation)."""
        order = torch.argsort(self.point_groups, stable=True)
        return GroupedClumps(self.counts, self.stats, self.points[order], self.clump_groups,
                             self.point_groups[order], self.group_sizes)

    def tied_local_step(self, posterior, max_iter=100, tol=1e-3, summarize=True):
        """:func:`tied_hdp_local_step` of this memory."""
        return tied_hdp_local_step(posterior, self, max_iter, tol, summarize)


class TiedGroupLocal(NamedTuple):
    """The tied local factors of a :class:`GroupedClumps` (module docstring): clump responsibilities
    ``(C, K)``, singlet responsibilities ``(P, K)``, the document groups' Dirichlets ``theta`` ``(S, K + 1)``
    and their counts :math:`N_{sk}` ``(S, K)`` (eq. 15)."""

    clump_resp: torch.Tensor
    point_resp: torch.Tensor
    theta: torch.Tensor
    counts: torch.Tensor


def group_factors(posterior, group_counts, sizes):
    """``(theta, E log pi)`` of the document groups, each ``(S, K + 1)``: eq. 20 for counts ``(S, K)``."""
    prior = posterior.alpha * posterior.expected_beta()
    K = posterior.K
    theta = torch.cat([group_counts / sizes[:, None] + prior[:K], prior[K:].expand(len(sizes), 1)], 1)
    return theta, expected_log_dirichlet(theta)


def tied_hdp_local_step(posterior, memory, max_iter=100, tol=1e-3, summarize=True):
    """``(TiedGroupLocal, summary)``: coordinate ascent on the tied local factors of ``memory``
    (a :class:`GroupedClumps`) under the globals ``posterior`` (an
    :class:`~pyro_memo.posterior.hdp.HDPMixturePosterior`): clump and singlet responsibilities (eq. 21) and
    document-group Dirichlets (eq. 20) alternate until the groups' counts move by less than ``tol`` per entry on
    average (the default ``tol`` is the HDP local step's); a last sweep sets the responsibilities, then
    ``theta`` exactly, so the summary's bound is that of the factors returned. The summary is a
    :class:`~pyro_memo.summaries.GroupSummary` (module docstring); ``None`` with ``summarize=False`` (compression
    reads only the factors).

    A singlet's :math:`r_{nk} = \\Phi_{nk} W_{sk} / z_n`, with :math:`\\Phi = \\exp(E\\log p - \\text{row max})`
    formed once and :math:`W_s = \\exp(E\\log\\pi_s - \\max)` per sweep, so a sweep needs only each group's
    :math:`z = \\Phi_s W_s` and counts :math:`N_{sk} = W_{sk} \\sum_{n \\in s} \\Phi_{nk} / z_n`: two
    matrix-vector products per document group and no ``(P, K)`` temporary; the responsibilities are formed
    once, in place of :math:`\\Phi`.

    In float64 the sweeps first run on a float32 copy of :math:`\\Phi` (half the memory traffic of these
    bandwidth-bound products, 0.044 s -> 0.023 s per sweep over 410,000 singlets at K = 50) until the counts
    move by less than ``tol`` or by less than float32 can resolve (``1e-5`` of their mean), then continue in
    float64 until they move by less than ``tol``, so the fixed point is float64's (at ``tol`` 1e-2 one float64
    sweep confirms it); counts that float32 cannot represent (an underflowing :math:`z_n`) restart the sweeps
    in float64. The responsibilities and the summary are always formed from the float64 :math:`\\Phi`."""
    family, K = posterior.family, posterior.K
    order, bounds = _group_runs(memory.point_groups)
    points = memory.points.to(posterior.dtype)
    if order is not None:
        points = points[order]
    if memory.num_singlets:
        phi = family.expected_log_lik(points, posterior.component)
        phi.sub_(phi.max(1, keepdim=True).values).exp_()
    else:
        phi = points.new_zeros((0, K))
    if memory.num_clumps:
        clump_lik = stats_log_lik(family, posterior.component, memory.counts, memory.stats) / memory.counts[:, None]
        share = memory.clump_groups / memory.counts[:, None]  # (C, S) fraction of each clump's items per group
    else:
        clump_lik, share = memory.counts.new_zeros((0, K)), memory.clump_groups
    sizes = memory.group_sizes.to(posterior.dtype)

    def clump_responsibilities(e_log_pi):
        return drop_underflow(torch.softmax(clump_lik + share @ e_log_pi[:, :K], dim=-1))

    def weights_of(e_log_pi):
        return torch.exp(e_log_pi[:, :K] - e_log_pi[:, :K].max(1, keepdim=True).values)

    def group_counts(e_log_pi, table):
        clump_resp, weights = clump_responsibilities(e_log_pi), weights_of(e_log_pi)
        counts = memory.clump_groups.T @ clump_resp
        weights, tiny = weights.to(table.dtype), torch.finfo(table.dtype).tiny
        for group, lo, hi in bounds:
            block = table[lo:hi]
            singlets = weights[group] * (block.T @ (block @ weights[group]).clamp_min(tiny).reciprocal())
            counts[group] += singlets.to(counts.dtype)
        return counts

    def sweeps(counts, table, tol, budget):  # -> (counts, sweeps run); counts not finite: stop
        for run in range(1, budget + 1):
            new = group_counts(group_factors(posterior, counts, sizes)[1], table)
            moved = float((new - counts).abs().mean()) if new.numel() else 0.0
            counts = new
            if not moved >= tol:  # converged, or nan / inf
                return counts, run
        return counts, budget

    log_beta = torch.log(posterior.expected_beta())  # the start: r ∝ E[beta_k] exp(E log p), as the HDP's
    start = log_beta.expand(len(sizes), K + 1)
    used = 0
    if phi.dtype == torch.float64 and phi.numel():
        fast = phi.to(torch.float32)
        counts = group_counts(start, fast)
        counts, used = sweeps(counts, fast, max(tol, 1e-5 * float(counts.abs().mean())), max_iter)
        del fast
        if not bool(torch.isfinite(counts).all()):
            used = 0
    if not used:
        counts = group_counts(start, phi)
    counts, _ = sweeps(counts, phi, tol, max_iter - used)
    e_log_pi = group_factors(posterior, counts, sizes)[1]
    clump_resp, weights = clump_responsibilities(e_log_pi), weights_of(e_log_pi)
    counts = memory.clump_groups.T @ clump_resp
    tiny = torch.finfo(phi.dtype).tiny
    for group, lo, hi in bounds:  # phi becomes the singlets' responsibilities
        block = phi[lo:hi]
        block.mul_(weights[group])
        block.div_(block.sum(1, keepdim=True).clamp_min(tiny))
        counts[group] += block.sum(0)
    point_resp = phi if order is None else torch.empty_like(phi).index_copy_(0, order, phi)
    theta, e_log_pi = group_factors(posterior, counts, sizes)
    summary = tied_group_summary(family, memory, clump_resp, point_resp, theta, e_log_pi, counts) if summarize \
        else None
    return TiedGroupLocal(clump_resp, point_resp, theta, counts), summary


def _group_runs(owner):
    """``(order, runs)``: the singlets' order by document group (``None`` when they are sorted already) and
    ``(group, start, stop)`` of each run of one group in that order."""
    order = None
    if len(owner) > 1 and bool((owner[1:] < owner[:-1]).any()):
        order = torch.argsort(owner, stable=True)
        owner = owner[order]
    groups, lengths = torch.unique_consecutive(owner, return_counts=True)
    stops = torch.cumsum(lengths, 0).tolist()
    return order, [(g, stop - n, stop) for g, n, stop in zip(groups.tolist(), lengths.tolist(), stops, strict=True)]


def tied_group_summary(family, memory, clump_resp, point_resp, theta, e_log_pi, counts):
    """The :class:`~pyro_memo.summaries.GroupSummary` of tied factors (module docstring): the items' part by
    :func:`~pyro_memo.memo.clumps.tied_summary`, the groups' weighted by their sizes :math:`D_s`."""
    items = tied_summary(family, memory, clump_resp, point_resp)
    sizes = memory.group_sizes.to(theta.dtype)
    return GroupSummary(items.counts, items.stats, (sizes[:, None] * e_log_pi).sum(0),
                        group_terms(counts, theta, e_log_pi, sizes), items.entropy, memory.num_docs)
