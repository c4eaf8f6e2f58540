"""Compression: choosing the clumps that summarise the data under a memory bound (Gomes, Welling & Perona
2008, §3.2, Algorithm 3.2), for a mixture (no document groups).

The units to compress are the current clumps and singlets (:class:`~pyro_memo.memo.clumps.Clumps`). They are
hard-partitioned by their most responsible component, and the partition is refined by greedy top-down
splitting while the memory it needs (eq. 26) stays within the bound. A leaf of the partition is split in two
by restricted updates of two child components fitted to its units alone (hard assignments of whole units,
k-means++ started on the units' mean statistics), and splits are ranked by the change in the
*data-magnified* free energy (eq. 30): each leaf's statistics scaled by :math:`T/\\sum_c N_c`, with
:math:`T` the number of items expected over the system's lifetime, so that groups of points that more data
would separate are split now, before their points are purged. For hard assignments that change is exact
in closed form: the two children's log marginal likelihoods under the conjugate prior against the
parent's (:meth:`~pyro_memo.families.ConjugateFamily.log_marginal`), plus the Chinese-restaurant prior's
term of one more cluster. Every split relaxes a tying constraint, so splitting goes on while memory allows.

A leaf is stored as one clump (its summed count and statistics) or, when it holds only singlets and fewer
than ``clump_size / D`` of them (Gomes et al.'s :math:`(d + 3)/2 + 1/d` for a full-covariance Gaussian), as
its singlets. When even the partition by component needs more than the bound, the leaves whose union
loses the least magnified free energy are merged first.
"""

import heapq
import math

import numpy as np
import torch

from .clumps import stats_log_lik


class Units:
    """The units of a compression step: the current clumps (units ``0 .. C-1``, with their counts and
    statistics) and singlets (units ``C .. C+S-1``, kept as points: their statistics are never formed one by
    one, only summed over a leaf)."""

    def __init__(self, family, clumps):
        self.family = family
        self.clumps = clumps
        self.first_singlet = clumps.num_clumps
        self.counts = torch.cat([clumps.counts, clumps.points.new_ones(clumps.num_singlets)])
        self.size = clumps.clump_cost()
        self.dim = family.dim

    def __len__(self):
        return int(self.counts.shape[0])

    def _parts(self, index):
        return index[index < self.first_singlet], index[index >= self.first_singlet] - self.first_singlet

    def total(self, index):
        """Summed count and statistics of the units ``index``: the clumps' statistics plus those of the
        singlets' points."""
        clumps, singlets = self._parts(index)
        points = self.clumps.points[singlets]
        ones = points.new_ones((len(points), 1))
        stats = self.family.stats(points, ones)
        return self.counts[index].sum(), {k: v[0] + self.clumps.stats[k][clumps].sum(0) for k, v in stats.items()}

    def log_lik(self, index, component):
        """Expected log-likelihood of each unit's items under each component of ``component``:
        ``(len(index), K)``, clumps from their statistics and singlets from their points."""
        clumps, singlets = self._parts(index)
        out = self.counts.new_empty((len(index), next(iter(component.values())).shape[0]))
        is_clump = index < self.first_singlet
        if len(clumps):
            out[is_clump] = stats_log_lik(self.family, component, self.clumps.counts[clumps],
                                          {k: v[clumps] for k, v in self.clumps.stats.items()})
        if len(singlets):
            out[~is_clump] = self.family.expected_log_lik(self.clumps.points[singlets], component)
        return out

    def as_singlets(self, index):
        """Whether a leaf of units ``index`` keeps its items as singlets: all are singlets and they take no
        more numbers than one clump (Gomes et al.'s :math:`(d + 3)/2 + 1/d` points for a full covariance)."""
        return bool((index >= self.first_singlet).all()) and len(index) * self.dim <= self.size

    def cost(self, index):
        """Numbers a leaf of units ``index`` stores: its singlets' (:meth:`as_singlets`) or one clump's."""
        return len(index) * self.dim if self.as_singlets(index) else self.size


