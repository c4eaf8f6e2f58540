"""Issue #14 item 2 acceptance: the learnt concentration on 10,000 items from a DP mixture with alpha = 5.

Data: a Chinese restaurant process (alpha = 5) of unit-covariance Gaussians in D = 10 around N(0, 10^2 I)
centres (well separated); memoized VB, known-covariance Gaussian family with the generator's prior,
alpha ~ Gamma(1, 0.1), K = 100 k-means++ start, birth / merge / delete (benchmarks/bench_latent_alpha.py).

Measured (seeds 0-4): true clusters 50, 31, 41, 29, 37; found 46, 29, 39, 28, 35; E_q[alpha] = 5.33, 3.18,
4.43, 2.98, 4.14, so 3 of 5 seeds lie in [5 / 1.5, 5 * 1.5]. The exact posterior mean of alpha given the
number of clusters alone (Antoniak) is 6.85, 3.98, 5.46, 3.69, 4.86 for the true counts and 6.22, 3.69,
5.16, 3.54, 4.56 for the found ones: seeds 1 and 3 drew few clusters. The model's own likelihood is that of
labelled sticks, p(z | alpha) = EPPF * prod_k N_k / (alpha + N_{>=k}), which penalises alpha most through
the small clusters on the last sticks. Its exact posterior mean given the fit's expected sizes in stick
order (``ordered_alpha_posterior_mean``) is 5.34, 3.19, 4.45, 2.99, 4.15: E_q[alpha] is within 0.4% of it
on every seed, and given the *true* clusters in decreasing size it is 5.74, 3.37, 4.61, 3.08, 4.31 -- on
seed 3 outside the bar even for the true assignments (benchmarks/results/bench_latent_alpha.txt).
"""

import pytest
import torch

import pyro_memo as pm
from pyro_memo.allocation import alpha_posterior_mean, ordered_alpha_posterior_mean
from pyro_memo.data import crp_gaussian_mixture
from pyro_memo.families import KnownCovGaussian
from pyro_memo.inference.moves import make_moves


def _crp(n, alpha, D, seed):
    x, labels = crp_gaussian_mixture(n, D, alpha, seed=seed)
    return torch.as_tensor(x), labels


@pytest.mark.slow
def test_learnt_alpha_on_a_dp_mixture_with_alpha_5():
    prior, D, N = (1.0, 0.1), 10, 10_000
    inside = 0
    for seed in range(5):
        x, labels = _crp(N, 5.0, D, seed)
        fam = KnownCovGaussian({"m": torch.zeros(D), "S": 100 * torch.eye(D), "noise": torch.eye(D)})
        moves = make_moves("birth,merge,delete", seed=seed, birth={"min_items": 1, "max_K": 200},
                           delete={"max_single": 5})
        post = pm.MemoizedVB(fam, 100, alpha_prior=prior, moves=moves, laps=100, seed=seed).fit(x, 10).posterior
        sizes = post.responsibilities(x).sum(0)
        found = int((sizes > 0.5).sum())
        true = int(labels.max()) + 1
        e_alpha = post.expected_alpha()
        assert found >= 0.9 * true, (seed, found, true)
        ratio = e_alpha / alpha_posterior_mean(found, N, *prior)
        assert 0.8 < ratio < 1.0, (seed, e_alpha, ratio)
        # the mean-field q(alpha) against the exact posterior of the labelled sticks, given its own sizes
        exact = ordered_alpha_posterior_mean(sizes, *prior)
        assert abs(e_alpha / exact - 1) < 0.01, (seed, e_alpha, exact)
        inside += 5 / 1.5 <= e_alpha <= 5 * 1.5
    assert inside >= 3
