"""Memory-bounded VB for the HDP (issue #18, Gomes, Welling & Perona 2008 §2.3-3): clumps across groups and
document groups sharing one q(pi). Without ties the tied local step is the HDP's; the tied bound is the untied
bound of the expanded factors (so never above the untied optimum); clump and group counts are exact sums; the
memory never exceeds its bound; with a bound larger than the data the fit is batch VB's."""

import numpy as np
import pytest
import torch

import pyro_memo as pm
from pyro_memo.inference.memory_bounded import MemoryBoundedHDP
from pyro_memo.memo.clumps import Clumps
from pyro_memo.memo.compression import Compressor
from pyro_memo.memo.group_clumps import GroupedClumps
from pyro_memo.posterior.hdp import HDPMixturePosterior, expected_log_dirichlet
from pyro_memo.summaries import Summary
from pyro_memo.topics import MemoizedHDP
from tests.engine.test_hdp_any_family import gaussian_groups


def scatter(family, x):
    """:math:`\\sum_n (x_n - c)(x_n - c)^T` about the gauss family's centre, what its ``xx`` statistics sum."""
    y = torch.as_tensor(x) - family.centre
    return y.T @ y


def setting(seed, num_groups=8, per_group=30, K=5):
    """Groups, their family, items ``x``, each item's group ``doc``, and globals fitted to random soft
    responsibilities."""
    groups, _ = gaussian_groups(seed, num_groups=num_groups, per_group=per_group)
    family = pm.Gaussian.from_data(np.concatenate(groups))
    x = torch.as_tensor(np.concatenate(groups))
    doc = torch.repeat_interleave(torch.arange(num_groups), torch.tensor([len(g) for g in groups]))
    g = torch.Generator().manual_seed(seed)
    resp = torch.softmax(3 * torch.randn(len(x), K, generator=g, dtype=x.dtype), -1)
    post = HDPMixturePosterior.from_summary(family, 0.7, 3.0, Summary.from_responsibilities(family, x, resp))
    return groups, family, x, doc, post


def tie(family, x, doc, num_groups, num_clumps, num_singlets, merges, seed):
    """Items ``x`` of groups ``doc`` tied: all but ``num_singlets`` random items in ``num_clumps`` random clumps
    (across groups), then ``merges`` random pairs of document groups merged. Returns the memory, each item's
    clump (``-1`` for a singlet) and each group's document group."""
    g = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(x), generator=g)
    clumped, single = order[num_singlets:], order[:num_singlets].sort().values
    clump = torch.full((len(x),), -1)
    clump[clumped] = torch.randint(num_clumps, (len(clumped),), generator=g)
    clump[clumped[:num_clumps]] = torch.arange(num_clumps)
    base = Clumps.from_groups(family, x[clumped], clump[clumped], num_clumps)
    rows = torch.zeros(num_clumps, num_groups, dtype=x.dtype).index_put_((clump[clumped], doc[clumped]),
                                                                         torch.ones(len(clumped), dtype=x.dtype),
                                                                         accumulate=True)
    memory = GroupedClumps(base.counts, base.stats, x[single], rows, doc[single], torch.ones(num_groups,
                                                                                            dtype=x.dtype))
    owner = torch.arange(num_groups)
    for _ in range(merges):
        keep, drop = sorted(torch.randperm(memory.num_groups, generator=g)[:2].tolist())
        memory = memory.merge_groups(keep, drop)
        owner = torch.where(owner == drop, keep, owner)
        owner = owner - (owner > drop).long()
    return memory, clump, single, owner


