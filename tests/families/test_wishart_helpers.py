"""Helpers of the Gaussian families: densities of many items against many components."""

import torch


def test_mvn_density_of_items_against_components_is_chunked_without_changing_values(monkeypatch):
    """Broadcasting (N, 1, D) items against (K, D, D) precision factors must not materialise
    N K D^2 numbers; the chunked product equals torch's density."""
    from pyro_memo.families import _wishart

    g = torch.Generator().manual_seed(0)
    x = torch.randn(500, 1, 4, generator=g, dtype=torch.float64)
    mu = torch.randn(6, 4, generator=g, dtype=torch.float64)
    a = torch.randn(6, 4, 4, generator=g, dtype=torch.float64)
    lam = a @ a.transpose(-1, -2) + 4 * torch.eye(4, dtype=torch.float64)
    reference = torch.distributions.MultivariateNormal(mu, precision_matrix=lam).log_prob(x)
    monkeypatch.setattr(_wishart, "_MAX_PRODUCT", 300)
    torch.testing.assert_close(_wishart.mvn_log_density_precision(x, mu, lam), reference)
