"""Synthetic data generators (no downloads)."""

import math

import numpy as np

from ..checks import as_positive_float, as_positive_int, as_rng
from .corpus import from_counts


def edge_covariances(patch=5, num_components=8, contrast=1.0, shared=0.5, noise=0.01):
    """Covariances of zero-mean ``patch x patch`` image patches with a strong edge.

    Component ``k`` has a straight edge through the patch centre at angle
    :math:`\\pi k / K`: one latent amplitude lifts the pixels on one side and lowers those
    on the other (variance ``contrast``), on top of a common brightness shared by all
    pixels (``shared``) and independent pixel noise (``noise``). This mirrors the toy
    data of Hughes & Sudderth 2013, §4.1 (8 components, 25 x 25 covariances, 5 x 5 patches with a
    strong edge); with the defaults the Bayes classifier that knows the true covariances
    labels about 96% of patches correctly.

    :returns: ``(num_components, patch**2, patch**2)`` array.
    """
    coords = np.stack(np.meshgrid(np.arange(patch), np.arange(patch), indexing="ij"), -1).reshape(-1, 2)
    centred = coords - (patch - 1) / 2.0
    d = patch * patch
    base = shared * np.ones((d, d)) + noise * np.eye(d)
    covs = []
    for k in range(num_components):
        angle = math.pi * k / num_components
        normal = np.array([math.cos(angle), math.sin(angle)])
        side = np.where(centred @ normal >= -1e-9, 1.0, -1.0)
        covs.append(base + contrast * np.outer(side, side))
    return np.stack(covs)


def toy_patches(num_items=100_000, seed=0, patch=5, num_components=8):
    """The paper's toy dataset: ``num_items`` patches from an equally weighted zero-mean GMM
    with :func:`edge_covariances`.

    :returns: ``(x, labels, covariances)`` with ``x`` of shape ``(N, patch**2)`` (float64).
    """
    num_items, patch = as_positive_int(num_items, "num_items"), as_positive_int(patch, "patch")
    num_components = as_positive_int(num_components, "num_components")
    covs = edge_covariances(patch, num_components)
    rng = as_rng(seed)
    labels = rng.integers(num_components, size=num_items)
    chol = np.linalg.cholesky(covs)
    x = rng.standard_normal((num_items, patch * patch))
    for k in range(num_components):
        rows = labels == k
        x[rows] = x[rows] @ chol[k].T
    return x, labels, covs


def dp_gaussian_mixture(num_items, dim, alpha=1.0, separation=3.0, seed=0):
    """Items from a DP mixture of Gaussians, as in Blei & Jordan 2006, §5: stick-breaking weights with
    concentration ``alpha``, component means from :math:`N(0, \\text{separation}^2 I)` (so the
    typical distance between means grows like :math:`\\sqrt{D}` relative to the unit noise, a
    scaling comparable across dimensions) and unit diagonal covariances.

    :returns: ``(x, labels)``: ``(N, dim)`` float64 array and ``(N,)`` component labels.
    """
    num_items, dim = as_positive_int(num_items, "num_items"), as_positive_int(dim, "dim")
    alpha = as_positive_float(alpha, "alpha")
    rng = as_rng(seed)
    sticks, weights, remaining = [], [], 1.0
    while remaining > 1e-6 and len(weights) < 1000:
        v = rng.beta(1.0, alpha)
        sticks.append(v)
        weights.append(remaining * v)
        remaining *= 1.0 - v
    weights = np.asarray(weights) / np.sum(weights)
    labels = rng.choice(len(weights), size=num_items, p=weights)
    means = separation * rng.standard_normal((len(weights), dim))
    x = means[labels] + rng.standard_normal((num_items, dim))
    _, labels = np.unique(labels, return_inverse=True)
    return x, labels


