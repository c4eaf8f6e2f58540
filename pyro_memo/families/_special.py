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


#: where the asymptotic forms below take over from ``lgamma`` / ``digamma`` differences
_ASYMPTOTIC_FROM = 10.0
# B_2k / 2k, k = 1..7: psi(x) = log x - 1/(2x) - sum_k (B_2k / 2k) x^(-2k) (Abramowitz & Stegun 6.3.18)
_DIGAMMA_SERIES = (1.0 / 12, -1.0 / 120, 1.0 / 252, -1.0 / 240, 1.0 / 132, -691.0 / 32760, 1.0 / 12)


def _digamma_tail(x):
    """:math:`\\log x - \\tfrac{1}{2x} - \\psi(x)` by its asymptotic series (seven terms: below 1e-16 relative
    for ``x >= 10``); meaningful only there, so ``x`` is clamped to it."""
    w = 1.0 / torch.clamp(x, min=_ASYMPTOTIC_FROM) ** 2
    tail = torch.zeros_like(w)
    for c in reversed(_DIGAMMA_SERIES):
        tail = w * (c + tail)
    return tail


def digamma_increment(x, h):
    """:math:`\\psi(x + h) - \\psi(x)` for ``x > 0``, ``h >= 0``, elementwise, with the increment ``h`` given
    exactly (``x + h`` rounds away a small ``h`` at ~1e15). Where ``x`` passes 10 it is
    :math:`\\mathrm{log1p}(h/x) + \\frac{h}{2x(x + h)} - S(x + h) + S(x)` (:func:`_digamma_tail` ``S``), whose
    terms are of the increment's size; the difference of two digammas of ~1e15 keeps only ~1e-14 absolute,
    lost once multiplied by the counts it weighs."""
    big = x >= _ASYMPTOTIC_FROM
    xs = torch.where(big, x, 2 * _ASYMPTOTIC_FROM * torch.ones_like(x))
    ys = xs + h
    asymptotic = torch.log1p(h / xs) + h / (2 * xs * ys) - _digamma_tail(ys) + _digamma_tail(xs)
    return torch.where(big, asymptotic, torch.digamma(x + h) - torch.digamma(x))


def lbeta(a, b):
    """Log of the Beta function, elementwise. Once :math:`a + b` passes 10 by Stirling's form
    :math:`\\log B(a, b) = \\omega(a) + \\omega(b) - \\omega(a + b) + \\tfrac12\\log 2\\pi - \\tfrac12\\log b
    - (a - \\tfrac12)\\,\\mathrm{log1p}(b/a) - b\\,\\mathrm{log1p}(a/b)` with :math:`\\omega` = :func:`stirlerr`
    (from :math:`\\log\\Gamma(x) = (x - \\tfrac12)\\log x - x + \\tfrac12\\log 2\\pi + \\omega(x)`), whose terms
    are of the result's size: ``lgamma(1e15)`` alone is 3e16, and the three ``lgamma`` values lose whole
    nats to rounding there."""
    big = a + b >= _ASYMPTOTIC_FROM
    direct = torch.lgamma(a) + torch.lgamma(b) - torch.lgamma(a + b)
    one = torch.ones_like(a + b)
    sa, sb = torch.where(big, a, one), torch.where(big, b, one)
    stirling = (stirlerr(sa) + stirlerr(sb) - stirlerr(sa + sb) + _HALF_LOG_2PI - 0.5 * torch.log(sb)
                - (sa - 0.5) * torch.log1p(sb / sa) - sb * torch.log1p(sa / sb))
    return torch.where(big, stirling, direct)