class Compressor:
    """Greedy top-down splitting under a memory bound (module docstring).

    :param family: the model's conjugate family.
    :param float magnify: the data magnification :math:`T/\\sum_c N_c` (at least 1).
    :param float alpha: the DP concentration of the split prior's extra-cluster term.
    :param int refine: restricted update rounds per split proposal.
    :param int seed: seeds the k-means++ starts of the split proposals.
    """

    def __init__(self, family, magnify=1.0, alpha=1.0, refine=10, seed=0):
        self.family = family
        self.magnify = max(1.0, float(magnify))
        self.alpha = float(alpha)
        self.refine = int(refine)
        self.rng = np.random.default_rng(seed)

    # ------------------------------------------------------------------ scores
    def log_marginal(self, count, stats):
        """Magnified log marginal likelihood of one leaf (a hard cluster) plus its CRP term."""
        m = self.magnify
        value = self.family.log_marginal((m * count).reshape(1), {k: (m * v).unsqueeze(0) for k, v in stats.items()})
        return float(value[0]) + math.lgamma(float(m * count))

    def split_gain(self, units, parent, children):
        """Change of the magnified free energy when leaf ``parent`` splits into ``children``."""
        gain = sum(self.log_marginal(*units.total(c)) for c in children) - self.log_marginal(*units.total(parent))
        return gain + math.log(self.alpha)

    # ---------------------------------------------------------------- proposals
    def propose(self, units, leaf):
        """``(gain, (left, right))``: a split of ``leaf`` (index tensor of units) by restricted hard updates of
        two child components (units to the child under which their items are likelier, children refitted to
        their units' magnified statistics), or ``None`` when the leaf has one unit."""
        if len(leaf) < 2:
            return None
        counts = units.counts[leaf]
        side = self._start(units, leaf)
        for _ in range(self.refine):
            children = [self._fit(units, leaf[~side]), self._fit(units, leaf[side])]
            component = {k: torch.cat([children[0][k], children[1][k]]) for k in children[0]}
            sizes = torch.stack([counts[~side].sum(), counts[side].sum()])
            score = units.log_lik(leaf, component) + counts[:, None] * torch.log(sizes)
            new = score[:, 1] > score[:, 0]
            if torch.equal(new, side) or bool(new.all()) or not bool(new.any()):
                break  # converged, or one child would take every unit: keep the last split
            side = new
        children = (leaf[~side], leaf[side])
        return self.split_gain(units, leaf, children), children

    def _fit(self, units, index):
        """One component's posterior fitted to the magnified statistics of units ``index``."""
        count, stats = units.total(index)
        m = self.magnify
        return self.family.posterior((m * count).reshape(1), {k: (m * v).unsqueeze(0) for k, v in stats.items()})

    def _start(self, units, leaf):
        """A k-means++-style start: a random unit's component, then a second unit drawn with probability
        growing with how badly the first fits it (per item), and each unit on the side it fits better."""
        first = int(self.rng.integers(len(leaf)))
        seed = self._fit(units, leaf[first:first + 1])
        per_item = units.log_lik(leaf, seed)[:, 0] / units.counts[leaf]
        badness = (per_item.max() - per_item).clamp_min(0)
        p = (badness / badness.sum()).cpu().numpy() if float(badness.sum()) > 0 else None
        second = int(self.rng.choice(len(leaf), p=p))
        if second == first:
            second = (first + 1) % len(leaf)
        other = self._fit(units, leaf[second:second + 1])
        scores = units.log_lik(leaf, {k: torch.cat([v, other[k]]) for k, v in seed.items()})
        side = scores[:, 1] > scores[:, 0]
        side[first], side[second] = False, True
        return side

    # ---------------------------------------------------------------- compress
    def compress(self, clumps, resp, memory_bound):
        """Clumps within ``memory_bound`` stored numbers summarising ``clumps`` (their units hard-partitioned
        by ``resp``, the units' responsibilities ``(C + S, K)``), and the leaves (lists of unit indices)."""
        units = Units(self.family, clumps)
        owner = resp.argmax(1)
        leaves = [torch.nonzero(owner == k).flatten() for k in torch.unique(owner).tolist()]
        leaves = self._merge_to_fit(units, leaves, memory_bound)
        cost = sum(units.cost(leaf) for leaf in leaves)
        queue, counter = [], 0
        for leaf in leaves:
            counter = self._push(queue, units, leaf, counter)
        final = []
        while queue:
            _, _, leaf, proposal = heapq.heappop(queue)
            if proposal is None:
                final.append(leaf)
                continue
            left, right = proposal[1]
            change = units.cost(left) + units.cost(right) - units.cost(leaf)
            if cost + change > memory_bound:
                final.append(leaf)  # this split does not fit; smaller ones may
                continue
            cost += change
            counter = self._push(queue, units, left, counter)
            counter = self._push(queue, units, right, counter)
        return clumps.from_leaves(units, final), final

    def _push(self, queue, units, leaf, counter):
        proposal = self.propose(units, leaf)
        priority = math.inf if proposal is None else -proposal[0]
        heapq.heappush(queue, (priority, counter, leaf, proposal))
        return counter + 1

    def _merge_to_fit(self, units, leaves, memory_bound):
        """Merge the pair of leaves that loses the least magnified free energy until the partition fits."""
        if units.size > memory_bound:
            raise ValueError(f"memory_bound {memory_bound} cannot hold even one clump ({units.size} numbers)")
        while sum(units.cost(leaf) for leaf in leaves) > memory_bound and len(leaves) > 1:
            best = None
            for i in range(len(leaves)):
                for j in range(i + 1, len(leaves)):
                    union = torch.cat([leaves[i], leaves[j]])
                    loss = self.split_gain(units, union, (leaves[i], leaves[j]))
                    if best is None or loss < best[0]:
                        best = (loss, i, j, union)
            _, i, j, union = best
            leaves = [leaf for k, leaf in enumerate(leaves) if k not in (i, j)] + [union]
        return leaves
