"""Wishart expectations shared by the full-mean and zero-mean Gaussian families.

The Wishart is parameterised by degrees of freedom ``nu`` and *inverse* scale ``B``
(so :math:`E[\\Lambda] = \\nu B^{-1}`), which makes the conjugate update additive:
:math:`B_k = B_0 + \\text{scatter}_k`.
"""

import math
import warnings
from contextlib import contextmanager

import torch

from ._special import logdet_from_cholesky, multidigamma, multigammaln, safe_cholesky
from .base import chunk_elements, spread_scale


def regularized_scatter(scatter, what, magnitude):
    """Make a data-derived scale matrix safely positive definite.

    Adds ``1e-4 * mean(diag)`` to the diagonal. When the matrix is round-off (duplicated points, whose
    covariance about their rounded mean is of order :math:`\\epsilon^2` times their mean square), the
    scale falls back to ``magnitude`` (the data's raw mean square), or 1 for all-zero data, so constant
    columns and ``N < D`` data still give a proper prior (:func:`~pyro_memo.families.base.spread_scale`:
    round-off is judged against :math:`\\epsilon^2` times the mean square, so a translation of the data
    leaves a centred scatter's prior unchanged).
    """
    d = scatter.shape[-1]
    scale = spread_scale(torch.diagonal(scatter, dim1=-2, dim2=-1).mean(), magnitude)
    eye = torch.eye(d, dtype=scatter.dtype, device=scatter.device)
    out = 0.5 * (scatter + scatter.transpose(-1, -2)) + 1e-4 * scale * eye
    safe_cholesky(out, what)
    return out


def wishart_terms(nu, B, what="posterior scale matrix B"):
    """Cholesky of ``B``, its log-determinant, ``B^{-1}`` and :math:`E[\\log|\\Lambda|]`."""
    d = B.shape[-1]
    chol = safe_cholesky(B, what)
    logdet_B = logdet_from_cholesky(chol)
    B_inv = torch.cholesky_inverse(chol)
    e_logdet_lam = multidigamma(0.5 * nu, d) + d * math.log(2.0) - logdet_B
    return chol, logdet_B, B_inv, e_logdet_lam


