"""Eq. 30's document terms in an HDP's compression (Gomes, Welling & Perona 2008; issue #18): the vectorised terms
equal their definition summed cluster by cluster and group by group, a split's gain is the exact change of the
magnified free energy of hard clusters, and of two splits with equal point statistics the one whose children are
used by different groups ranks higher."""

import math

import numpy as np
import pytest
import torch

import pyro_memo as pm
from pyro_memo.memo.compression import Compressor, Units
from pyro_memo.memo.document_terms import DocumentTerms
from pyro_memo.memo.group_clumps import GroupedClumps
from tests.inference.test_memory_bounded_hdp import tie


def direct(labels, n, index, unit, group, count, sizes, mass, magnify):
    """Eq. 30's document terms by their definition, one cluster and one group at a time."""
    out = []
    for k in range(n):
        members = index[labels == k].tolist()
        alpha = float(sum(mass[u] for u in members))
        total = 0.0
        for s in range(len(sizes)):
            N = float(sum(count[r] for r in range(len(unit)) if int(unit[r]) in members and int(group[r]) == s))
            if N > 0:
                D = float(sizes[s])
                total += D * (math.lgamma(alpha + N / D) - math.lgamma(alpha))
        out.append(magnify * total)
    return torch.tensor(out, dtype=torch.float64)


def random_terms(seed, units=30, groups=5):
    g = torch.Generator().manual_seed(seed)
    R = 3 * units
    unit = torch.randint(units, (R,), generator=g)
    group = torch.randint(groups, (R,), generator=g)
    count = torch.randint(1, 6, (R,), generator=g).double()
    sizes = torch.randint(1, 4, (groups,), generator=g).double()
    mass = torch.rand(units, generator=g, dtype=torch.float64) * 0.3 + 1e-3
    return DocumentTerms(unit, group, count, sizes, mass, magnify=2.5), (unit, group, count, sizes, mass, 2.5), g


@pytest.mark.parametrize("seed", range(6))
def test_document_terms_are_their_definition(seed):
    terms, args, g = random_terms(seed)
    n = 4
    index = torch.randperm(len(terms.mass), generator=g)[:20]
    labels = torch.randint(n, (len(index),), generator=g)
    labels[:n] = torch.arange(n)
    torch.testing.assert_close(terms.log_marginal(labels, n, index), direct(labels, n, index, *args))
    every = torch.arange(len(terms.mass))
    all_labels = torch.randint(n, (len(every),), generator=g)
    all_labels[:n] = torch.arange(n)
    torch.testing.assert_close(terms.log_marginal(all_labels, n), direct(all_labels, n, every, *args))


@pytest.mark.parametrize("seed", range(6))
def test_merged_pairs_are_the_terms_of_the_unions(seed):
    terms, _, g = random_terms(seed)
    n = 5
    labels = torch.randint(n, (len(terms.mass),), generator=g)
    labels[:n] = torch.arange(n)
    first, second = torch.triu_indices(n, n, 1)
    merged = terms.merged_pairs(labels, n, first, second)
    for p in range(len(first)):
        union = torch.where(labels == second[p], first[p], labels)
        expected = terms.log_marginal(union, n)[first[p]]
        torch.testing.assert_close(merged[p], expected)


