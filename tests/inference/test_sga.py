"""SGA, SGA+M and SGA+F (paper 002): gradients against autograd, learning on small problems."""

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits

import pyro_memo as pm
from pyro_memo.inference.scoring import labels_elbo
from pyro_memo.inference.sga import SGA, VARIANTS
from pyro_memo.metrics import effective_k, nmi
from tests.conftest import four_blobs


def test_gradients_match_autograd_of_the_log_posterior():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(50, 3, generator=g, dtype=torch.float64)
    means = torch.randn(4, 3, generator=g, dtype=torch.float64).requires_grad_()
    v = (0.1 + 0.8 * torch.rand(4, generator=g, dtype=torch.float64)).requires_grad_()
    variance = 0.5 + torch.rand(3, generator=g, dtype=torch.float64)
    m0 = x.mean(0)
    sga = SGA(K=4, alpha=2.5, prior_strength=0.3)
    z = sga.assign(x, means.detach(), v.detach(), variance)
    onehot = torch.nn.functional.one_hot(z, 4).double()
    log_lik = -0.5 * (((x.unsqueeze(1) - means) ** 2) / variance).sum(-1)
    objective = (onehot * (log_lik + SGA.log_weights(v))).sum(-1).mean() \
        - 0.5 * sga.prior_strength * (((means - m0) ** 2) / variance).sum() + (sga.alpha - 1) * torch.log1p(-v).sum()
    d_mu, d_v = torch.autograd.grad(objective, (means, v))
    g_mu, f_mu, g_v, f_v = sga.gradients(x, z, means.detach(), v.detach(), variance, m0)
    torch.testing.assert_close(g_mu, d_mu, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(g_v, d_v, rtol=1e-10, atol=1e-12)
    assert bool((f_mu > 0).all()) and bool((f_v >= 0).all())


@pytest.mark.parametrize("variant", VARIANTS)
def test_improves_the_exact_elbo_and_recovers_well_separated_clusters(variant):
    """From K = 5 (k-means++ splits one blob: NMI 0.94) every variant prunes the extra
    component; with K = 10 only SGA+F does (plain steps leave stable split pairs), see below."""
    x, labels = four_blobs()
    family = pm.DiagGaussian.from_data(x)
    sga = SGA(K=5, variant=variant, step=0.1 if variant == "sga+f" else 0.01, iterations=150, batch_size=200)
    start = sga.assign(x, *sga._initialise(x))
    result = sga.fit(x)
    assert labels_elbo(family, x, result.labels) > labels_elbo(family, x, start)
    assert nmi(labels, start) < 0.95 < 0.98 < nmi(labels, result.labels)
    assert effective_k(result.labels) == 4


def test_fisher_step_prunes_a_large_truncation():
    x, labels = four_blobs()
    result = SGA(K=10, variant="sga+f", iterations=150, batch_size=200).fit(x)
    assert nmi(labels, result.labels) > 0.98 and effective_k(result.labels) == 4


def test_prunes_components_on_digits():
    x, _ = load_digits(return_X_y=True)
    result = SGA(K=50, variant="sga+f", iterations=40, batch_size=300).fit(x)
    assert result.num_components[-1] < 50 and result.num_components == sorted(result.num_components, reverse=True)
    assert bool((result.sticks[:-1] >= result.sticks[1:]).all())


@pytest.mark.parametrize("kwargs", [{"variant": "adam"}, {"K": 0}, {"momentum": 1.0}, {"step": 0}])
def test_bad_options(kwargs):
    with pytest.raises(ValueError):
        SGA(**kwargs)


def test_bad_data():
    with pytest.raises(ValueError, match="finite"):
        SGA().fit(np.array([[0.0, np.nan]]))
