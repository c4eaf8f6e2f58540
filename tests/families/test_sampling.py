"""Posterior samplers (used by blocked Gibbs): Monte Carlo over draws reproduces the closed-form
expected log-likelihood, which the reference tests check against scipy independently."""

import pytest
import torch

from tests.families.test_reference import N_MC, NAMES, K, _assert_within_mc, _np, _setup


@pytest.mark.parametrize("name", NAMES)
def test_sampled_parameters_follow_the_posterior(name):
    _, _, _, fam, _, x, *_, post = _setup(name)
    torch.manual_seed(0)
    repeated = {k: v.repeat_interleave(N_MC, 0) for k, v in post.items()}
    params = fam.sample_posterior(repeated)
    x4 = x[:4]
    ll = fam.log_density(x4.unsqueeze(1), {k: v.unsqueeze(0) for k, v in params.items()})  # (4, K * S)
    assert ll.shape == (4, K * N_MC) and bool(torch.isfinite(ll).all())
    closed = _np(fam.expected_log_lik(x4, post))
    for k in range(K):
        draws = _np(ll[:, k * N_MC:(k + 1) * N_MC]).T
        _assert_within_mc(closed[:, k], draws, f"{name} sampled E[log p(x | phi_{k})]")
