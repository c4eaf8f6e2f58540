"""Compression: choosing the clumps that summarise the data under a memory bound (Gomes, Welling & Perona
2008, §3.2, Algorithm 3.2), for a DP mixture and, with document groups, an HDP.

The units to compress are the current clumps and singlets (:class:`~pyro_memo.memo.clumps.Clumps`). They are
hard-partitioned by their most responsible component, and the partition is refined by greedy top-down
splitting while the memory it needs (eq. 26) stays within the bound. A leaf of the partition is split in two
by restricted updates of two child components fitted to its units alone (hard assignments of whole units,
k-means++ started on the units' mean statistics), and splits are ranked by the change in the
*data-magnified* free energy (eq. 30): each leaf's statistics scaled by :math:`T/\\sum_c N_c`, with
:math:`T` the number of items expected over the system's lifetime, so that groups of points that more data
would separate are split now, before their points are purged. For hard assignments that change is exact
in closed form: the two children's log marginal likelihoods under the conjugate prior against the
parent's (:meth:`~pyro_memo.ConjugateFamily.log_marginal`), plus the change of the partition's prior:
for a DP mixture the Chinese-restaurant term of one more cluster, for an HDP eq. 30's document terms
(:mod:`pyro_memo.memo.document_terms`), by which a split whose children are used by different groups costs less
than one whose children share them. Every split relaxes a tying constraint, so splitting goes on while memory
allows.

A leaf is stored as one clump (its summed count and statistics) or, when it holds only singlets and fewer
than ``clump_size / D`` of them (Gomes et al.'s :math:`(d + 3)/2 + 1/d` for a full-covariance Gaussian), as
its singlets. When even the partition by component needs more than the bound, the leaves whose union
loses the least magnified free energy are merged first.

Splits are accepted in rounds, so that an epoch of hundreds of thousands of singlets costs a few passes over
the units per round rather than a Python loop per leaf: each round takes the leaves in order of their gain (Gomes
et al.'s greedy rule) and accepts their splits while the round uses at most half of the memory still free (and
always the best one that fits), then proposes splits for all the new children at once, by vectorised restricted
updates in which each unit is scored only under its own leaf's two children. Where Gomes et al. accept one
split at a time, a round may thus accept a split whose children would have ranked below a later one's; the
last rounds, with little memory left, accept one split at a time as they do.
"""

import copy
import heapq
import math

import torch

from .clumps import flat_stats, item_stats, log_lik_coefficients
from .document_terms import DocumentTerms


def segment_max(values, segments, n):
    """Per segment maximum of ``values`` (segments ``0 .. n-1``; ``-inf`` where empty)."""
    out = values.new_full((n,), -math.inf)
    return out.scatter_reduce(0, segments, values, "amax")


def segment_argmin(keys, segments, n):
    """Per segment the position (into ``keys``) of the smallest key (ties go to the first), and that key."""
    smallest = keys.new_full((n,), math.inf).scatter_reduce(0, segments, keys, "amin")
    hit = torch.nonzero(keys == smallest[segments]).flatten()
    out = torch.full((n,), len(keys), dtype=torch.long, device=keys.device)
    return out.scatter_reduce(0, segments[hit], hit, "amin"), smallest


def segment_sums(counts, flat, labels, n):
    """Summed ``counts`` ``(n,)`` and flattened statistics ``(n, F)`` of rows with ``labels`` in ``0 .. n-1``."""
    return (counts.new_zeros(n).index_add_(0, labels, counts),
            flat.new_zeros((n, flat.shape[1])).index_add_(0, labels, flat))


def unique_rows(rows):
    """``torch.unique(rows, dim=0, return_inverse=True, return_counts=True)`` for a 2-D ``rows``, the same
    sorted rows, found by one 1-D sort per column: each column's values become ranks, folded column by column
    into one integer per row (lexicographic order; re-ranked whenever the next column could overflow int64).
    Sorting whole rows is several times slower on the CPU."""
    key, bound = rows.new_zeros(len(rows), dtype=torch.long), 1
    for column in rows.T:
        values, rank = torch.unique(column, return_inverse=True)
        if bound * len(values) >= 2**62:
            key, bound = torch.unique(key, return_inverse=True)[1], int(key.max()) + 1
        key, bound = key * len(values) + rank, bound * len(values)
    order, inverse, repeats = torch.unique(key, return_inverse=True, return_counts=True)
    first = torch.full((len(order),), len(rows), dtype=torch.long, device=rows.device)
    first.scatter_reduce_(0, inverse, torch.arange(len(rows), device=rows.device), "amin")
    return rows[first], inverse, repeats


