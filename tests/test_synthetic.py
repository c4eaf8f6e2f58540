"""Synthetic generators: shapes, labels and the component structure they promise."""

import numpy as np
import pytest

from pyro_memo.data.graphs import assortative_graph
from pyro_memo.data.synthetic import bars_corpus, crp_gaussian_mixture, lda_corpus
from pyro_memo.synthetic import dp_gaussian_mixture, edge_covariances, toy_patches


def test_toy_patches_follow_their_covariances():
    x, labels, covs = toy_patches(40_000, seed=1)
    assert x.shape == (40_000, 25) and covs.shape == (8, 25, 25)
    assert np.bincount(labels).min() > 4_000  # equally common
    for k in (0, 5):
        empirical = np.cov(x[labels == k].T, bias=True)
        assert np.abs(empirical - covs[k]).max() < 0.1
    assert np.all(np.linalg.eigvalsh(edge_covariances()) > 0)


def test_dp_gaussian_mixture_clusters_around_their_means():
    x, labels = dp_gaussian_mixture(5_000, 4, alpha=2.0, seed=3)
    assert x.shape == (5_000, 4) and labels.min() == 0
    assert set(np.unique(labels)) == set(range(labels.max() + 1))
    big = np.flatnonzero(np.bincount(labels) > 200)
    assert len(big) >= 2
    for k in big:
        # unit noise around each component mean
        assert abs(x[labels == k].std(0).mean() - 1.0) < 0.1
    again, _ = dp_gaussian_mixture(5_000, 4, alpha=2.0, seed=3)
    assert np.array_equal(x, again)


def test_crp_mixture_draws_the_dp_prior_number_of_clusters():
    from pyro_memo.data import crp_gaussian_mixture

    alpha, n = 3.0, 400
    counts = [int(crp_gaussian_mixture(n, 2, alpha, seed=s)[1].max()) + 1 for s in range(40)]
    expected = sum(alpha / (alpha + i) for i in range(n))  # E[C] under the CRP, exactly
    assert abs(np.mean(counts) - expected) < 4 * np.std(counts) / np.sqrt(len(counts))
    x, labels = crp_gaussian_mixture(50, 3, alpha, seed=1)
    assert x.shape == (50, 3) and sorted(set(labels.tolist())) == list(range(labels.max() + 1))


def test_alpha_posterior_mean_matches_quadrature():
    from scipy import integrate
    from scipy.special import gammaln

    from pyro_memo.allocation import alpha_posterior_mean

    C, N, s1, s2 = 12, 500, 2.0, 0.5

    def log_post(a):
        return (s1 - 1 + C) * np.log(a) - s2 * a + gammaln(a) - gammaln(a + N)

    top = log_post(np.linspace(0.01, 60, 10_000)).max()
    moments = [integrate.quad(lambda a, k=k: a**k * np.exp(log_post(a) - top), 0, np.inf)[0] for k in (0, 1)]
    ref = moments[1] / moments[0]
    assert abs(alpha_posterior_mean(C, N, s1, s2) - ref) < 1e-4 * ref


def test_lda_corpus_draws_its_documents_from_its_topics():
    corpus, topics, weights = lda_corpus(2000, 30, vocab_size=50, num_topics=4, alpha=0.3, seed=2)
    assert corpus.num_docs == 2000 and corpus.vocab_size == 50 and corpus.num_tokens == 2000 * 30
    assert topics.shape == (4, 50) and weights.shape == (2000, 4)
    assert np.allclose(topics.sum(1), 1.0) and np.allclose(weights.sum(1), 1.0)
    doc, word, count = (t.numpy() for t in corpus.tokens()[:3])
    counts = np.zeros((2000, 50))
    np.add.at(counts, (doc, word), count)
    expected = 30 * weights @ topics  # each document's expected word counts
    assert abs((counts - expected).sum(0)).max() < 5 * np.sqrt(expected.sum(0)).max()
    again = lda_corpus(2000, 30, vocab_size=50, num_topics=4, alpha=0.3, seed=2)
    assert np.array_equal(again[1], topics)


@pytest.mark.parametrize("call,match", [
    (lambda: toy_patches(10, num_components=0), "num_components must be a positive integer; got 0"),
    (lambda: toy_patches(-5), "num_items must be a positive integer; got -5"),
    (lambda: toy_patches(10, patch=0), "patch must be a positive integer; got 0"),
    (lambda: dp_gaussian_mixture(5, 2, alpha=0), "alpha must be a positive finite number; got 0"),
    (lambda: crp_gaussian_mixture(5, 2, alpha=-1), "alpha must be a positive finite number; got -1"),
    (lambda: bars_corpus(num_docs=0), "num_docs must be a positive integer"),
    (lambda: bars_corpus(side=0), "side must be a positive integer"),
    (lambda: bars_corpus(doc_length=-1), "doc_length must be a positive integer"),
    (lambda: lda_corpus(vocab_size=0), "vocab_size must be a positive integer"),
    (lambda: lda_corpus(beta=0), "beta must be a positive finite number"),
    (lambda: assortative_graph(5, 2, block_size=-1), "block_size must be a positive integer"),
])
def test_the_generators_refuse_arguments_they_cannot_honour(call, match):
    """Before, these raised numpy's errors or, for a negative block size, returned a graph without links."""
    with pytest.raises(ValueError, match=match):
        call()
