"""The dense local step runs in chunks of items and sums each chunk's counts, entropy and
``chunk_stats``, finishing the statistics once: the result must be the one-pass summary of all items."""

import pytest
import torch

import pyro_memo as pm
from pyro_memo.inference.dp_mixture_posterior import DPMixturePosterior
from pyro_memo.summaries import Summary
from tests.conftest import FAMILY_NAMES, make_data


def assert_same_summary(got, want, rtol=1e-12):
    assert got.stats.keys() == want.stats.keys() and got.num_items == want.num_items
    pairs = [(got.counts, want.counts), (got.entropy, want.entropy)]
    pairs += [(got.stats[k], want.stats[k]) for k in want.stats]
    for a, b in pairs:
        scale = float(b.abs().max()) or 1.0
        torch.testing.assert_close(a, b, rtol=rtol, atol=rtol * scale)


def fitted(name, seed, D=3, K=6):
    x = make_data(name, 300, D=D, seed=seed)
    result = pm.MemoizedVB(pm.get_family(name).from_data(x), K, laps=2, seed=seed).fit(x, num_batches=3)
    return result.posterior, result.posterior.family.check_data(x)


@pytest.mark.parametrize("name,seed", [(name, seed) for name in FAMILY_NAMES for seed in range(2)])
def test_chunk_stats_summed_and_finished_are_the_statistics_of_all_items(name, seed):
    posterior, x = fitted(name, seed)
    family = posterior.family
    resp = posterior.responsibilities(x)
    cuts = sorted(torch.randperm(x.shape[0] - 1, generator=torch.Generator().manual_seed(seed))[:5].add(1).tolist())
    total = None
    for lo, hi in zip([0] + cuts, cuts + [x.shape[0]], strict=True):
        chunk = x[lo:hi]
        part = family.chunk_stats(chunk, resp[lo:hi], family.item_products(chunk))
        total = part if total is None else {k: total[k] + part[k] for k in part}
    want = family.stats(x, resp)
    got = family.finish_stats(total)
    assert got.keys() == want.keys()
    for k in want:
        torch.testing.assert_close(got[k], want[k], rtol=1e-12, atol=1e-12 * float(want[k].abs().max()))


@pytest.mark.parametrize("name", FAMILY_NAMES)
@pytest.mark.parametrize("rows", [1, 7, 64])
def test_a_chunked_dense_local_step_is_the_one_pass_summary(monkeypatch, name, rows):
    posterior, x = fitted(name, 3)
    whole_resp, whole = posterior.local_step(x)  # one chunk: 300 items are under the smallest chunk size
    assert posterior.chunk_rows(x) >= x.shape[0]
    monkeypatch.setattr(DPMixturePosterior, "chunk_rows", lambda self, x: rows)
    resp, summary = posterior.local_step(x)
    torch.testing.assert_close(resp, whole_resp, rtol=1e-12, atol=1e-300)
    assert_same_summary(summary, whole)
    assert_same_summary(summary, Summary.from_responsibilities(posterior.family, x, posterior.responsibilities(x)))