class Units:
    """The units of a compression step: the current clumps (units ``0 .. C-1``) and singlets (units
    ``C .. C+P-1``), each with its count and its statistics flattened to one row of ``flat`` (a singlet's
    are its item's own, :func:`~pyro_memo.memo.clumps.item_stats`)."""

    def __init__(self, family, clumps):
        self.family = family
        self.clumps = clumps
        self.first_singlet = clumps.num_clumps
        self.counts = torch.cat([clumps.counts, clumps.points.new_ones(clumps.num_singlets)])
        self.size = clumps.clump_cost()
        self.dim = family.dim
        self.template = {k: v[:0] for k, v in clumps.stats.items()}
        own = item_stats(family, clumps.points) if clumps.num_singlets else self.template
        self.flat = torch.cat([flat_stats(clumps.stats), flat_stats({k: own[k] for k in clumps.stats})])
        self.device = self.counts.device
        self.multiplicity = (torch.arange(len(self.counts), device=self.device) >= self.first_singlet).long()
        self.members = None

    def distinct(self, owner):
        """These units with the singlets of equal statistics and equal ``owner`` (their first leaf) merged into
        one unit standing for all of them (``multiplicity`` singlets; ``members``: each original unit's
        unit here). Hard splitting treats the merged unit exactly as its singlets, which always take the same
        side (scores are linear in a unit's count and statistics); pixels of quantised images repeat often."""
        C = self.first_singlet
        rows = torch.cat([self.flat[C:], owner[C:, None].to(self.flat.dtype)], 1)
        values, inverse, repeats = unique_rows(rows)
        other = copy.copy(self)
        other.counts = torch.cat([self.counts[:C], repeats.to(self.counts.dtype)])
        other.flat = torch.cat([self.flat[:C], values[:, :-1] * repeats[:, None].to(values.dtype)])
        other.multiplicity = torch.cat([self.multiplicity[:C], repeats])
        other.members = torch.cat([torch.arange(C, device=self.device), C + inverse])
        return other, torch.cat([owner[:C], values[:, -1].long()])

    def __len__(self):
        return int(self.counts.shape[0])

    def unflatten(self, flat):
        """``(n, F)`` flattened statistics as the family's dict of ``(n, ...)``."""
        out, start = {}, 0
        for k, v in self.template.items():
            width = math.prod(v.shape[1:])
            out[k] = flat[:, start:start + width].reshape((len(flat),) + v.shape[1:])
            start += width
        return out

    def sums(self, labels, n, index=None):
        """Summed counts ``(n,)`` and flattened statistics ``(n, F)`` of the units ``index`` (all by default) by
        their ``labels`` in ``0 .. n-1``."""
        counts, flat = (self.counts, self.flat) if index is None else (self.counts[index], self.flat[index])
        return segment_sums(counts, flat, labels, n)

    def own_log_lik(self, component, which, index):
        """Expected log-likelihood of the items of each unit ``index[i]`` under component ``which[i]`` of
        ``component``: ``(len(index),)``, linear in the units' statistics."""
        a, B = log_lik_coefficients(self.family, component, self.template)
        out = (self.flat[index] * B[which]).sum(1)
        return out if a is None else out + self.counts[index] * a[which]

    def leaf_costs(self, labels, n, index=None):
        """Numbers each of ``n`` leaves stores (:meth:`as_singlets` leaves their singlets, others one clump),
        for units ``index`` (all by default) with leaf ``labels``, and whether each leaf keeps its singlets."""
        multiplicity = self.multiplicity if index is None else self.multiplicity[index]
        units = torch.zeros(n, dtype=torch.long, device=labels.device).index_add_(0, labels, multiplicity)
        clumps = torch.zeros_like(units).index_add_(0, labels, (multiplicity == 0).long())
        singlets = (clumps == 0) & (units * self.dim <= self.size)
        return torch.where(singlets, units * self.dim, torch.full_like(units, self.size)), singlets

    def as_singlets(self, index):
        """Whether a leaf of units ``index`` keeps its items as singlets: all are singlets and they take no
        more numbers than one clump (Gomes et al.'s :math:`(d + 3)/2 + 1/d` points for a full covariance)."""
        return bool((index >= self.first_singlet).all()) and len(index) * self.dim <= self.size


