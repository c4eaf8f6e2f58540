"""The document terms of the data-magnified free energy of hard clusters (Gomes, Welling & Perona 2008, eq. 30),
by which an HDP's compression ranks its splits.

With the items hard-assigned to clusters :math:`k` and :math:`N_{ks}` the items of cluster :math:`k` in document
group :math:`s` (of :math:`D_s` groups), the groups' Dirichlet-multinomial marginal contributes

.. math::  \\frac{T_{docs}}{\\sum_s D_s} \\sum_{k,s} D_s
           \\Big[\\log\\Gamma\\big(\\alpha_k + \\tfrac{N_{ks}}{D_s}\\big) - \\log\\Gamma(\\alpha_k)\\Big]

to the log marginal likelihood (eq. 30's third line with the sign of a log likelihood; the fourth line, over the
groups' totals, is the same for every partition and is left out). It replaces the Chinese-restaurant term of a
DP mixture: a split costs little where its children are used by different groups, and much where both children
are spread over the same groups.

Gomes et al. give each cluster its own :math:`\\alpha_k` under a Gamma prior. Here a cluster's :math:`\\alpha_k` is
its share of the model's prior mass: a unit of :math:`n_u` items whose most responsible component is :math:`j`
carries :math:`\\alpha E[\\beta_j]\\, n_u / N_j` (:math:`N_j` the items owned by :math:`j`), and a cluster's
:math:`\\alpha_k` is the sum over its units, so a split shares its parent's mass between its children by their
sizes and every partition spends the same total :math:`\\alpha`. The magnification :math:`T_{docs}/\\sum_s D_s`
is the points' :math:`T_{pts}/\\sum_c N_c`: the groups are expected to keep their present size.
"""

import torch


class DocumentTerms:
    """Eq. 30's document terms of hard clusters of compression units (module docstring).

    :param unit: ``(R,)``, with ``group`` and ``count`` triples: unit ``unit[r]`` holds ``count[r]`` items of
        document group ``group[r]``.
    :param group: ``(R,)`` the triples' document groups.
    :param count: ``(R,)`` the triples' item counts.
    :param sizes: ``(S,)`` groups tied in each document group, :math:`D_s`.
    :param mass: ``(U,)`` each unit's prior mass (module docstring).
    :param float magnify: :math:`T_{docs} / \\sum_s D_s`.
    """

    def __init__(self, unit, group, count, sizes, mass, magnify=1.0):
        self.unit, self.group, self.count = unit, group, count.to(mass.dtype)
        self.sizes = sizes.to(mass.dtype)
        self.mass = mass
        self.magnify = float(magnify)

    @classmethod
    def of_units(cls, clumps, units, owner, prior_mass, magnify=1.0):
        """The terms of the compression ``units`` of ``clumps`` (a
        :class:`~pyro_memo.memo.group_clumps.GroupedClumps`), whose first leaves are ``owner`` (each unit's most
        responsible component) under the components' prior masses ``prior_mass`` :math:`\\alpha E[\\beta_k]`."""
        unit, group, count = clumps.unit_group_pairs()
        if units.members is not None:
            unit = units.members[unit]
        counts = units.counts.to(prior_mass.dtype)
        owned = counts.new_zeros(len(prior_mass)).index_add_(0, owner, counts)
        mass = prior_mass[owner] * counts / owned[owner]
        return cls(unit, group, count, clumps.group_sizes, mass, magnify)

    def log_marginal(self, labels, n, index=None):
        """``(n,)`` the magnified document terms of ``n`` clusters of the units ``index`` (all by default) with
        cluster ``labels`` in ``0 .. n-1``."""
        index = torch.arange(len(self.mass), device=labels.device) if index is None else index
        leaf = torch.full((len(self.mass),), -1, dtype=torch.long, device=labels.device)
        leaf[index] = labels
        mine = leaf[self.unit] >= 0
        S = len(self.sizes)
        keys, inverse = torch.unique(leaf[self.unit[mine]] * S + self.group[mine], return_inverse=True)
        counts = self.count.new_zeros(len(keys)).index_add_(0, inverse, self.count[mine])
        cluster, sizes = keys // S, self.sizes[keys % S]
        alpha = self.mass.new_zeros(n).index_add_(0, labels, self.mass[index])[cluster]
        terms = sizes * (torch.lgamma(alpha + counts / sizes) - torch.lgamma(alpha))
        return self.magnify * terms.new_zeros(n).index_add_(0, cluster, terms)

    def merged_pairs(self, labels, n, first, second):
        """The magnified document terms of the unions of clusters ``first[i]`` and ``second[i]`` of all units (cluster
        ``labels`` in ``0 .. n-1``): ``(len(first),)``."""
        S = len(self.sizes)
        counts = self.count.new_zeros(n * S).index_add_(0, labels[self.unit] * S + self.group, self.count)
        counts = counts.reshape(n, S)
        alpha = self.mass.new_zeros(n).index_add_(0, labels, self.mass)
        union, mass = counts[first] + counts[second], (alpha[first] + alpha[second])[:, None]
        terms = self.sizes * (torch.lgamma(mass + union / self.sizes) - torch.lgamma(mass))
        return self.magnify * terms.sum(1)
