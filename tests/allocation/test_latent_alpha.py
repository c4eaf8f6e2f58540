"""Latent DP concentration alpha ~ Gamma(s1, s2) with its closed-form factor (Blei & Jordan 2006, §5)."""

import math

import numpy as np
import pytest
import torch
from scipy import optimize, stats

import pyro_memo as pm
from pyro_memo.allocation import DPSticks
from pyro_memo.inference import DPMixturePosterior
from tests.conftest import make_data


def random_counts(seed, K):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(K, generator=g, dtype=torch.float64) * torch.tensor(50.0).pow(torch.rand(K, generator=g))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("truncation", ["nested", "direct"])
def test_closed_form_q_alpha_maximises_the_elbo(seed, truncation):
    """Fixed q(v): the closed-form Gamma(w1, w2) beats a numerical optimum of the ELBO over (w1, w2)."""
    sticks = DPSticks(truncation=truncation, alpha_prior=(0.5 + seed, 0.3 + 0.4 * seed))
    counts = random_counts(seed, 3 + seed)
    eta1, eta0 = sticks.posterior(counts, torch.tensor([2.0, 0.7], dtype=torch.float64))

    def neg_elbo(log_w):
        return -float(sticks.elbo(counts, eta1, eta0, torch.tensor(np.exp(log_w), dtype=torch.float64)))

    closed = sticks.alpha_posterior(eta1, eta0)
    best = optimize.minimize(neg_elbo, np.log([1.0, 1.0]), method="Nelder-Mead",
                             options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 20000})
    assert -neg_elbo(np.log(closed.numpy())) >= -best.fun - 1e-9
    assert np.allclose(np.exp(best.x), closed.numpy(), rtol=1e-3)
    # and the number of sticks with a factor is K (nested) or K - 1 (direct)
    K = counts.shape[0]
    assert float(closed[0]) == pytest.approx(sticks.alpha_prior[0] + (K if truncation == "nested" else K - 1))


def test_alpha_terms_match_monte_carlo():
    """E_q[log p(v | alpha) + log p(alpha) - log q(alpha)] - E[log q(v)] by sampling alpha and v."""
    sticks = DPSticks(alpha_prior=(2.0, 0.5))
    counts = random_counts(0, 4)
    q = torch.tensor([3.5, 1.2], dtype=torch.float64)
    eta1, eta0 = sticks.posterior(counts, q)
    exact = float(sticks.elbo(counts, eta1, eta0, q) - (counts * sticks.expected_log_weights(eta1, eta0)).sum())
    rng = np.random.default_rng(0)
    M = 400_000
    alpha = rng.gamma(3.5, 1 / 1.2, M)
    v = rng.beta(eta1.numpy(), eta0.numpy(), (M, 4))
    draws = (stats.beta(1, alpha[:, None]).logpdf(v).sum(1) + stats.gamma(2.0, scale=1 / 0.5).logpdf(alpha)
             - stats.gamma(3.5, scale=1 / 1.2).logpdf(alpha) - stats.beta(eta1.numpy(), eta0.numpy()).logpdf(v).sum(1))
    assert abs(draws.mean() - exact) < 4 * draws.std() / math.sqrt(M)


@pytest.mark.parametrize("seed", range(10))
def test_full_batch_coordinate_steps_never_lower_the_elbo(seed):
    names = ["gauss", "diag-gauss", "known-gauss", "poisson", "mult"]
    name = names[seed % len(names)]
    g = torch.Generator().manual_seed(seed)
    x = make_data(name, 400, D=3, seed=seed, clusters=2 + seed % 4)
    prior = (float(torch.rand((), generator=g)) * 3 + 0.1, float(torch.rand((), generator=g)) * 3 + 0.1)
    vb = pm.FullBatchVB(pm.get_family(name).from_data(x), 2 + seed, truncation="direct" if seed % 3 == 2 else "nested",
                        max_iter=15, tol=0.0, init="random" if seed % 2 else "kmeans++", seed=seed, record_steps=True,
                        alpha_prior=prior)
    result = vb.fit(x)
    steps = np.array(result.step_elbos)
    assert np.isfinite(steps).all()
    assert np.diff(steps).min() >= -1e-9 * np.abs(steps).max(), np.diff(steps).min()
    assert result.posterior.q_alpha is not None and result.elbo == float(result.posterior.elbo(result.summary))


@pytest.mark.parametrize("seed", range(10))
def test_memoized_batch_steps_never_lower_the_elbo(seed):
    name = ["gauss", "known-gauss", "diag-gauss"][seed % 3]
    x = make_data(name, 600, D=2, seed=seed, clusters=3 + seed % 3)
    vb = pm.MemoizedVB(pm.get_family(name).from_data(x), 3 + seed % 4, alpha_prior=(1.0 + seed % 3, 0.5), laps=6,
                       tol=0.0, seed=seed, record_batch_elbos=True)
    elbos = np.array(vb.fit(x, 5).batch_elbos)
    assert len(elbos) > 10 and np.isfinite(elbos).all()
    assert np.diff(elbos).min() >= -1e-9 * np.abs(elbos).max()


