"""Initial topics: KL k-means of the documents, random documents, and the held first lap."""

import numpy as np
import pytest
import torch

from pyro_memo.allocation.hdp_sticks import expected_beta, sticks_from_sizes
from pyro_memo.topics import HDPPosterior, MemoizedHDP, from_counts
from pyro_memo.topics.topic_init import initial_topics, kmeans_topics


def grouped_corpus(seed, groups=4, docs_per_group=25, V=40, length=60):
    """Documents drawn from ``groups`` topics with disjoint supports; returns the corpus and
    each document's group."""
    rng = np.random.default_rng(seed)
    support = np.array_split(rng.permutation(V), groups)
    rows, labels = [], []
    for g, words in enumerate(support):
        p = np.zeros(V)
        p[words] = rng.dirichlet(np.ones(len(words)))
        for _ in range(docs_per_group):
            rows.append(rng.multinomial(length, p))
            labels.append(g)
    order = rng.permutation(len(rows))
    return from_counts(np.stack(rows)[order]), np.asarray(labels)[order]


@pytest.mark.parametrize("seed", range(5))
def test_kmeans_recovers_documents_with_disjoint_topics(seed):
    corpus, labels = grouped_corpus(seed)
    centers = kmeans_topics(corpus, 4, seed=seed)
    assert centers.shape == (4, corpus.vocab_size)
    # every word count lands in some cluster, and each cluster pools exactly one group's documents
    np.testing.assert_allclose(centers.sum(), corpus.num_tokens)
    dense = corpus.to_dense()
    pooled = np.stack([dense[labels == g].sum(0) for g in range(4)])
    match = [[g for g in range(4) if np.array_equal(centers[k], pooled[g])] for k in range(4)]
    assert sorted(m[0] for m in match if len(m) == 1) == [0, 1, 2, 3]


def test_kmeans_keeps_every_cluster_in_use():
    # many more clusters than groups: empty clusters take the worst-served documents
    corpus, _ = grouped_corpus(0, groups=2, docs_per_group=15)
    centers = kmeans_topics(corpus, 12, seed=0)
    assert np.all(centers.sum(1) > 0)
    np.testing.assert_allclose(centers.sum(), corpus.num_tokens)


def test_initial_topics_schemes_and_errors():
    corpus, _ = grouped_corpus(1)
    lam = initial_topics(corpus, 5, lam0=0.2, init="documents", seed=3)
    dense = torch.as_tensor(corpus.to_dense())
    # each topic is the prior plus one document's counts
    assert all(any(torch.allclose(row - 0.2, d, atol=1e-12, rtol=0) for d in dense) for row in lam)
    lam = initial_topics(corpus, 5, lam0=0.2, dtype=torch.float32)
    assert lam.dtype == torch.float32 and float(lam.min()) >= 0.2
    with pytest.raises(ValueError, match="init must be one of"):
        initial_topics(corpus, 5, init="random")
    with pytest.raises(ValueError, match="at least K = 500 non-empty documents.*init='documents'"):
        kmeans_topics(corpus, 500)
    assert initial_topics(corpus, 500, init="documents").shape[0] == 500  # the init the message offers takes it
    with pytest.raises(ValueError, match="init must be one of"):
        MemoizedHDP(init="bogus")


@pytest.mark.parametrize("init", ["kmeans", "documents"])
def test_first_lap_holds_the_initial_topics_until_the_memo_is_complete(init):
    corpus, _ = grouped_corpus(2)
    model = MemoizedHDP(K=6, laps=1, seed=0, init=init)
    start = model.initial_posterior(corpus)
    fit = model.fit(corpus, 5)
    # every batch's local step ran against the initial topics: the globals after lap 1 are
    # those optimal for the summaries of those local steps
    total = None
    for docs in model.batches(corpus, 5, model.seed):
        _, _, summary, _ = start.local_step(*corpus.tokens(docs), len(docs), max_iter=model.local_iters,
                                            tol=model.local_tol)
        total = summary if total is None else total + summary
    torch.testing.assert_close(fit.posterior.lam, start.updated(total).lam)
    # the classic schedule refits after each batch and ends elsewhere
    incremental = MemoizedHDP(K=6, laps=1, seed=0, init=init, incremental_first_lap=True).fit(corpus, 5)
    assert not torch.allclose(incremental.posterior.lam, fit.posterior.lam)


def test_fit_uses_the_kmeans_topics_by_default_largest_first_with_sticks_that_follow_their_sizes():
    corpus, _ = grouped_corpus(3)
    model = MemoizedHDP(K=4, seed=7)
    post = model.initial_posterior(corpus)
    assert isinstance(post, HDPPosterior)
    counts = torch.as_tensor(kmeans_topics(corpus, 4, 0.1, seed=7))
    order = torch.argsort(counts.sum(1), descending=True)
    torch.testing.assert_close(post.lam, 0.1 + counts[order])
    rho, omega = sticks_from_sizes(counts.sum(1)[order], model.gamma, corpus.num_docs)
    torch.testing.assert_close(post.rho, rho)
    torch.testing.assert_close(post.omega, omega)


@pytest.mark.parametrize("seed", range(5))
def test_initial_sticks_are_the_dp_update_for_documents_shared_out_by_size(seed):
    rng = np.random.default_rng(seed)
    K, gamma, draws = int(rng.integers(2, 30)), float(rng.uniform(0.5, 50)), float(rng.uniform(10, 1e4))
    sizes = torch.as_tensor(np.sort(rng.gamma(1.0, 100.0, K))[::-1].copy())
    rho, omega = sticks_from_sizes(sizes, gamma, draws)
    n = draws * sizes / sizes.sum()
    for k in range(K):  # q(u_k) = Beta(1 + n_k, gamma + sum_{l > k} n_l)
        torch.testing.assert_close(rho[k] * omega[k], 1 + n[k])
        torch.testing.assert_close((1 - rho[k]) * omega[k], gamma + n[k + 1:].sum())
    # with many draws the expected weights are the sizes' shares
    beta = expected_beta(sticks_from_sizes(sizes, gamma, 1e9)[0])
    torch.testing.assert_close(beta[:-1], sizes / sizes.sum(), rtol=1e-6, atol=1e-9)
    # no sizes at all (documents that are all empty): the prior's sticks
    rho, omega = sticks_from_sizes(torch.zeros(K, dtype=torch.float64), gamma, draws)
    torch.testing.assert_close(rho, torch.full((K,), 1 / (1 + gamma), dtype=torch.float64))
    torch.testing.assert_close(omega, torch.full((K,), 1 + gamma, dtype=torch.float64))
