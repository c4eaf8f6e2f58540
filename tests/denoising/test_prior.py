"""The Gaussian-mixture patch prior from a fitted DP mixture and from scikit-learn, and its noisy marginals."""

import numpy as np
import pytest
import torch
from scipy.stats import multivariate_normal
from sklearn.mixture import GaussianMixture

import pyro_memo as pm
from pyro_memo.denoising import GaussianMixturePrior, component_scores


def _covariances(K, D, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((K, D, D))
    return a @ a.transpose(0, 2, 1) + 0.5 * np.eye(D)


def test_noisy_marginals_match_scipy():
    cov = _covariances(3, 4)
    prior = GaussianMixturePrior([1.0, 2.0, 1.0], cov)
    y = np.random.default_rng(1).standard_normal((5, 4))
    precisions, log_norms = prior.noisy_terms(0.7)
    log_joint, solves = component_scores(torch.as_tensor(y), precisions, log_norms)
    for k in range(3):
        a = cov[k] + 0.7 * np.eye(4)
        expected = np.log([0.25, 0.5, 0.25][k]) + multivariate_normal(np.zeros(4), a).logpdf(y)
        np.testing.assert_allclose(log_joint[:, k].numpy(), expected, rtol=1e-12)
        np.testing.assert_allclose(solves[:, k].numpy(), np.linalg.solve(a, y.T).T, rtol=1e-10)


def test_bad_weights_and_shapes_are_refused():
    with pytest.raises(ValueError, match="nonnegative"):
        GaussianMixturePrior([-1.0, 2.0], _covariances(2, 3))
    with pytest.raises(ValueError, match="expected weights"):
        GaussianMixturePrior([1.0, 2.0], _covariances(3, 3))


def test_prior_from_a_memoized_dp_mixture_fit():
    x, _, covs = pm.synthetic.toy_patches(3_000, seed=0, patch=3, num_components=2)
    family = pm.ZeroMeanGaussian.from_data(x)
    result = pm.MemoizedVB(family, K=6, laps=15, seed=0).fit(x, 3)
    prior = GaussianMixturePrior.from_posterior(result.posterior, min_weight=1e-3)
    weights = result.posterior.expected_weights()
    kept = weights / weights.sum() >= 1e-3
    assert prior.K == int(kept.sum()) < 6
    torch.testing.assert_close(prior.weights, weights[kept] / weights[kept].sum())
    estimates = family.point_estimates(result.posterior.component)["covariances"][kept]
    torch.testing.assert_close(prior.covariances, estimates)
    # a saved model works the same way
    assert GaussianMixturePrior.from_posterior(pm.model_file.SavedMixture(result.posterior, result.summary),
                                             min_weight=1e-3).K == prior.K


def test_only_a_zero_mean_family_gives_a_patch_prior():
    x = np.random.default_rng(0).standard_normal((200, 3))
    result = pm.MemoizedVB(pm.Gaussian.from_data(x), K=2, laps=2, seed=0).fit(x, 2)
    with pytest.raises(ValueError, match="zm-gauss"):
        GaussianMixturePrior.from_posterior(result.posterior)


def test_prior_from_sklearn_ignores_the_means():
    x = np.random.default_rng(0).standard_normal((500, 3)) + 1.0
    gmm = GaussianMixture(2, covariance_type="full", random_state=0).fit(x)
    prior = GaussianMixturePrior.from_sklearn(gmm)
    np.testing.assert_allclose(prior.weights.numpy(), gmm.weights_, rtol=1e-12)
    np.testing.assert_allclose(prior.covariances.numpy(), gmm.covariances_, rtol=1e-12)
    with pytest.raises(ValueError, match="full"):
        GaussianMixturePrior.from_sklearn(GaussianMixture(2, covariance_type="diag").fit(x))