def _beta_self_term(a, b):
    """:math:`-\\log B(a, b) + a(\\psi(a) - \\psi(c)) + b(\\psi(b) - \\psi(c))`, :math:`c = a + b` (the part of
    KL(Beta(a, b) || .) that depends on ``(a, b)`` alone), elementwise. Where both pass 10, Stirling's series
    (:func:`stirlerr` ``omega``, :func:`_digamma_tail` ``S``) turn it into
    :math:`\\tfrac12\\log\\frac{ab}{c} - \\tfrac12 - \\tfrac12\\log 2\\pi - \\omega(a) - \\omega(b) + \\omega(c)
    - a S(a) - b S(b) + c S(c)`, whose terms are of the result's size; the three terms it replaces are each
    ~1e15 at ``a = b = 1e15`` and cancel to a few nats."""
    big = (a >= _ASYMPTOTIC_FROM) & (b >= _ASYMPTOTIC_FROM)
    c = a + b
    direct = -lbeta(a, b) - a * digamma_increment(a, b) - b * digamma_increment(b, a)
    sa = torch.where(big, a, 2 * _ASYMPTOTIC_FROM * torch.ones_like(c))
    sb = torch.where(big, b, 2 * _ASYMPTOTIC_FROM * torch.ones_like(c))
    sc = sa + sb
    stirling = (0.5 * (torch.log(sa) + torch.log(sb) - torch.log(sc)) - 0.5 - _HALF_LOG_2PI
                - stirlerr(sa) - stirlerr(sb) + stirlerr(sc)
                - sa * _digamma_tail(sa) - sb * _digamma_tail(sb) + sc * _digamma_tail(sc))
    return torch.where(big, stirling, direct)


def kl_beta(a, b, a0, b0):
    """KL(Beta(a, b) || Beta(a0, b0)), elementwise: :math:`\\log B(a_0, b_0) - \\log B(a, b) + (a - a_0)
    (\\psi(a) - \\psi(a + b)) + (b - b_0)(\\psi(b) - \\psi(a + b))`, with the terms in ``(a, b)`` alone taken
    together (:func:`_beta_self_term`) and the digamma differences by :func:`digamma_increment`, so that
    nothing cancels at large ``a`` and ``b``."""
    return lbeta(a0, b0) + _beta_self_term(a, b) + a0 * digamma_increment(a, b) + b0 * digamma_increment(b, a)


def kl_gamma(a, b, a0, b0):
    """KL(Gamma(a, rate=b) || Gamma(a0, rate=b0)), elementwise:
    :math:`(a - a_0)\\psi(a) - \\log\\Gamma(a) + \\log\\Gamma(a_0) + a_0 \\log(b / b_0) + a (b_0 - b) / b`.
    Where ``a`` passes 10 the first two terms and :math:`-a` are taken together through Stirling's series,
    :math:`(\\tfrac12 - a_0)\\log a - \\frac{a - a_0}{2a} - (a - a_0) S(a) - \\tfrac12\\log 2\\pi - \\omega(a) + a`
    (:func:`_digamma_tail` ``S``, :func:`stirlerr` ``omega``), so no term grows like :math:`a \\log a`."""
    big = a >= _ASYMPTOTIC_FROM
    direct = (a - a0) * torch.digamma(a) - torch.lgamma(a) - a + a * b0 / b
    sa = torch.where(big, a, 2 * _ASYMPTOTIC_FROM * torch.ones_like(a))
    stirling = ((0.5 - a0) * torch.log(sa) - (sa - a0) / (2 * sa) - (sa - a0) * _digamma_tail(sa)
                - _HALF_LOG_2PI - stirlerr(sa) + sa * b0 / b)
    return torch.where(big, stirling, direct) + torch.lgamma(a0) + a0 * (torch.log(b) - torch.log(b0))


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


# Stirling-series coefficients 1/12, 1/360, 1/1260, 1/1680, 1/1188 of stirlerr (Loader 2000)
_STIRLING = (1.0 / 12, 1.0 / 360, 1.0 / 1260, 1.0 / 1680, 1.0 / 1188)
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def stirlerr(n):
    """Stirling's error :math:`\\log n! - (n + \\tfrac12)\\log n + n - \\tfrac12\\log 2\\pi`, elementwise for
    ``n > 0`` (Loader 2000, as R's ``stirlerr``): by its asymptotic series (five terms) above 15, where the
    difference of the log factorial and its Stirling form would cancel, from ``lgamma`` at and below 15
    (its terms there stay below ~50, so the difference keeps ~1e-14 absolute accuracy)."""
    s0, s1, s2, s3, s4 = _STIRLING
    big = torch.clamp(n, min=15.0)
    nn = big * big
    out = (s0 - (s1 - (s2 - (s3 - s4 / nn) / nn) / nn) / nn) / big
    small = n <= 15
    if bool(small.any()):
        m = n[small]
        out = out.masked_scatter(small, torch.lgamma(m + 1) - (m + 0.5) * torch.log(m) + m - _HALF_LOG_2PI)
    return out