def grouped_memory(seed, num_groups=6):
    rng = np.random.default_rng(seed)
    groups = [rng.normal(size=(int(rng.integers(20, 40)), 2)) + rng.normal(scale=3, size=2) for _ in range(num_groups)]
    family = pm.Gaussian.from_data(np.concatenate(groups))
    x = torch.as_tensor(np.concatenate(groups))
    doc = torch.repeat_interleave(torch.arange(num_groups), torch.tensor([len(gr) for gr in groups]))
    memory, _, _, _ = tie(family, x, doc, num_groups, num_clumps=5, num_singlets=len(x) // 2, merges=2, seed=seed)
    return family, memory


@pytest.mark.parametrize("seed", range(5))
def test_a_split_gains_the_exact_change_of_the_magnified_free_energy(seed):
    """Random clumps across merged document groups, a random first partition and random split proposals: each
    leaf's gain is the children's magnified log marginals (points, eq. 30's first lines; no CRP term) and document
    terms minus the parent's, computed here from each leaf's own sums."""
    family, memory = grouped_memory(seed)
    g = torch.Generator().manual_seed(seed)
    units = Units(family, memory)
    K = 3
    owner = torch.randint(K, (len(units),), generator=g)
    owner[:K] = torch.arange(K)
    prior_mass = torch.rand(K, generator=g, dtype=torch.float64) + 0.1
    compressor = Compressor(family, magnify=4.0, seed=seed)
    compressor.documents = DocumentTerms.of_units(memory, units, owner, prior_mass, compressor.magnify)
    index = torch.arange(len(units))
    side, gain = compressor.split_level(units, index, owner, K, *units.sums(owner, K))
    unit, group, count = memory.unit_group_pairs()
    owned = torch.zeros(K, dtype=torch.float64).index_add_(0, owner, units.counts)
    mass = prior_mass[owner] * units.counts / owned[owner]
    doc = direct(owner, K, index, unit, group, count, memory.group_sizes, mass, 4.0)
    child = 2 * owner + side.long()
    doc_children = direct(child, 2 * K, index, unit, group, count, memory.group_sizes, mass, 4.0).reshape(K, 2).sum(1)

    def points(labels, n):
        counts, flat = units.sums(labels, n)
        return family.log_marginal(4.0 * counts, units.unflatten(4.0 * flat))

    expected = points(child, 2 * K).reshape(K, 2).sum(1) - points(owner, K) + doc_children - doc
    torch.testing.assert_close(gain, expected)


@pytest.mark.parametrize("seed", range(5))
def test_a_split_along_the_groups_outranks_one_across_them(seed):
    """Two document groups holding the same items: a split that gives each child one group's items has the same
    point terms as one that gives each child the first half of one group's items and the second half of the
    other's (the same items again), and gains more."""
    rng = np.random.default_rng(seed)
    block = rng.normal(size=(int(rng.integers(10, 30)), 2))
    family = pm.Gaussian.from_data(np.concatenate([block, block]))
    memory = GroupedClumps.of_groups(family, [block, block])
    units = Units(family, memory)
    n = len(block)
    owner = torch.zeros(2 * n, dtype=torch.long)
    compressor = Compressor(family, magnify=float(rng.uniform(1, 5)), seed=seed)
    compressor.documents = DocumentTerms.of_units(memory, units, owner, torch.tensor([float(rng.uniform(0.1, 3))]),
                                                  compressor.magnify)
    index = torch.arange(2 * n)
    along = torch.arange(2 * n) >= n  # group 0 | group 1
    half = torch.arange(n) >= n // 2
    across = torch.cat([half, ~half])  # each child holds all the items, half from each group
    points = [compressor.log_marginal(*units.sums(2 * owner + side.long(), 2), units).sum() for side in (along, across)]
    torch.testing.assert_close(points[0], points[1])
    gains = [float(compressor.partition_gain(index, owner, side, 1)) for side in (along, across)]
    assert math.isfinite(gains[1]) and gains[0] > gains[1]


def test_the_hdp_compresses_with_document_terms_unless_told_crp(monkeypatch):
    """``split_prior="documents"`` hands compression the components' prior masses alpha E[beta] (document terms);
    ``"crp"`` none, with gamma as the CRP's concentration."""
    from pyro_memo.inference.memory_bounded import MemoryBoundedHDP

    seen = []
    original = Compressor.compress

    def spy(self, clumps, resp, memory_bound, prior_mass=None):
        seen.append((self.alpha, prior_mass))
        return original(self, clumps, resp, memory_bound, prior_mass)

    monkeypatch.setattr(Compressor, "compress", spy)
    rng = np.random.default_rng(0)
    groups = [rng.normal(size=(30, 2)) + rng.normal(scale=3, size=2) for _ in range(6)]
    family = pm.Gaussian.from_data(np.concatenate(groups))
    for kind in ("documents", "crp"):
        seen.clear()
        model = MemoryBoundedHDP(family, 3, 200, 2, alpha=0.7, gamma=4.0, laps=5, split_prior=kind)
        fit = model.fit(groups)
        assert seen and fit.clumps.memory() <= 200
        for alpha, mass in seen:
            if kind == "crp":
                assert alpha == 4.0 and mass is None
            else:
                assert mass is not None and mass.shape == (3,) and float(mass.sum()) < 0.7