@pytest.mark.parametrize("seed", range(3))
def test_without_ties_the_tied_local_step_is_the_hdp_local_step(seed):
    groups, family, x, doc, post = setting(seed)
    memory = GroupedClumps.of_groups(family, groups)
    (_, point_resp, _, _), tied = memory.tied_local_step(post, max_iter=5000, tol=1e-13)
    resp, _, untied, _ = post.local_step(doc, x, torch.ones(len(x), dtype=x.dtype), len(groups), max_iter=5000,
                                         tol=1e-13)
    np.testing.assert_allclose(float(post.elbo(tied)), float(post.elbo(untied)), rtol=1e-10)
    torch.testing.assert_close(point_resp, resp, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("seed", range(6))
def test_the_tied_bound_is_the_untied_bound_of_its_expanded_factors_and_below_the_untied_optimum(seed):
    """Expanding the tied factors (each clump's q to its items, each document group's q(pi) to its groups) gives
    untied factors whose bound is the tied bound; the untied local step from them can only rise."""
    groups, family, x, doc, post = setting(seed)
    num_groups = len(groups)
    memory, clump, single, owner = tie(family, x, doc, num_groups, 6 + seed, 40, merges=seed % 4, seed=seed)
    (clump_resp, point_resp, theta, _), tied = memory.tied_local_step(post, max_iter=500, tol=1e-10)
    resp = torch.empty(len(x), post.K, dtype=x.dtype)
    resp[clump >= 0] = clump_resp[clump[clump >= 0]]
    resp[single] = point_resp
    doc_theta = theta[owner]
    counts = torch.zeros(num_groups, post.K, dtype=x.dtype).index_add_(0, doc, resp)
    ones = torch.ones(len(x), dtype=x.dtype)
    expanded = post.summarize(doc, x, ones, resp, doc_theta, expected_log_dirichlet(doc_theta), counts)
    np.testing.assert_allclose(float(post.elbo(expanded)), float(post.elbo(tied)), rtol=1e-10)
    _, _, best, _ = post.local_step(doc, x, ones, num_groups, init_counts=counts, max_iter=500, tol=1e-10)
    assert float(post.elbo(tied)) <= float(post.elbo(best)) + 1e-9 * abs(float(post.elbo(best)))


@pytest.mark.parametrize("split_prior", ["documents", "crp"])
@pytest.mark.parametrize("seed", range(4))
def test_over_a_random_stream_memory_stays_bounded_and_counts_are_exact_sums(seed, split_prior):
    rng = np.random.default_rng(seed)
    groups, _ = gaussian_groups(seed, num_groups=int(rng.integers(12, 24)), per_group=int(rng.integers(20, 50)))
    family = pm.Gaussian.from_data(np.concatenate(groups))
    bound = int(rng.integers(150, 600))
    epoch = int(rng.integers(3, 8))
    max_groups = None if seed == 0 else int(rng.integers(2, 6))
    records = []
    fit = MemoryBoundedHDP(family, int(rng.integers(2, 6)), bound, epoch, max_groups=max_groups, seed=seed, laps=20,
                           lifetime=3 * sum(map(len, groups)), split_prior=split_prior).fit(groups,
                                                                                           callback=records.append)
    memory = fit.clumps
    assert len(records) == -(-len(groups) // epoch)
    assert all(r["memory_used"] <= bound for r in records) and memory.memory() <= bound
    assert memory.num_items == sum(map(len, groups)) and memory.num_docs == len(groups)
    if max_groups is not None:
        assert all(r["groups"] <= max_groups for r in records)
    x = torch.as_tensor(np.concatenate(groups))
    total = scatter(family, x)
    kept = memory.stats["xx"].sum(0) + scatter(family, memory.points)
    torch.testing.assert_close(kept, total, rtol=1e-10, atol=1e-6)
    torch.testing.assert_close(memory.clump_groups.sum(1), memory.counts)
    per_group = memory.clump_groups.sum(0) + torch.bincount(memory.point_groups, minlength=memory.num_groups)
    assert float(per_group.sum()) == pytest.approx(len(x))


@pytest.mark.slow
def test_with_a_bound_larger_than_the_data_it_is_batch_vb():
    groups, _ = gaussian_groups(5, num_groups=10, per_group=40)
    family = pm.Gaussian.from_data(np.concatenate(groups))
    tight = {"laps": 300, "tol": 1e-13, "local_iters": 5000, "local_tol": 1e-13}
    stream = MemoryBoundedHDP(family, 4, 10**7, len(groups), alpha=0.7, gamma=3.0, seed=2, **tight)
    fit = stream.fit(groups)
    assert fit.clumps.num_clumps == 0 and fit.clumps.num_singlets == sum(map(len, groups))
    start = stream.initial_posterior(torch.as_tensor(np.concatenate(groups)))
    batch = MemoizedHDP(K=4, alpha=0.7, gamma=3.0, family=family, overrelax=False, **tight).fit(groups, 1,
                                                                                                 posterior=start)
    np.testing.assert_allclose(fit.elbo, batch.elbo_trace[-1], rtol=1e-8)


def test_bad_settings_are_clear_errors():
    groups, _ = gaussian_groups(0, num_groups=4, per_group=10)
    family = pm.Gaussian.from_data(np.concatenate(groups))
    with pytest.raises(ValueError, match="unknown moves \\['delete'\\]; choose from birth, merge"):
        MemoryBoundedHDP(family, 3, 1000, 2, moves="birth,delete")
    with pytest.raises(ValueError, match="max_groups must be a positive integer"):
        MemoryBoundedHDP(family, 3, 1000, 2, max_groups=0)
    for bad in (-1, 0, float("nan")):  # -1 raised ZeroDivisionError in fit, 0 'math domain error'
        with pytest.raises(ValueError, match="gamma must be a positive finite number"):
            MemoryBoundedHDP(family, 3, 1000, 2, gamma=bad)
    for bad in (float("inf"), "x", None):  # inf failed in fit as 'Cholesky failed', 'x' and None inside float()
        with pytest.raises(ValueError, match="alpha must be a positive finite number"):
            MemoryBoundedHDP(family, 3, 1000, 2, alpha=bad)
    with pytest.raises(ValueError, match="split_prior must be 'documents' or 'crp'"):
        MemoryBoundedHDP(family, 3, 1000, 2, split_prior="dirichlet")
    with pytest.raises(ValueError, match="groups \\[1\\] of this epoch are empty"):
        MemoryBoundedHDP(family, 3, 1000, 2).fit([groups[0], groups[1][:0]])
    # a group's bad rows name the group of the stream and its row in it (a NaN in row 1 of group 3 was "row 4" of
    # the concatenated epoch's rows, in an epoch the message did not name)
    bad = [np.array(g, dtype=np.float64) for g in groups[:4]]
    bad[3][1, 0] = np.nan
    with pytest.raises(pm.families.NonFiniteDataError, match=r"rows of group 3; the first is row 1$"):
        MemoryBoundedHDP(family, 3, 1000, 2).fit(bad)
    with pytest.raises(ValueError, match=r"^epoch 1 \(groups 2 to 3 of the stream\): every group needs"):
        MemoryBoundedHDP(family, 3, 1000, 2).fit([*groups[:3], groups[3][:0]])


def test_the_cli_reads_many_groups_in_one_pass(tmp_path):
    """fit groups.npz --model hdp --algo memory-bounded split the items with a pass over all rows per group:
    18.6 s for 400,000 rows in 8,000 groups before the first epoch, growing as rows times groups (Fashion-MNIST's
    55 million pixels in 70,000 images would take hours); one stable sort takes 0.5 s. The groups, in order of first
    appearance with their rows in file order, are the same. (The time is measured, not asserted: a test's seconds
    depend on what else the machine runs.)"""
    from pyro_memo.cli.models.hdp_bounded import load_groups

    rng = np.random.default_rng(0)
    x, ids = rng.normal(size=(300_000, 2)), rng.integers(-3000, 3000, 300_000)
    np.savez(tmp_path / "g.npz", x=x, groups=ids)
    parts, description = load_groups(str(tmp_path / "g.npz"))
    _, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    assert description.endswith("in 6000 groups") and len(parts) == 6000
    for place, g in enumerate(np.argsort(first)[::97]):
        np.testing.assert_array_equal(parts[place * 97], x[inverse == g])


def test_the_cli_fits_grouped_data_within_its_memory(tmp_path):
    import json

    from pyro_memo.cli import main

    groups, _ = gaussian_groups(1, num_groups=12, per_group=40)
    np.savez(tmp_path / "groups.npz", x=np.concatenate(groups), groups=np.repeat(np.arange(12), 40)[::-1].copy())
    argv = ["fit", str(tmp_path / "groups.npz"), "--model", "hdp", "--algo", "memory-bounded", "--memory", "400",
            "--epoch", "4", "--K", "5", "--groups", "5", "--json", str(tmp_path / "out.json"), "--save",
            str(tmp_path / "run"), "--quiet"]
    assert main(argv) == 0
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["algo"] == "memory-bounded" and out["model"] == "hdp" and out["groups_seen"] == 12
    assert len(out["epochs"]) == 3 and out["elbo"] == out["epochs"][-1]["elbo"]
    assert all(e["memory_used"] <= 400 and e["memory_bytes"] == 8 * e["memory_used"] and e["groups"] <= 5
               for e in out["epochs"])
    assert [e["documents"] for e in out["epochs"]] == [4, 8, 12] and out["epochs"][-1]["items"] == 480
    assert out["laps"] == sum(e["laps"] for e in out["epochs"]) > len(out["epochs"])  # as the DP mixture's
    saved = np.load(tmp_path / "run" / "posterior.npz")
    assert saved["labels"].shape == (480,) and saved["means"].shape == (5, 2)


@pytest.mark.parametrize("seed", range(3))
def test_the_tied_local_step_does_not_depend_on_the_singlets_order(seed):
    """Singlets need not be sorted by document group: shuffled, the bound is the same and each singlet keeps its
    responsibilities."""
    groups, family, x, doc, post = setting(seed)
    memory, _, _, _ = tie(family, x, doc, len(groups), 4, 60, merges=2, seed=seed)
    order = torch.randperm(memory.num_singlets, generator=torch.Generator().manual_seed(seed))
    shuffled = GroupedClumps(memory.counts, memory.stats, memory.points[order], memory.clump_groups,
                             memory.point_groups[order], memory.group_sizes)
    (clump_a, point_a, theta_a, _), a = memory.tied_local_step(post, max_iter=500, tol=1e-12)
    (clump_b, point_b, theta_b, _), b = shuffled.tied_local_step(post, max_iter=500, tol=1e-12)
    np.testing.assert_allclose(float(post.elbo(b)), float(post.elbo(a)), rtol=1e-12)
    torch.testing.assert_close(point_b, point_a[order], rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(theta_b, theta_a, rtol=1e-10, atol=1e-10)
    assert shuffled.sorted_by_group().point_groups.diff().ge(0).all()


@pytest.mark.parametrize("seed", range(3))
def test_regrouping_at_once_is_merging_pair_by_pair(seed):
    groups, family, x, doc, post = setting(seed, num_groups=9)
    memory, _, _, _ = tie(family, x, doc, len(groups), 5, 50, merges=0, seed=seed)
    g = torch.Generator().manual_seed(seed)
    one_by_one, target = memory, torch.arange(memory.num_groups)
    for _ in range(4):
        keep, drop = sorted(torch.randperm(one_by_one.num_groups, generator=g)[:2].tolist())
        one_by_one = one_by_one.merge_groups(keep, drop)
        target = torch.where(target == drop, keep, target)
        target = target - (target > drop).long()
    at_once = memory.regroup(target)
    torch.testing.assert_close(at_once.clump_groups, one_by_one.clump_groups)
    torch.testing.assert_close(at_once.group_sizes, one_by_one.group_sizes)
    assert torch.equal(at_once.point_groups, one_by_one.point_groups)


@pytest.mark.parametrize("seed", range(4))
def test_compression_with_repeated_items_across_groups_stores_exact_sums_within_the_bound(seed):
    """Quantised pixels repeat across images: compression merges equal singlets of the same first leaf into one
    unit; the clumps it stores still hold the exact statistics and group counts of their items."""
    rng = np.random.default_rng(seed)
    base = np.round(rng.normal(size=(40, 2)), 1)
    groups = [base[rng.integers(0, 40, size=int(rng.integers(30, 60)))] for _ in range(10)]
    family = pm.Gaussian.from_data(np.concatenate(groups))
    memory = GroupedClumps.of_groups(family, groups)
    bound = int(rng.integers(80, 300))
    K = 4
    post = MemoryBoundedHDP(family, K, bound, 10, seed=seed).initial_posterior(memory.points)
    point_resp = memory.tied_local_step(post)[0].point_resp
    compressed, leaves = Compressor(family, magnify=5.0, seed=seed).compress(memory, point_resp, bound)
    assert compressed.memory() <= bound
    assert sorted(torch.cat(leaves).tolist()) == list(range(memory.num_singlets))
    x = memory.points
    total = scatter(family, x)
    kept = compressed.stats["xx"].sum(0) + scatter(family, compressed.points)
    torch.testing.assert_close(kept, total, rtol=1e-10, atol=1e-8)
    per_group = compressed.clump_groups.sum(0) + torch.bincount(compressed.point_groups,
                                                              minlength=compressed.num_groups)
    torch.testing.assert_close(per_group, torch.tensor([float(len(g)) for g in groups], dtype=x.dtype))
    stored = [leaf for leaf in leaves if len(leaf) * 2 > compressed.clump_cost()]
    for c, leaf in enumerate(stored):
        items = memory.points[leaf]
        torch.testing.assert_close(compressed.stats["x"][c], (items - family.centre).sum(0), rtol=1e-10, atol=1e-8)
        owners = torch.bincount(memory.point_groups[leaf], minlength=memory.num_groups).to(x.dtype)
        torch.testing.assert_close(compressed.clump_groups[c], owners)


def test_equal_singlets_of_one_first_leaf_become_one_unit():
    from pyro_memo.memo.compression import Units

    family = pm.Gaussian.from_data(np.array([[0.0, 0.0], [1.0, 2.0], [3.0, 1.0]]))
    points = np.array([[0.0, 0.0], [1.0, 2.0], [0.0, 0.0], [1.0, 2.0], [0.0, 0.0]])
    memory = GroupedClumps.of_groups(family, [points[:2], points[2:]])
    units = Units(family, memory)
    distinct, owner = units.distinct(torch.tensor([0, 1, 0, 1, 1]))
    assert len(distinct) == 3  # (0, 0) in leaf 0 twice, (0, 0) in leaf 1 once, (1, 2) in leaf 1 twice
    assert sorted(distinct.multiplicity.tolist()) == [1, 2, 2]
    assert torch.equal(owner[distinct.members], torch.tensor([0, 1, 0, 1, 1]))
    torch.testing.assert_close(distinct.flat.sum(0), units.flat.sum(0))
    torch.testing.assert_close(distinct.counts.sum(), units.counts.sum())


@pytest.mark.parametrize("reuse", [False, True])
def test_compression_runs_its_own_local_step_unless_it_reuses_model_buildings(monkeypatch, reuse):
    """By default each compressing epoch runs one tied local step more than model building's laps (compression's
    own, under the final globals); with ``reuse_local`` it reads model building's last factors and runs none.
    Either way the memory stays within the bound and keeps exact sums."""
    groups, _ = gaussian_groups(3, num_groups=16, per_group=30)
    family = pm.Gaussian.from_data(np.concatenate(groups))
    steps, original = [], GroupedClumps.tied_local_step
    monkeypatch.setattr(GroupedClumps, "tied_local_step",
                        lambda self, *a, **k: steps.append(1) or original(self, *a, **k))
    records = []
    fit = MemoryBoundedHDP(family, 3, 300, 4, max_groups=3, laps=5, reuse_local=reuse).fit(
        groups, callback=lambda r: records.append((r, len(steps))))
    before = 0
    for record, after in records:
        assert after - before == record["laps"] + (0 if reuse else 1)
        assert record["memory_used"] <= 300
        before = after
    x = torch.as_tensor(np.concatenate(groups))
    kept = fit.clumps.stats["xx"].sum(0) + scatter(family, fit.clumps.points)
    torch.testing.assert_close(kept, scatter(family, x), rtol=1e-10, atol=1e-6)


def test_a_bound_too_small_for_one_clump_is_refused_before_model_building(monkeypatch):
    """As for the DP mixture: a clump of the HDP stores its count, statistics and one count per document group
    kept (max_groups), and a bound below that was found only by the first compression."""
    groups, _ = gaussian_groups(0, num_groups=4, per_group=10)
    family = pm.Gaussian.from_data(np.concatenate(groups))
    D = groups[0].shape[1]
    clump = 1 + D + D * D + 2  # count, statistics (x, xx) and 2 kept document groups
    monkeypatch.setattr(MemoryBoundedHDP, "build", lambda *a: pytest.fail("model building ran"))
    with pytest.raises(ValueError, match=f"memory_bound {clump - 1} cannot hold even one clump: .* one clump {clump} "):
        MemoryBoundedHDP(family, 3, clump - 1, 4, max_groups=2).fit(groups)