def crp_gaussian_mixture(num_items, dim, alpha=1.0, spread=10.0, seed=0):
    """Items from a DP mixture drawn through its Chinese restaurant process: item ``i`` joins an existing
    cluster with probability proportional to its size, or a new one with probability proportional
    to ``alpha`` (Antoniak 1974; Blei & Jordan 2006 §2); each cluster is a unit-covariance Gaussian around
    a centre from :math:`N(0, \\text{spread}^2 I)`. Unlike :func:`dp_gaussian_mixture`, the number of
    clusters has exactly the prior distribution of a DP with ``alpha`` for ``num_items`` items.

    :returns: ``(x, labels)``: ``(N, dim)`` float64 array and ``(N,)`` cluster labels ``0 .. C-1``.
    """
    num_items, dim = as_positive_int(num_items, "num_items"), as_positive_int(dim, "dim")
    alpha = as_positive_float(alpha, "alpha")
    rng = as_rng(seed)
    counts, labels = [], np.empty(num_items, dtype=np.int64)
    for i in range(num_items):
        p = np.array(counts + [alpha], dtype=float)
        k = rng.choice(len(p), p=p / p.sum())
        if k == len(counts):
            counts.append(0)
        counts[k] += 1
        labels[i] = k
    centers = spread * rng.standard_normal((len(counts), dim))
    return centers[labels] + rng.standard_normal((num_items, dim)), labels


def bars_corpus(num_docs=500, doc_length=60, side=5, alpha=0.5, seed=0):
    """Griffiths & Steyvers' "bars" topic data: the vocabulary is a ``side x side`` pixel
    grid (``V = side**2``), the ``2 * side`` true topics are its rows and columns (uniform
    over one bar's pixels), each document mixes them with weights ``Dirichlet(alpha)`` and
    has ``doc_length`` tokens.

    :returns: ``(corpus, topics (2 side, V), doc_weights (num_docs, 2 side))``.
    """
    num_docs, doc_length, side = (as_positive_int(v, name) for v, name in
                                  ((num_docs, "num_docs"), (doc_length, "doc_length"), (side, "side")))
    alpha = as_positive_float(alpha, "alpha")
    rng = as_rng(seed)
    V, K = side * side, 2 * side
    topics = np.zeros((K, V))
    grid = np.arange(V).reshape(side, side)
    for i in range(side):
        topics[i, grid[i]] = 1.0 / side
        topics[side + i, grid[:, i]] = 1.0 / side
    weights = rng.dirichlet(np.full(K, alpha), size=num_docs)
    counts = np.stack([rng.multinomial(doc_length, w @ topics) for w in weights])
    return from_counts(counts, vocab=[f"pixel{v}" for v in range(V)]), topics, weights


def lda_corpus(num_docs=3000, doc_length=20, vocab_size=1000, num_topics=20, alpha=0.05, beta=0.05, seed=0):
    """Documents drawn from latent Dirichlet allocation (Blei, Ng & Jordan 2003): ``num_topics`` topics
    ``Dirichlet(beta)`` over ``vocab_size`` words, each document's topic weights ``Dirichlet(alpha)`` and its
    ``doc_length`` tokens drawn from their mixture. With short documents and sparse topics (the defaults)
    each document shows a few words of one or two topics: the case where a birth's fresh topics, fitted to
    one batch, are noisy.

    :returns: ``(corpus, topics (num_topics, V), doc_weights (num_docs, num_topics))``.
    """
    num_docs, doc_length, vocab_size, num_topics = (
        as_positive_int(v, name) for v, name in ((num_docs, "num_docs"), (doc_length, "doc_length"),
                                                 (vocab_size, "vocab_size"), (num_topics, "num_topics")))
    alpha, beta = as_positive_float(alpha, "alpha"), as_positive_float(beta, "beta")
    rng = as_rng(seed)
    topics = rng.dirichlet(np.full(vocab_size, beta), size=num_topics)
    weights = rng.dirichlet(np.full(num_topics, alpha), size=num_docs)
    counts = np.stack([rng.multinomial(doc_length, w @ topics) for w in weights])
    return from_counts(counts), topics, weights