def bd0(x, mean):
    """The deviance term :math:`x \\log(x / m) + m - x \\ge 0`, elementwise for ``x >= 0``, ``m > 0``
    (Loader 2000, as R's ``bd0``): by the series :math:`(x - m) v + 2 x \\sum_{j \\ge 1} v^{2j + 1}/(2j + 1)`
    in :math:`v = (x - m)/(x + m)` where ``x`` is within 10% of ``m`` (nine terms: :math:`v^2 < 0.01`), where
    the direct form would cancel to nothing at large ``x``."""
    diff, total = x - mean, x + mean
    v = diff / total
    near = diff.abs() < 0.1 * total
    v = torch.where(near, v, torch.zeros_like(v))
    w = v * v
    tail = 1.0 / 19
    for j in range(8, 0, -1):  # sum_{j=1..9} w^j / (2j + 1) by Horner
        tail = 1.0 / (2 * j + 1) + w * tail
    series = diff * v + 2 * x * v * w * tail
    safe_x = torch.where(x > 0, x, mean)
    direct = x * torch.log(safe_x / mean) + mean - x
    return torch.where(near, series, direct)


def log_negative_binomial(x, size, p, q, log_p):
    """:math:`\\log \\frac{\\Gamma(x + r)}{\\Gamma(r)\\, x!} p^r q^x`, the negative binomial log-pmf of counts
    ``x >= 0`` with shape ``r = size > 0`` and probabilities ``p``, ``q = 1 - p`` (``log_p``:
    :math:`\\log p`, passed for its accuracy near 1), elementwise with broadcasting.

    By Loader's saddle-point form (2000; R's ``dnbinom`` through ``dbinom_raw``), which holds only terms of
    the size of the result: the difference of ``lgamma`` values would lose the result to cancellation once
    the counts pass ~1e12 (``lgamma(1e18)`` is 4e19, its rounding alone ~1e4 nats)."""
    positive = x > 0
    count = torch.where(positive, x, torch.ones_like(x))
    total = count + size
    lc = (stirlerr(total) - stirlerr(size) - stirlerr(count)
          - bd0(size, total * p) - bd0(count, total * q))
    log_pmf = lc - _HALF_LOG_2PI + 0.5 * (torch.log(size) - torch.log(count) - torch.log(total))
    return torch.where(positive, log_pmf, size * log_p)


def sum_over_nonzero(x, zero_term, nonzero_term):
    """``(n, K)``: :math:`\\sum_d t(x_{nd})` for items ``x`` ``(n, D)`` whose term is
    ``zero_term`` ``(D, K)`` where :math:`x_{nd} = 0` (summed by a product with the zero pattern) and
    ``nonzero_term(rows, columns, values) -> (nnz, K)`` at the nonzero entries, so the work scales with
    the nonzero entries, not with ``n D K``."""
    out = (x == 0).to(zero_term.dtype) @ zero_term
    rows, columns = torch.nonzero(x, as_tuple=True)
    if rows.numel():
        out = out.index_add(0, rows, nonzero_term(rows, columns, x[rows, columns]))
    return out


#: the most elements :func:`in_row_blocks` lets a block of rows span
BLOCK_ELEMENTS = 2 ** 22


def in_row_blocks(fn, x, per_row, max_elements=BLOCK_ELEMENTS):
    """``fn(x)`` computed on blocks of rows of ``x`` whose ``per_row`` elements each stay within
    ``max_elements`` (a memory bound on elementwise work of ``(rows, K, D)``), joined along the rows."""
    rows = max(1, max_elements // max(1, per_row))
    if x.shape[0] <= rows:
        return fn(x)
    return torch.cat([fn(x[lo:lo + rows]) for lo in range(0, x.shape[0], rows)])