class Compressor:
    """Greedy top-down splitting under a memory bound (module docstring).

    :param family: the model's conjugate family.
    :param float magnify: the data magnification :math:`T/\\sum_c N_c` (at least 1).
    :param float alpha: the DP concentration of the split prior's extra-cluster term (a DP mixture's; an HDP's
        compression, given its components' prior masses, uses eq. 30's document terms instead).
    :param int refine: restricted update rounds per split proposal.
    :param int seed: seeds the k-means++ starts of the split proposals.
    :ivar documents: the :class:`~pyro_memo.memo.document_terms.DocumentTerms` of the units being compressed (set
        by :meth:`compress` when given an HDP's prior masses), ``None`` for a DP mixture.
    """

    def __init__(self, family, magnify=1.0, alpha=1.0, refine=10, seed=0):
        self.family = family
        self.magnify = max(1.0, float(magnify))
        self.alpha = float(alpha)
        self.refine = int(refine)
        self.generator = torch.Generator().manual_seed(int(seed))
        self.documents = None

    # ------------------------------------------------------------------ scores
    def log_marginal(self, counts, flat, units):
        """Magnified log marginal likelihood of hard clusters (``counts`` ``(n,)``, flattened statistics) plus,
        for a DP mixture, their CRP terms: ``(n,)``."""
        m = self.magnify
        value = self.family.log_marginal(m * counts, units.unflatten(m * flat))
        return value if self.documents is not None else value + torch.lgamma(m * counts)

    def partition_gain(self, index, node, side, n):
        """The change of the partition prior's terms when each of ``n`` leaves (units ``index`` in leaves ``node``)
        splits by ``side``: the CRP's :math:`\\log\\alpha` for a DP mixture, the document terms' change for an HDP."""
        if self.documents is None:
            return math.log(self.alpha)
        children = self.documents.log_marginal(2 * node + side.long(), 2 * n, index).reshape(n, 2).sum(1)
        return children - self.documents.log_marginal(node, n, index)

    def _fit(self, counts, flat, units):
        """Components fitted to the magnified statistics of hard clusters."""
        m = self.magnify
        return self.family.posterior(m * counts, units.unflatten(m * flat))

    # ---------------------------------------------------------------- proposals
    def split_level(self, units, index, node, n, parent_counts, parent_flat):
        """Split ``n`` leaves at once: units ``index`` in leaves ``node`` (``0 .. n-1``, two or more units each)
        by restricted hard updates of two child components per leaf (units to the child under which their
        items are likelier, children refitted to their units' magnified statistics) from a k-means++ start;
        a leaf stops when its split stands still or would leave one child empty (it keeps its last split).
        Returns each unit's side (``True``: the second child) and each leaf's change of the magnified free
        energy (eq. 30 for hard clusters)."""
        counts, flat = units.counts[index], units.flat[index]
        side = self._start(units, index, node, n)
        frozen = torch.zeros(n, dtype=torch.bool, device=units.device)
        sizes_of = torch.bincount(node, minlength=n)
        for _ in range(self.refine):
            child_counts, child_flat = segment_sums(counts, flat, 2 * node + side.long(), 2 * n)
            a, B = log_lik_coefficients(self.family, self._fit(child_counts, child_flat, units), units.template)
            log_size = torch.log(child_counts.clamp_min(1e-300))
            B, bias = B.reshape(n, 2, -1), (log_size if a is None else a + log_size).reshape(n, 2)
            # the second child's score minus the first's, from one gathered row per unit
            new = (flat * (B[:, 1] - B[:, 0])[node]).sum(1) + counts * (bias[:, 1] - bias[:, 0])[node] > 0
            moved = torch.bincount(node[new != side], minlength=n)
            second = torch.bincount(node[new], minlength=n)
            frozen |= (moved == 0) | (second == 0) | (second == sizes_of)
            if bool(frozen.all()):
                break
            side = torch.where(frozen[node], side, new)
        child_counts, child_flat = segment_sums(counts, flat, 2 * node + side.long(), 2 * n)
        children = self.log_marginal(child_counts, child_flat, units).reshape(n, 2).sum(1)
        gain = children - self.log_marginal(parent_counts, parent_flat, units)
        return side, gain + self.partition_gain(index, node, side, n)

    def _start(self, units, index, node, n):
        """k-means++-style starts: per leaf a random unit's component, then a second unit drawn with probability
        growing with how badly the first fits it (per item), and each unit on the side it fits better."""
        keys = torch.rand(len(index), generator=self.generator, dtype=torch.float64).to(units.device)
        first, _ = segment_argmin(keys, node, n)
        seed = self._fit(units.counts[index[first]], units.flat[index[first]], units)
        per_item = units.own_log_lik(seed, node, index) / units.counts[index]
        badness = (segment_max(per_item, node, n)[node] - per_item).clamp_min(0)
        race = -torch.log(torch.rand(len(index), generator=self.generator, dtype=torch.float64)).to(units.device)
        race = race / badness
        race[first] = math.inf
        keys[first] = math.inf
        stuck = torch.isinf(segment_argmin(race, node, n)[1])  # the first fits all others alike: any of them
        second, _ = segment_argmin(torch.where(stuck[node], keys, race), node, n)
        other = self._fit(units.counts[index[second]], units.flat[index[second]], units)
        both = {k: torch.cat([v, other[k]]) for k, v in seed.items()}
        side = units.own_log_lik(both, node + n, index) > units.own_log_lik(both, node, index)
        side[first], side[second] = False, True
        return side

    # ---------------------------------------------------------------- compress
    def compress(self, clumps, resp, memory_bound, prior_mass=None):
        """Clumps within ``memory_bound`` stored numbers summarising ``clumps`` (their units hard-partitioned
        by ``resp``, the units' responsibilities ``(C + P, K)`` or their most responsible components ``(C + P,)``),
        and the leaves (unit indices, in the order of the stored clumps and singlets). ``prior_mass``: an HDP's
        :math:`\\alpha E[\\beta_k]` ``(K,)``, for eq. 30's document terms of ``clumps`` with document groups (a
        :class:`~pyro_memo.memo.group_clumps.GroupedClumps`); ``None``: a DP mixture's CRP term."""
        units = Units(self.family, clumps)
        distinct, owner = units.distinct(resp.argmax(1) if resp.dim() == 2 else resp)
        self.documents = None if prior_mass is None else DocumentTerms.of_units(clumps, distinct, owner, prior_mass,
                                                                                self.magnify)
        _, labels = torch.unique(owner, return_inverse=True)
        partition = _Partition(self, distinct, self._merge_to_fit(distinct, labels, memory_bound))
        partition.propose(torch.arange(partition.size, device=units.device))
        cost = sum(partition.cost)
        queue = [(-partition.gain[leaf], leaf) for leaf in range(partition.size)]
        heapq.heapify(queue)
        final = []
        while queue:
            accepted, used, budget = [], 0, (memory_bound - cost) / 2
            while queue:
                leaf = queue[0][1]
                change = partition.change(leaf)
                if change is None or cost + change > memory_bound:
                    final.append(heapq.heappop(queue)[1])  # one unit, or this split does not fit; smaller ones may
                    continue
                if accepted and used + change > budget:
                    break  # the round is full; the rest wait for the next
                heapq.heappop(queue)
                accepted.append(leaf)
                used += change
                cost += change
            for child in partition.split(accepted):
                heapq.heappush(queue, (-partition.gain[child], child))
        position = partition.positions(final)[distinct.members]
        order = torch.argsort(position, stable=True)
        leaves = list(torch.split(order, torch.bincount(position, minlength=len(final)).tolist()))
        return clumps.from_leaves(units, leaves), leaves

    def _merge_to_fit(self, units, labels, memory_bound):
        """Merge the pair of leaves that loses the least magnified free energy until the partition fits."""
        if units.size > memory_bound:
            raise ValueError(f"memory_bound {memory_bound} cannot hold even one clump ({units.size} numbers)")
        n = int(labels.max()) + 1
        while n > 1 and int(units.leaf_costs(labels, n)[0].sum()) > memory_bound:
            counts, flat = units.sums(labels, n)
            alone = self.log_marginal(counts, flat, units)
            i, j = torch.triu_indices(n, n, 1)
            loss = alone[i] + alone[j] - self.log_marginal(counts[i] + counts[j], flat[i] + flat[j], units)
            if self.documents is None:
                loss = loss + math.log(self.alpha)
            else:
                documents = self.documents.log_marginal(labels, n)
                loss = loss + documents[i] + documents[j] - self.documents.merged_pairs(labels, n, i, j)
            best = int(torch.argmin(loss))
            keep, drop = int(i[best]), int(j[best])
            labels = torch.where(labels == drop, keep, labels)
            labels = labels - (labels > drop).long()
            n -= 1
        return labels