def test_learnt_alpha_survives_a_checkpoint_and_moves():
    x = make_data("gauss", 500, D=2, seed=3, clusters=4)
    vb = pm.MemoizedVB(pm.Gaussian.from_data(x), 1, alpha_prior=(1.0, 1.0), laps=8, moves="birth,merge,delete")
    post = vb.fit(x, 4).posterior
    back = DPMixturePosterior.from_state_dict(post.state_dict())
    assert back.sticks.alpha_prior == (1.0, 1.0) and torch.equal(back.q_alpha, post.q_alpha)
    assert back.expected_alpha() == post.expected_alpha()
    summary = post.local_step(x)[1]
    assert float(back.elbo(summary)) == float(post.elbo(summary))
    fixed = DPMixturePosterior.from_state_dict(pm.FullBatchVB(pm.Gaussian.from_data(x), 3, max_iter=3).fit(x)
                                               .posterior.state_dict())
    assert fixed.q_alpha is None and fixed.sticks.alpha_prior is None


def test_bad_alpha_prior_is_refused():
    with pytest.raises(ValueError, match="alpha_prior"):
        DPSticks(alpha_prior=(1.0, 0.0))


@pytest.mark.parametrize("seed", range(5))
def test_ordered_alpha_posterior_mean_is_the_labelled_stick_posterior(seed):
    """Against quadrature of p(alpha) prod_k alpha B(N_k + 1, N_{>k} + alpha), the sticks integrated out one by
    one (not the telescoped form the function uses); empty sticks contribute alpha B(1, alpha) = 1."""
    from scipy import integrate
    from scipy.special import betaln

    from pyro_memo.allocation import alpha_posterior_mean, ordered_alpha_posterior_mean

    rng = np.random.default_rng(seed)
    sizes = np.concatenate([rng.integers(1, 60, size=3 + 2 * seed), np.zeros(seed)])  # trailing empty sticks
    s1, s2 = 1.0 + 0.5 * seed, 0.1 + 0.2 * seed
    later = np.concatenate([np.cumsum(sizes[::-1])[::-1][1:], [0.0]])  # N_{>k}

    def log_post(a):
        return (s1 - 1) * np.log(a) - s2 * a + np.sum(np.log(a) + betaln(sizes + 1, later + a))

    top = max(log_post(a) for a in np.linspace(0.01, 80, 4000))
    moments = [integrate.quad(lambda a, k=k: a**k * np.exp(log_post(a) - top), 0, np.inf, limit=200)[0]
               for k in (0, 1)]
    ref = moments[1] / moments[0]
    got = ordered_alpha_posterior_mean(torch.as_tensor(sizes), s1, s2)
    assert abs(got - ref) < 1e-4 * ref, (got, ref)
    # the labelling's extra factor lowers the mean below the partition-only (Antoniak) posterior
    C, N = int((sizes > 0).sum()), int(sizes.sum())
    assert got < alpha_posterior_mean(C, N, s1, s2)
    # and decreasing size order gives the lowest mean of all orders
    ordered = np.sort(sizes)[::-1].copy()
    assert ordered_alpha_posterior_mean(torch.as_tensor(ordered), s1, s2) <= got + 1e-9


def coordinate_ascent(sticks, counts, q_alpha, steps, tol=0.0):
    """Up to ``steps`` plain coordinate steps (sticks, then q(alpha)) from ``q_alpha``, until E[alpha] moves by at
    most ``tol`` (relative): the reference fit_posterior solves."""
    for _ in range(steps):
        eta1, eta0 = sticks.posterior(counts, q_alpha)
        new = sticks.alpha_posterior(eta1, eta0)
        moved = abs(float(new[0] / new[1] - q_alpha[0] / q_alpha[1])) / float(new[0] / new[1])
        q_alpha = new
        if moved <= tol:
            break
    return eta1, eta0, q_alpha


@pytest.mark.parametrize("seed", range(40))
def test_the_joint_optimum_is_the_limit_of_coordinate_ascent_and_no_lower(seed):
    """Counts over six decades with empty components, both truncations, cold and far-off warm starts: the
    solved q(alpha) is a fixed point of the two coordinate steps, it matches coordinate ascent run to the
    end, and its ELBO is at least that of one coordinate step from the start and of the converged ascent."""
    g = torch.Generator().manual_seed(seed)
    K = int(torch.randint(1, 150, (), generator=g))
    scale = torch.tensor(10.0).pow(6 * torch.rand(K, generator=g) - 2)  # six decades
    counts = torch.rand(K, generator=g, dtype=torch.float64) * scale
    counts[torch.rand(K, generator=g) < 0.25] = 0.0
    s1, s2 = (float(torch.tensor(10.0).pow(3 * torch.rand((), generator=g) - 1.5)) for _ in range(2))
    sticks = DPSticks(truncation="direct" if seed % 4 == 3 else "nested", alpha_prior=(s1, s2))
    far = float(torch.tensor(10.0).pow(8 * torch.rand((), generator=g) - 4))  # a warm start's E[alpha]
    start = None if seed % 3 == 0 else torch.tensor([1.0, far], dtype=torch.float64)
    eta1, eta0, q = sticks.fit_posterior(counts, start)

    def elbo(e1, e0, qa):
        return float(sticks.elbo(counts, e1, e0, qa))

    again = sticks.alpha_posterior(*sticks.posterior(counts, q))
    assert torch.allclose(again, q, rtol=1e-10, atol=0)
    first = start if start is not None else torch.tensor([s1, s2], dtype=torch.float64)
    ref = coordinate_ascent(sticks, counts, first, 100_000, tol=1e-14)
    assert float(q[0] / q[1]) == pytest.approx(float(ref[2][0] / ref[2][1]), rel=1e-8)
    value = elbo(eta1, eta0, q)
    assert value >= elbo(*coordinate_ascent(sticks, counts, first, 1)) - 1e-12 * abs(value)
    assert value >= elbo(*ref) - 1e-12 * abs(value)
