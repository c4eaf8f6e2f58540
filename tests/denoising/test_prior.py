"""The Gaussian-mixture patch prior from a fitted DP mixture and from scikit-learn, and its noisy marginals."""

import numpy as np
import pytest
import torch
from scipy.stats import multivariate_normal
from sklearn.mixture import GaussianMixture

import pyro_memo as pm
from pyro_memo.denoising import GaussianMixturePrior, component_scores, map_patches, mmse_patches


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


@pytest.mark.parametrize("min_weight", [1.1, 1, -0.1, float("nan"), "a", None, True])
def test_a_min_weight_outside_zero_to_one_is_refused(min_weight):
    """Used to fail with "weights must be nonnegative ..." (every component dropped) or a raw TypeError."""
    x = np.random.default_rng(0).standard_normal((200, 4))
    result = pm.MemoizedVB(pm.ZeroMeanGaussian.from_data(x), K=2, laps=1, seed=0).fit(x, 2)
    with pytest.raises(ValueError, match=r"min_weight must be a number in \[0, 1\); got "):
        GaussianMixturePrior.from_posterior(result.posterior, min_weight=min_weight)
    assert GaussianMixturePrior.from_posterior(result.posterior, min_weight=0).K == 2


def test_a_min_weight_above_every_weight_says_so():
    """A min_weight in [0, 1) above every component's weight dropped them all and failed with "the mixture
    weights must be nonnegative and finite with a positive sum", which blamed the weights."""
    x = np.random.default_rng(0).standard_normal((200, 4))
    result = pm.MemoizedVB(pm.ZeroMeanGaussian.from_data(x), K=4, laps=1, seed=0).fit(x, 2)
    largest = float(max(GaussianMixturePrior.from_posterior(result.posterior, min_weight=0).weights))
    with pytest.raises(ValueError, match=r"min_weight=0.99 drops every component: the largest weight is 0\.\d+"):
        GaussianMixturePrior.from_posterior(result.posterior, min_weight=0.99)
    assert largest < 0.99


def test_prior_from_sklearn_ignores_the_means():
    x = np.random.default_rng(0).standard_normal((500, 3)) + 1.0
    gmm = GaussianMixture(2, covariance_type="full", random_state=0).fit(x)
    prior = GaussianMixturePrior.from_sklearn(gmm)
    np.testing.assert_allclose(prior.weights.numpy(), gmm.weights_, rtol=1e-12)
    np.testing.assert_allclose(prior.covariances.numpy(), gmm.covariances_, rtol=1e-12)
    with pytest.raises(ValueError, match="full"):
        GaussianMixturePrior.from_sklearn(GaussianMixture(2, covariance_type="diag").fit(x))


@pytest.mark.parametrize("seed", range(12))
def test_restored_patches_are_the_reference_over_every_component(seed):
    """The denoisers' patch estimates (log joints from packed products, solves only where a component
    has weight) equal the reference that solves every patch under every component: the posterior mean
    and the most probable component's Wiener filter, for random mixtures, noise levels and chunk sizes,
    peaked (patches drawn from the components) or flat (patches of pure noise)."""
    rng = np.random.default_rng(seed)
    K, D = int(rng.integers(1, 7)), int(rng.integers(2, 10))
    cov = _covariances(K, D, seed) * 10 ** rng.uniform(-2, 3, size=(K, 1, 1))  # scales far apart: some
    # components' weights underflow to exactly zero on some patches, others' do not
    prior = GaussianMixturePrior(rng.uniform(0.1, 1.0, K), cov)
    s = float(rng.uniform(0.05, 20.0))
    n = int(rng.integers(1, 120))
    labels = rng.integers(K, size=n)
    drawn = np.stack([rng.multivariate_normal(np.zeros(D), cov[k]) for k in labels])
    y = torch.as_tensor(drawn if seed % 3 else rng.standard_normal((n, D)) * np.sqrt(s)) + np.sqrt(s) * 0.1
    precisions, log_norms = prior.noisy_terms(s)
    log_joint, solves = component_scores(y, precisions, log_norms)
    resp = torch.softmax(log_joint, -1)
    mmse = y - s * torch.einsum("nk,nkd->nd", resp, solves)
    map_ = y - s * solves[torch.arange(n), log_joint.argmax(-1)]
    for max_elements in (1, 37, 2**20):
        torch.testing.assert_close(mmse_patches(y, prior, s, max_elements), mmse, rtol=1e-9, atol=1e-9)
        torch.testing.assert_close(map_patches(y, prior, s, max_elements), map_, rtol=1e-9, atol=1e-9)


def test_a_float32_prior_restores_patches_as_float64_does():
    """In float32 the log joints come from every component's solve (the packed form would round relative
    to the largest terms of the quadratic forms): the estimates are float64's to float32 rounding."""
    rng = np.random.default_rng(5)
    cov = _covariances(4, 16, 5) * 10 ** rng.uniform(0, 3, size=(4, 1, 1))
    prior = GaussianMixturePrior(rng.uniform(0.1, 1.0, 4), cov)
    y = torch.as_tensor(rng.standard_normal((300, 16)) * 30)
    single = prior.to(dtype=torch.float32)
    for restore in (mmse_patches, map_patches):
        want = restore(y, prior, 25.0)
        got = restore(y.float(), single, 25.0)
        assert got.dtype == torch.float32
        torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-3)
