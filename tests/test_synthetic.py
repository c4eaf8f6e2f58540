"""Synthetic generators: shapes, labels and the component structure they promise."""

import numpy as np

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
