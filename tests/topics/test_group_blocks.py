"""Items packed by group (:mod:`pyro_memo.posterior.group_blocks`) give the group counts of the flat items."""

import pytest
import torch

from pyro_memo.families import SparseResponsibilities
from pyro_memo.posterior.group_blocks import BLOCK_ELEMENTS, GroupBlocks, row_slices
from pyro_memo.posterior.hdp import GroupedHDPPosterior


def _flat_counts(values, group, count, weights, num_groups, L=None):
    """N_dk = sum over the items n of group d of count_n r_dnk, r_dnk = values_nk w_dk / z_n, on the flat items."""
    product = values * weights[group]
    if L is not None:
        return SparseResponsibilities.top_weights(product, L).scaled(count).table(group, num_groups)
    resp = product / product.sum(1, keepdim=True)
    return values.new_zeros(num_groups, values.shape[1]).index_add_(0, group, resp * count[:, None])


def _random_items(seed, num_groups, K):
    """Items of ``num_groups`` groups of very unequal sizes (some empty), shuffled."""
    gen = torch.Generator().manual_seed(seed)
    sizes = torch.randint(0, 40, (num_groups,), generator=gen) * torch.randint(0, 2, (num_groups,), generator=gen)
    group = torch.repeat_interleave(torch.arange(num_groups), sizes)
    group = group[torch.randperm(len(group), generator=gen)]
    values = torch.rand(len(group), K, generator=gen, dtype=torch.float64) ** 4
    count = torch.randint(1, 5, (len(group),), generator=gen).double()
    weights = torch.rand(num_groups, K, generator=gen, dtype=torch.float64) + 1e-3
    return values, group, count, weights


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("L", [None, 1, 3])
def test_block_counts_are_the_flat_counts_for_every_group(seed, L):
    num_groups, K = 3 + 7 * seed, 6
    values, group, count, weights = _random_items(seed, num_groups, K)
    blocks = GroupBlocks(values, group, count, num_groups, block_elements=6 * (1 + seed % 5) * 20)
    ids = blocks.groups
    assert sorted(ids.tolist()) == list(range(num_groups))
    expected = _flat_counts(values, group, count, weights, num_groups, L)
    torch.testing.assert_close(blocks.counts(weights[ids], L), expected[ids], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_kept_groups_keep_their_counts(seed):
    num_groups, K = 30, 5
    values, group, count, weights = _random_items(seed, num_groups, K)
    blocks = GroupBlocks(values, group, count, num_groups, block_elements=5 * 80)
    expected = _flat_counts(values, group, count, weights, num_groups)
    mask = torch.rand(num_groups, generator=torch.Generator().manual_seed(seed)) < 0.4
    kept = blocks.groups[mask]
    blocks.keep(mask)
    assert blocks.groups.tolist() == kept.tolist()
    assert all(len(groups) for groups, _, _ in blocks.blocks)
    torch.testing.assert_close(blocks.counts(weights[kept]), expected[kept], rtol=1e-12, atol=1e-12)
    blocks.keep(torch.zeros(len(kept), dtype=torch.bool))
    assert blocks.blocks == [] and blocks.counts(weights[:0]).shape == (0, K)


def test_no_items_gives_zero_counts():
    blocks = GroupBlocks(torch.zeros(0, 3, dtype=torch.float64), torch.zeros(0, dtype=torch.long),
                         torch.zeros(0, dtype=torch.float64), 4)
    assert blocks.counts(torch.ones(4, 3, dtype=torch.float64)).abs().sum() == 0


def test_no_groups():
    blocks = GroupBlocks(torch.zeros(0, 3, dtype=torch.float64), torch.zeros(0, dtype=torch.long),
                         torch.zeros(0, dtype=torch.float64), 0)
    assert blocks.groups.shape == (0,) and blocks.counts(torch.ones(0, 3, dtype=torch.float64)).shape == (0, 3)


def test_blocks_hold_at_most_their_budget_unless_one_group_is_larger():
    values, group, count, _ = _random_items(5, 40, 4)
    blocks = GroupBlocks(values, group, count, 40, block_elements=4 * 50)
    for groups, block, _ in blocks.blocks:
        assert block.numel() <= 4 * 50 or len(groups) == 1


@pytest.mark.parametrize("rows, K", [(0, 3), (1, 1), (7, 5), (BLOCK_ELEMENTS // 100 + 1, 100), (30_000, 17)])
def test_row_slices_cover_every_row_once_within_the_budget(rows, K):
    values = torch.empty(rows, K)
    covered = torch.cat([torch.arange(rows)[s] for s in row_slices(values)]) if rows else torch.arange(0)
    assert covered.tolist() == list(range(rows))
    assert all(values[s].numel() <= max(BLOCK_ELEMENTS, K) for s in row_slices(values))


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("L", [None, 2])
def test_final_sweep_in_row_chunks_is_the_flat_sweep(seed, L):
    """The HDP's last sweep, formed in place in cache-sized row chunks, gives the flat responsibilities and
    counts, over several chunks."""
    num_groups, K = 50 + seed, 40 + 20 * seed
    gen = torch.Generator().manual_seed(seed)
    group = torch.randint(0, num_groups, (2 * BLOCK_ELEMENTS // K + seed,), generator=gen)
    values = torch.rand(len(group), K, generator=gen, dtype=torch.float64) ** 4
    count = torch.randint(1, 5, (len(group),), generator=gen).double()
    weights = torch.rand(num_groups, K, generator=gen, dtype=torch.float64) + 1e-3
    assert len(row_slices(values)) >= 2
    product = values * weights[group]
    resp, counts = GroupedHDPPosterior._final_responsibilities(values.clone(), group, count, weights, num_groups, L)
    if L is None:
        torch.testing.assert_close(resp, product / product.sum(1, keepdim=True), rtol=1e-12, atol=1e-15)
    else:
        expected = SparseResponsibilities.top_weights(product, L)
        assert torch.equal(resp.indices, expected.indices)
        torch.testing.assert_close(resp.values, expected.values, rtol=1e-12, atol=1e-15)
    torch.testing.assert_close(counts, _flat_counts(values, group, count, weights, num_groups, L),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("seed", range(8))
def test_blocks_gathered_from_a_shared_table_are_the_blocks_of_its_rows(seed):
    """Items that are rows ``index`` of a table (the topic model's words) give the blocks, and the counts, of the
    flat items ``table[index]``."""
    num_groups, K = 5 + 4 * seed, 6
    _, group, count, weights = _random_items(seed, num_groups, K)
    gen = torch.Generator().manual_seed(100 + seed)
    table = torch.rand(3 + seed, K, generator=gen, dtype=torch.float64) ** 4
    index = torch.randint(0, len(table), (len(group),), generator=gen)
    budget = K * (1 + seed % 4) * 15
    shared = GroupBlocks(table, group, count, num_groups, block_elements=budget, index=index)
    flat = GroupBlocks(table[index], group, count, num_groups, block_elements=budget)
    assert torch.equal(shared.groups, flat.groups) and len(shared.blocks) == len(flat.blocks)
    for a, b in zip(shared.blocks, flat.blocks, strict=True):
        assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    ids = shared.groups
    torch.testing.assert_close(shared.counts(weights[ids]),
                               _flat_counts(table[index], group, count, weights, num_groups)[ids],
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("L", [None, 3])
def test_the_topic_local_step_from_its_word_table_is_the_step_on_flat_tokens(seed, L):
    """HDPPosterior.local_step (blocks from the word table) against the same step on one row per token."""
    from pyro_memo.topics import HDPPosterior
    from tests.topics.test_hdp_sparse import fitted_topics

    corpus, post = fitted_topics(seed)
    doc, word, count = corpus.tokens()

    class FlatTokens(HDPPosterior):
        def item_table(self, items):
            return self.item_likelihoods(items), None

    flat = FlatTokens(post.lam, post.rho, post.omega, post.alpha, post.gamma, post.lam0)
    for init in (None, post.local_step(doc, word, count, corpus.num_docs)[1]):
        want = flat.local_step(doc, word, count, corpus.num_docs, init_counts=init, sparse_L=L)
        got = post.local_step(doc, word, count, corpus.num_docs, init_counts=init, sparse_L=L)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1]) and got[3] == want[3]
        assert float(post.elbo(got[2])) == float(flat.elbo(want[2]))
