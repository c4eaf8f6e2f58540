"""Over-relaxed group sweeps (:mod:`pyro_memo.posterior.relaxed_sweeps`): the group objective they
safeguard is the bound with optimal responsibilities, plain sweeps never lower it, and a relaxed local
step never ends below its start."""

import numpy as np
import pytest
import torch

from pyro_memo.posterior.group_blocks import GroupBlocks
from pyro_memo.posterior.relaxed_sweeps import group_weights_and_terms
from pyro_memo.topics import MemoizedHDP

from .test_memoized_hdp import random_corpus


def _setup(seed, K=6, laps=2):
    corpus = random_corpus(seed)
    post = MemoizedHDP(K=K, laps=laps, seed=seed, alpha=0.3 + 0.2 * seed).fit(corpus, 3).posterior
    doc, word, count = corpus.tokens()
    count = count.double()
    return corpus, post, doc, word, count


def _objective(post, doc, word, count, counts):
    """The module's per-group objective at ``counts``, and the plain sweep's counts from there."""
    n = counts.shape[0]
    prior = post.alpha * post.expected_beta()
    weights, offset, shift = group_weights_and_terms(counts, prior)
    blocks = GroupBlocks(post.item_likelihoods(word), doc, count, n)
    ids = blocks.groups
    new, log_norm = blocks.counts(weights[ids], log_norm=True)
    tokens = torch.zeros(n, dtype=torch.float64).index_add_(0, doc, count)
    objective, swept = torch.empty(n, dtype=torch.float64), torch.empty_like(counts)
    objective[ids] = log_norm + tokens[ids] * shift[ids] + offset[ids]
    swept[ids] = new
    return objective, swept


def _brute_force(post, doc, word, count, counts):
    """Each group's bound terms with the optimal responsibilities for theta = alpha E[beta] + counts, written
    out term by term (up to terms that do not depend on counts)."""
    K = post.K
    prior = post.alpha * post.expected_beta()
    theta = torch.cat([counts + prior[:K], prior[K:].expand(len(counts), 1)], 1)
    e_log_pi = torch.digamma(theta) - torch.digamma(theta.sum(1, keepdim=True))
    log_phi = torch.log(post.item_likelihoods(word))  # E log p(x_n | topic k) up to a per-token constant
    log_w = e_log_pi[doc, :K] + log_phi
    resp = torch.softmax(log_w, 1)
    per_token = count * (resp * (log_w - torch.log(resp))).sum(1)
    items = torch.zeros(len(counts), dtype=torch.float64).index_add_(0, doc, per_token)
    dirichlet = ((prior - theta) * e_log_pi).sum(1) - torch.lgamma(theta.sum(1)) + torch.lgamma(theta).sum(1)
    return items + dirichlet


@pytest.mark.parametrize("seed", range(8))
def test_group_objective_is_the_bound_with_optimal_responsibilities(seed):
    corpus, post, doc, word, count = _setup(seed)
    gen = torch.Generator().manual_seed(seed)
    a, b = (torch.rand(corpus.num_docs, post.K, generator=gen, dtype=torch.float64) * 20 for _ in range(2))
    moved = _objective(post, doc, word, count, a)[0] - _objective(post, doc, word, count, b)[0]
    expected = _brute_force(post, doc, word, count, a) - _brute_force(post, doc, word, count, b)
    torch.testing.assert_close(moved, expected, rtol=1e-9, atol=1e-8)


@pytest.mark.parametrize("seed", range(8))
def test_a_plain_sweep_never_lowers_the_group_objective(seed):
    corpus, post, doc, word, count = _setup(seed)
    gen = torch.Generator().manual_seed(100 + seed)
    counts = torch.rand(corpus.num_docs, post.K, generator=gen, dtype=torch.float64) ** 3 * 30
    before, swept = _objective(post, doc, word, count, counts)
    after, _ = _objective(post, doc, word, count, swept)
    assert bool((after >= before - 1e-9 * before.abs()).all())
    assert float((after - before).max()) > 0


def _revisit(seed, overrelax):
    """Local parameters from an early posterior revisited under a later one, warm-started from their counts:
    ``(bound of the cached parameters, bound after the step, sweeps)`` under the later posterior."""
    corpus = random_corpus(seed)
    doc, word, count = corpus.tokens()
    early = MemoizedHDP(K=8, laps=1, seed=seed).fit(corpus, 2).posterior
    late = MemoizedHDP(K=8, laps=4, seed=seed).fit(corpus, 2).posterior
    _, cached, old, _ = early.local_step(doc, word, count, corpus.num_docs, max_iter=3, overrelax=False)
    _, _, new, iters = late.local_step(doc, word, count, corpus.num_docs, init_counts=cached, tol=1e-6,
                                       max_iter=500, overrelax=overrelax)
    return float(late.elbo(old)), float(late.elbo(new)), iters


@pytest.mark.parametrize("seed", range(12))
def test_relaxed_local_step_never_ends_below_its_start(seed):
    """The memoized guarantee: the bound after the step is at least that of the cached local parameters."""
    old, new, _ = _revisit(seed, overrelax=True)
    assert new >= old - 1e-9 * abs(new)


def test_relaxed_sweeps_take_fewer_sweeps_than_plain_ones():
    relaxed, plain = ([_revisit(seed, overrelax)[2] for seed in range(6)] for overrelax in (True, False))
    assert sum(relaxed) < 0.8 * sum(plain), (relaxed, plain)


@pytest.mark.parametrize("seed", range(4))
def test_relaxed_sweeps_stop_at_a_fixed_point(seed):
    corpus, post, doc, word, count = _setup(seed)
    _, counts, _, iters = post.local_step(doc, word, count, corpus.num_docs, tol=1e-8, max_iter=5000)
    assert iters < 5000
    _, again, _, _ = post.local_step(doc, word, count, corpus.num_docs, init_counts=counts, max_iter=1,
                                     overrelax=False)
    torch.testing.assert_close(again, counts, atol=1e-6, rtol=0)
    assert np.isfinite(counts.numpy()).all()
