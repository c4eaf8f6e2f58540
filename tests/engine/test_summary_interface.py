"""The summary interface: one implementation of add, subtract, scale, select, expand, merge, move
and store for every summary, and per-move terms carried with a batch's summary."""

import pytest
import torch

import pyro_memo as pm
from pyro_memo.summaries import GroupSummary, Summary, TopicSummary


def mixture(seed, n=50, K=4):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 3, generator=g, dtype=torch.float64)
    resp = torch.softmax(torch.randn(n, K, generator=g, dtype=torch.float64), -1)
    return pm.Gaussian.from_data(x), x, resp


@pytest.mark.parametrize("seed", range(4))
def test_mixture_summaries_add_subtract_scale_and_select_like_their_items(seed):
    family, x, resp = mixture(seed)
    whole = Summary.from_responsibilities(family, x, resp)
    a = Summary.from_responsibilities(family, x[:20], resp[:20])
    b = Summary.from_responsibilities(family, x[20:], resp[20:])
    torch.testing.assert_close((a + b).stats["xx"], whole.stats["xx"])
    assert (a + b).num_items == whole.num_items == 50
    torch.testing.assert_close((whole - b).counts, a.counts)
    torch.testing.assert_close(a.scaled(2.5).stats["x"], 2.5 * a.stats["x"])
    order = [2, 0, 3, 1]
    torch.testing.assert_close(whole.select(order).stats["x"], Summary.from_responsibilities(
        family, x, resp[:, order]).stats["x"])
    merged = resp[:, [0, 1, 3]].clone()
    merged[:, 1] += resp[:, 2]
    h = -torch.special.xlogy(merged[:, 1], merged[:, 1]).sum()
    direct = Summary.from_responsibilities(family, x, merged)
    got = whole.merge(1, 2, h)
    torch.testing.assert_close(got.stats["xx"], direct.stats["xx"])
    torch.testing.assert_close(got.entropy, direct.entropy)
    assert whole.expand(6).K == 6 and float(whole.expand(6).counts[4:].abs().sum()) == 0.0
    back = Summary.from_dict(whole.to_dict())
    torch.testing.assert_close(back.stats["xx"], whole.stats["xx"])
    assert whole.to(dtype=torch.float32).counts.dtype == torch.float32


def test_topic_and_group_summaries_keep_the_tail_last_and_refuse_what_they_cannot_do():
    t = TopicSummary(torch.rand(3, 5), torch.arange(4.0), torch.tensor(2.0), torch.rand(3), 7)
    picked = t.select([2, 0])
    assert picked.sum_log_pi.tolist() == [2.0, 0.0, 3.0] and picked.num_docs == 7
    assert float((t + t).doc_term) == 4.0 and (t + t).num_docs == 14
    with pytest.raises(ValueError, match="cannot be expanded"):
        t.expand(5)
    with pytest.raises(ValueError, match="cannot be merged"):
        t.merged(0, 1)
    g = GroupSummary(torch.ones(2), {"x": torch.ones(2, 3)}, torch.zeros(3), torch.tensor(0.0), torch.ones(2), 4)
    assert (g + g).stats["x"].sum() == 12 and (g + g).num_items == 8
    with pytest.raises(ValueError, match="K=2 and K=3"):
        t.select([0, 1]) + t


def test_per_move_terms_travel_with_the_summary_and_are_dropped_when_components_change():
    family, x, resp = mixture(0)
    a = Summary.from_responsibilities(family, x[:20], resp[:20])
    b = Summary.from_responsibilities(family, x[20:], resp[20:])
    a.extras["merge"], b.extras["merge"] = torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0])
    a.extras["other"] = torch.tensor([5.0])
    total = a + b
    assert total.extras["merge"].tolist() == [4.0, 6.0] and "other" not in total.extras
    assert (total - b).extras["merge"].tolist() == [1.0, 2.0]
    assert total.scaled(2.0).extras["merge"].tolist() == [8.0, 12.0]
    assert total.select([1, 0, 2, 3]).extras == {} and total.merge(0, 1, torch.tensor(0.0)).extras == {}
    assert total.without("merge").extras == {} and "merge" in total.extras
    assert Summary.from_dict(a.to_dict()).extras["other"].tolist() == [5.0]


@pytest.mark.parametrize("seed", range(10))
def test_entropy_per_component_is_the_weighted_sum_of_r_log_r(seed):
    """Chunked, with or without multiplicities, zeros and subnormal responsibilities included, float32
    responsibilities with float64 weights summed in float64: the entropy of the formula."""
    from pyro_memo.summaries import entropy_per_component
    from pyro_memo.summaries.mixture import ENTROPY_CHUNK

    gen = torch.Generator().manual_seed(seed)
    K = 1 + seed * 7
    N = [0, 1, 5, ENTROPY_CHUNK // K + 3, 3 * ENTROPY_CHUNK // K][seed % 5]
    resp = torch.softmax(8 * torch.randn(N, K, generator=gen, dtype=torch.float64), 1)
    resp[torch.rand(N, K, generator=gen) < 0.2] = 0.0
    if N:
        resp[0, 0] = 1e-310  # subnormal
    weights = torch.randint(1, 6, (N,), generator=gen).double()
    expected = -torch.special.xlogy(resp, resp)
    torch.testing.assert_close(entropy_per_component(resp), expected.sum(0), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(entropy_per_component(resp, weights), (weights[:, None] * expected).sum(0),
                               rtol=1e-12, atol=1e-12)
    single = entropy_per_component(resp.float(), weights)
    assert single.dtype == torch.float64
    torch.testing.assert_close(single, (weights[:, None] * -torch.special.xlogy(resp.float(), resp.float())).sum(0),
                               rtol=1e-6, atol=1e-6)
