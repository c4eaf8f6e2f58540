"""Special functions shared by the conjugate families (pure torch, any dtype/device)."""

import math

import torch


def multigammaln(a, d: int):
    """Log of the multivariate gamma function :math:`\\log\\Gamma_d(a)`, elementwise in ``a``."""
    i = torch.arange(d, dtype=a.dtype, device=a.device)
    return 0.25 * d * (d - 1) * math.log(math.pi) + torch.lgamma(a.unsqueeze(-1) - 0.5 * i).sum(-1)


def multidigamma(a, d: int):
    """Multivariate digamma :math:`\\sum_{i=1}^d \\psi(a + (1 - i)/2)`, elementwise in ``a``."""
    i = torch.arange(d, dtype=a.dtype, device=a.device)
    return torch.digamma(a.unsqueeze(-1) - 0.5 * i).sum(-1)


def lbeta(a, b):
    """Log of the Beta function, elementwise."""
    return torch.lgamma(a) + torch.lgamma(b) - torch.lgamma(a + b)


def kl_beta(a, b, a0, b0):
    """KL(Beta(a, b) || Beta(a0, b0)), elementwise."""
    return (
        lbeta(a0, b0)
        - lbeta(a, b)
        + (a - a0) * torch.digamma(a)
        + (b - b0) * torch.digamma(b)
        + (a0 - a + b0 - b) * torch.digamma(a + b)
    )


def kl_gamma(a, b, a0, b0):
    """KL(Gamma(a, rate=b) || Gamma(a0, rate=b0)), elementwise."""
    return (
        (a - a0) * torch.digamma(a)
        - torch.lgamma(a)
        + torch.lgamma(a0)
        + a0 * (torch.log(b) - torch.log(b0))
        + a * (b0 - b) / b
    )


def safe_cholesky(matrix, what: str):
    """Cholesky factor of a batch of SPD matrices.

    Policy: no silent jitter. A matrix that is not positive definite raises a
    :class:`ValueError` naming ``what``; callers that can legitimately meet a
    singular matrix (a data-driven prior) regularise it before calling.
    """
    chol, info = torch.linalg.cholesky_ex(matrix)
    if bool((info != 0).any()):
        raise ValueError(
            f"{what} is not positive definite (Cholesky failed); "
            "check for NaN/inf or a degenerate prior scale matrix"
        )
    return chol


def logdet_from_cholesky(chol):
    """``log|A|`` from the Cholesky factor of ``A``."""
    return 2.0 * torch.log(torch.diagonal(chol, dim1=-2, dim2=-1)).sum(-1)