class _Partition:
    """The current leaves of greedy top-down splitting: each unit's leaf and side in its leaf's proposed split;
    per leaf its count, flattened statistics, storage cost and, once proposed, its split's gain and cost."""

    def __init__(self, compressor, units, labels):
        self.compressor, self.units = compressor, units
        self.leaf = labels.clone()
        self.device = units.device
        self.side = torch.zeros(len(labels), dtype=torch.bool, device=self.device)
        self.counts, self.flat = units.sums(labels, int(labels.max()) + 1)
        self.cost = units.leaf_costs(labels, len(self.counts))[0].tolist()
        self.gain = [-math.inf] * len(self.cost)
        self.split_cost = [None] * len(self.cost)

    @property
    def size(self):
        return len(self.cost)

    def change(self, leaf):
        """The change of stored numbers if ``leaf`` splits (``None``: it has no proposal)."""
        return None if self.split_cost[leaf] is None else self.split_cost[leaf] - self.cost[leaf]

    def propose(self, leaves):
        """Split proposals (:meth:`Compressor.split_level`) for the ``leaves`` (a tensor of ids) with two or
        more units."""
        wanted = torch.zeros(self.size, dtype=torch.bool, device=self.device)
        wanted[leaves] = True
        index = torch.nonzero(wanted[self.leaf]).flatten()
        many = torch.bincount(self.leaf[index], minlength=self.size) >= 2
        index = index[many[self.leaf[index]]]
        active = torch.nonzero(many).flatten()
        if not len(active):
            return
        local = torch.full((self.size,), -1, dtype=torch.long, device=self.device)
        local[active] = torch.arange(len(active), device=self.device)
        node = local[self.leaf[index]]
        side, gain = self.compressor.split_level(self.units, index, node, len(active), self.counts[active],
                                                 self.flat[active])
        self.side[index] = side
        costs, _ = self.units.leaf_costs(2 * node + side.long(), 2 * len(active), index)
        costs = costs.reshape(-1, 2).sum(1).tolist()
        for i, leaf in enumerate(active.tolist()):
            self.gain[leaf], self.split_cost[leaf] = float(gain[i]), costs[i]

    def split(self, leaves):
        """Replace the ``leaves`` by their proposed children (proposing their own splits); the children's ids."""
        if not leaves:
            return []
        base, parents = self.size, torch.tensor(leaves, dtype=torch.long, device=self.device)
        rank = torch.full((self.size,), -1, dtype=torch.long, device=self.device)
        rank[parents] = torch.arange(len(leaves), device=self.device)
        index = torch.nonzero(rank[self.leaf] >= 0).flatten()
        child = 2 * rank[self.leaf[index]] + self.side[index].long()
        self.leaf[index] = base + child
        counts, flat = self.units.sums(child, 2 * len(leaves), index)
        self.counts, self.flat = torch.cat([self.counts, counts]), torch.cat([self.flat, flat])
        self.cost += self.units.leaf_costs(child, 2 * len(leaves), index)[0].tolist()
        self.gain += [-math.inf] * (2 * len(leaves))
        self.split_cost += [None] * (2 * len(leaves))
        children = torch.arange(base, self.size, device=self.device)
        self.propose(children)
        return children.tolist()

    def positions(self, leaves):
        """Each unit's position in ``leaves`` (the final partition)."""
        position = torch.full((self.size,), -1, dtype=torch.long, device=self.device)
        position[torch.tensor(leaves, dtype=torch.long, device=self.device)] = torch.arange(len(leaves),
                                                                                         device=self.device)
        return position[self.leaf]
