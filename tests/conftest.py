import pytest
import torch

import pyro_memo as pm

FAMILY_NAMES = sorted(pm.FAMILIES)


def make_data(name, N, D=2, seed=0, clusters=3):
    """Data with ``clusters`` well-separated groups in the support of family ``name``."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(clusters, (N,), generator=g)
    if name in ("gauss", "diag-gauss"):
        centers = 6.0 * torch.randn(clusters, D, generator=g, dtype=torch.float64)
        return centers[labels] + torch.randn(N, D, generator=g, dtype=torch.float64)
    if name == "zm-gauss":
        scales = torch.exp(2.0 * torch.randn(clusters, D, generator=g, dtype=torch.float64))
        return scales[labels] * torch.randn(N, D, generator=g, dtype=torch.float64)
    if name == "bern":
        probs = torch.rand(clusters, D, generator=g, dtype=torch.float64) * 0.8 + 0.1
        return torch.bernoulli(probs[labels], generator=g)
    if name == "poisson":
        rates = torch.exp(2.0 * torch.rand(clusters, D, generator=g, dtype=torch.float64))
        return torch.poisson(rates[labels], generator=g)
    if name == "mult":
        probs = torch.distributions.Dirichlet(torch.ones(D, dtype=torch.float64)).sample((clusters,))
        counts = 5 + torch.randint(20, (N,), generator=g)
        return torch.stack([torch.multinomial(probs[k], int(c), replacement=True, generator=g).bincount(
            minlength=D).double() for k, c in zip(labels, counts, strict=True)])
    raise ValueError(name)


def four_blobs(n=4000):
    """``n`` items in 2-D from 4 unit-variance blobs 12 apart (seeded), and their labels."""
    g = torch.Generator().manual_seed(5)
    labels = torch.randint(4, (n,), generator=g)
    centers = torch.tensor([[0.0, 0.0], [12.0, 0.0], [0.0, 12.0], [12.0, 12.0]], dtype=torch.float64)
    return centers[labels] + torch.randn(n, 2, generator=g, dtype=torch.float64), labels


@pytest.fixture(params=FAMILY_NAMES)
def family_name(request):
    return request.param