def whitened_sq_norms(chol, centres=None, dtype=None):
    """:math:`(x_n - c_k)^T B_k^{-1} (x_n - c_k) = \\|L_k^{-1}(x_n - c_k)\\|^2` for all ``n, k`` from the
    Cholesky factors ``chol`` ``(K, D, D)`` of :math:`B_k = L_k L_k^T` (``centres`` ``(K, D)``, default
    zero): ``x ->`` ``(N, K)``, with :math:`L_k^{-1}` and :math:`L_k^{-1} c_k` computed once. A sum of
    squares, so its rounding error is relative to the result itself (any dtype). With ``dtype`` the
    products with the data run in that precision (float32 for a mixed-precision local step), the
    factors :math:`L_k^{-1}` still computed in ``chol``'s.

    The sum runs over the ``D`` whitened coordinates: coordinate ``d`` of every item under every
    component is one ``(N, D) @ (D, K)`` product (row ``d`` of each :math:`L_k^{-1}`), squared and
    added into the ``(N, K)`` result, so no ``(K, D, N)`` temporary is formed and each product is a
    plain matrix product (2-3 times faster than a batched product of ``K`` small matrices)."""
    eye = torch.eye(chol.shape[-1], dtype=chol.dtype, device=chol.device)
    chol_inv = torch.linalg.solve_triangular(chol, eye.expand_as(chol), upper=False)
    shift = None if centres is None else (chol_inv @ centres.unsqueeze(-1)).squeeze(-1)
    if dtype is not None:
        chol_inv = chol_inv.to(dtype)
        shift = None if shift is None else shift.to(dtype)
    rows = chol_inv.permute(1, 2, 0).contiguous()  # rows[d] = (D, K): row d of every L_k^{-1}
    shifts = None if shift is None else shift.T.contiguous()  # (D, K)

    def coordinate(x, d):  # differentiable
        y = x @ rows[d]
        return y if shifts is None else y - shifts[d]

    def block(x, out, buffer):  # in place: out = sum_d (x @ rows[d] - shifts[d])^2
        for d in range(len(rows)):
            y = torch.mm(x, rows[d], out=buffer[:len(x)])
            if shifts is not None:
                y.sub_(shifts[d])
            if d == 0:
                torch.square(y, out=out)
            else:
                out.addcmul_(y, y)

    def sq_norms(x):
        if torch.is_grad_enabled() and (x.requires_grad or rows.requires_grad):
            return sum(coordinate(x, d).square() for d in range(len(rows)))
        K = rows.shape[-1]
        step = max(1, chunk_elements(x.device) // K)  # the (step, K) buffer of one coordinate
        out = x.new_empty((len(x), K))
        buffer = x.new_empty((min(step, len(x)), K))
        for lo in range(0, len(x), step):
            block(x[lo:lo + step], out[lo:lo + step], buffer)
        return out

    return sq_norms


def kl_wishart(nu, B, nu0, B0):
    """KL(W(nu, B^{-1}) || W(nu0, B0^{-1})) for a batch of ``(nu, B)``."""
    d = B.shape[-1]
    _, logdet_B, B_inv, e_logdet = wishart_terms(nu, B)
    _, logdet_B0, _, _ = wishart_terms(nu0, B0, "prior scale matrix B0")
    trace_term = (B0 * B_inv).sum((-1, -2)) * nu  # tr(B0 E[Lambda])
    return (
        0.5 * (nu - nu0) * e_logdet
        - 0.5 * (nu - nu0) * d * math.log(2.0)
        - 0.5 * nu * d
        + 0.5 * trace_term
        + 0.5 * nu * logdet_B
        - 0.5 * nu0 * logdet_B0
        - multigammaln(0.5 * nu, d)
        + multigammaln(0.5 * nu0, d)
    )


def log_normalizer_ratio(nu, B, nu0, B0):
    """Log normalizer ratio of two Wishart densities (the marginal-likelihood core):

    :math:`\\log\\Gamma_D(\\nu/2) - \\log\\Gamma_D(\\nu_0/2) + \\tfrac{\\nu_0}{2}\\log|B_0| - \\tfrac{\\nu}{2}\\log|B|`.
    """
    d = B.shape[-1]
    logdet_B = logdet_from_cholesky(safe_cholesky(B, "posterior scale matrix B"))
    logdet_B0 = logdet_from_cholesky(safe_cholesky(B0, "prior scale matrix B0"))
    return (
        multigammaln(0.5 * nu, d)
        - multigammaln(0.5 * nu0, d)
        + 0.5 * nu0 * logdet_B0
        - 0.5 * nu * logdet_B
    )


def student_t_log_predictive(x, nu, B, scale, centres=None):
    """The Wishart families' posterior predictive, a multivariate Student-t: ``(n, K)`` of

    .. math:: \\log p(x_n \\mid S_k) = -\\tfrac D2\\log\\pi + \\log\\Gamma(\\tfrac{\\nu_k+1}2)
        - \\log\\Gamma(\\tfrac{\\nu_k+1-D}2) - \\tfrac12\\log|B_k| + \\tfrac D2\\log c_k
        - \\tfrac{\\nu_k+1}2\\log(1 + c_k\\,\\delta_{nk}),

    :math:`\\delta_{nk} = u^T B_k^{-1} u`, :math:`u = x_n - m_k` (``centres`` ``(K, D)``; zero if ``None``),
    :math:`c_k` = ``scale`` ``(K,)``. It is the marginal-likelihood ratio (Blei & Jordan 2006, §4) of
    :func:`log_normalizer_ratio` for the one-item update :math:`\\nu_k + 1`, :math:`B_k + c_k u u^T`
    (Normal-Wishart: :math:`c_k = \\kappa_k / (\\kappa_k + 1)`, and :math:`\\tfrac D2 \\log c_k` is the
    ratio of the mean's :math:`\\kappa` terms; zero-mean Wishart: :math:`c_k = 1`): :math:`\\Gamma_D`
    telescopes to its last factor, and the matrix determinant lemma
    :math:`|B + c u u^T| = |B|(1 + c u^T B^{-1} u)` replaces the update's Cholesky, which fails once
    :math:`c\\,\\delta` passes ~1/eps, by a triangular solve with :math:`B_k`'s own factor."""
    d = x.shape[-1]
    chol = safe_cholesky(B, "posterior scale matrix B")
    diff = x.unsqueeze(0) if centres is None else x.unsqueeze(0) - centres.unsqueeze(1)  # (K or 1, n, D)
    whitened = torch.linalg.solve_triangular(chol, diff.transpose(-1, -2), upper=False)  # (K, D, n)
    delta = whitened.square().sum(-2).T  # (n, K)
    half = 0.5 * (nu + 1)
    const = (torch.lgamma(half) - torch.lgamma(half - 0.5 * d) - 0.5 * logdet_from_cholesky(chol)
             + 0.5 * d * torch.log(scale) - 0.5 * d * math.log(math.pi))
    return const - half * torch.log1p(scale * delta)


def mvn_log_density_precision(x, mu, Lam):
    """:math:`\\log N(x \\mid \\mu, \\Lambda^{-1})` with ``x, mu`` ``(..., D)`` and ``Lam`` ``(..., D, D)``."""
    d = x.shape[-1]
    chol = safe_cholesky(Lam, "precision matrix")
    diff = x - mu
    quad = _broadcast_quadratic(diff, chol)
    return 0.5 * logdet_from_cholesky(chol) - 0.5 * d * math.log(2 * math.pi) - 0.5 * quad


#: largest number of elements of the broadcast ``(..., D, D)`` product formed at once
_MAX_PRODUCT = 2 ** 24


def _broadcast_quadratic(diff, chol):
    r""":math:`\|L^T \delta\|^2` for ``diff`` ``(..., D)`` and ``chol`` ``(..., D, D)`` that
    broadcast against each other (say ``(N, 1, D)`` items against ``(K, D, D)`` factors).

    A batched matmul would materialise the factors expanded to the full broadcast batch
    (``N K D^2`` numbers); the leading broadcast dimension is therefore processed in chunks.
    """
    d = diff.shape[-1]
    shape = torch.broadcast_shapes(diff.shape[:-1], chol.shape[:-2])
    diff = diff.reshape((1,) * (len(shape) - diff.dim() + 1) + diff.shape)
    chol = chol.reshape((1,) * (len(shape) - chol.dim() + 2) + chol.shape)

    def quad(delta, factor):
        return ((factor.transpose(-1, -2) @ delta.unsqueeze(-1)).squeeze(-1) ** 2).sum(-1)

    total = math.prod(shape) * d * d
    if not shape or shape[0] == 1 or total <= _MAX_PRODUCT:
        return quad(diff, chol)
    step = max(1, _MAX_PRODUCT // max(1, total // shape[0]))

    def take(t, lo):
        return t if t.shape[0] == 1 else t[lo:lo + step]

    return torch.cat([quad(take(diff, lo), take(chol, lo)) for lo in range(0, shape[0], step)], 0).expand(shape)


@contextmanager
def quiet_wishart():
    """Silence torch's "Singular sample detected." warning of ``Wishart.rsample``, and only that.

    torch's check is inverted (pytorch/pytorch#122021): it warns when a draw *is* positive definite
    and then redraws those, so every Wishart draw warns though none is singular. Used wherever
    pyro-memo draws Wishart samples: :func:`sample_wishart`, model recognition, and the Pyro guide
    (which Pyro's ``Trace_ELBO``, ``Predictive`` and ``SVI`` sample)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Singular sample detected", category=UserWarning)
        yield


def sample_wishart(nu, B):
    """:math:`\\Lambda_k \\sim W(\\nu_k, B_k^{-1})` (``B`` the inverse scale), with torch's
    Bartlett sampler (its false warning silenced: :func:`quiet_wishart`)."""
    with quiet_wishart():
        return torch.distributions.Wishart(nu, precision_matrix=B, validate_args=False).sample()


def check_wishart_prior(nu, B, family):
    d = B.shape[-1]
    if B.dim() != 2 or B.shape[0] != d:
        raise ValueError(f"{family} prior 'B' must be a square (D, D) matrix; got {tuple(B.shape)}")
    if nu.dim() != 0 or not bool(nu > d - 1):
        raise ValueError(f"{family} prior 'nu' must be a scalar > D - 1 = {d - 1}; got {nu.tolist()}")
    safe_cholesky(B, f"{family} prior 'B'")
