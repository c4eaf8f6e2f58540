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


#: where the asymptotic series of :func:`digamma_tail` takes over from the digamma
_ASYMPTOTIC_FROM = 10.0
# B_2k / 2k, k = 1..7: psi(x) = log x - 1/(2x) - sum_k (B_2k / 2k) x^(-2k) (Abramowitz & Stegun 6.3.18)
_DIGAMMA_SERIES = (1.0 / 12, -1.0 / 120, 1.0 / 252, -1.0 / 240, 1.0 / 132, -691.0 / 32760, 1.0 / 12)

# The Beta and Gamma functions below are written through the two remainders of Stirling's forms,
#   log Gamma(x) = (x - 1/2) log x - x + log(2 pi) / 2 + omega(x)     (stirlerr)
#   psi(x)       = log x - 1/(2x) - S(x)                              (digamma_tail),
# which hold for every x > 0 and leave only terms of the result's size: lgamma(1e15) alone is 3e16, and
# differences of lgamma or digamma values lose whole nats to rounding there. Each remainder is evaluated
# once on the stacked arguments: on short vectors the kernels are the cost.


def _polynomial(w, coefficients):
    """:math:`\\sum_k c_k w^k`, :math:`k = 0, 1, \\ldots`, elementwise by Horner's rule (two kernels a term, and
    no more memory than ``w``: these also run on blocks of millions of elements)."""
    out = torch.full_like(w, coefficients[-1])
    for c in reversed(coefficients[:-1]):
        out = out * w + c
    return out


def digamma_tail(x):
    """:math:`S(x) = \\log x - \\tfrac{1}{2x} - \\psi(x)`, elementwise for ``x > 0``: by its asymptotic series
    from 10 on (seven terms: below 1e-16 relative), where the difference would cancel; below 10 as that
    difference, whose terms stay below ~1/x."""
    w = torch.clamp(x, min=_ASYMPTOTIC_FROM) ** -2
    series = w * _polynomial(w, _DIGAMMA_SERIES)
    m = torch.clamp(x, max=_ASYMPTOTIC_FROM)
    return torch.where(x >= _ASYMPTOTIC_FROM, series, torch.log(m) - 0.5 / m - torch.digamma(m))


def digamma_increment(x, h):
    """:math:`\\psi(x + h) - \\psi(x) = \\mathrm{log1p}(h/x) + \\frac{h}{2x(x + h)} - S(x + h) + S(x)` for
    ``x > 0``, ``h >= 0``, elementwise (:func:`digamma_tail` ``S``), with the increment ``h`` given exactly
    (``x + h`` rounds away a small ``h`` at ~1e15): the difference of two digammas of ~1e15 keeps only
    ~1e-14 absolute, lost once multiplied by the counts it weighs."""
    x, h = torch.broadcast_tensors(x, h)
    y = x + h
    tail = digamma_tail(torch.stack((x, y)))
    return _digamma_step(x, h, y, tail[0], tail[1])


def _digamma_step(x, h, y, tail_x, tail_y):
    """:math:`\\psi(y) - \\psi(x)` for :math:`y = x + h` given :math:`S(x)`, :math:`S(y)`
    (:func:`digamma_increment`)."""
    return torch.log1p(h / x) + h / (2 * x * y) - tail_y + tail_x


def lbeta(a, b):
    """Log of the Beta function, elementwise, by Stirling's form
    :math:`\\log B(a, b) = \\omega(a) + \\omega(b) - \\omega(a + b) + \\tfrac12\\log 2\\pi - \\tfrac12\\log b
    - (a - \\tfrac12)\\,\\mathrm{log1p}(b/a) - b\\,\\mathrm{log1p}(a/b)` with :math:`\\omega` = :func:`stirlerr`."""
    a, b = torch.broadcast_tensors(a, b)
    omega = stirlerr(torch.stack((a, b, a + b)))
    log1p = torch.log1p(torch.stack((b / a, a / b)))
    return (omega[0] + omega[1] - omega[2] + _HALF_LOG_2PI - 0.5 * torch.log(b)
            - (a - 0.5) * log1p[0] - b * log1p[1])


def kl_beta(a, b, a0, b0):
    """KL(Beta(a, b) || Beta(a0, b0)), elementwise: :math:`\\log B(a_0, b_0) - \\log B(a, b) + (a - a_0)
    (\\psi(a) - \\psi(c)) + (b - b_0)(\\psi(b) - \\psi(c))`, :math:`c = a + b`. The terms in ``(a, b)`` alone,
    :math:`-\\log B(a, b) + a(\\psi(a) - \\psi(c)) + b(\\psi(b) - \\psi(c))`, are taken together as
    :math:`\\tfrac12\\log\\frac{ab}{c} - \\tfrac12 - \\tfrac12\\log 2\\pi - \\omega(a) - \\omega(b) + \\omega(c)
    - a S(a) - b S(b) + c S(c)` (:func:`stirlerr` ``omega``, :func:`digamma_tail` ``S``): the three terms it
    replaces are each ~1e15 at ``a = b = 1e15`` and cancel to a few nats. The digamma differences are
    :func:`digamma_increment`'s, and :math:`\\log B(a_0, b_0)` is :func:`lbeta`'s."""
    a, b, a0, b0 = torch.broadcast_tensors(a, b, a0, b0)
    c = a + b
    x = torch.stack((a, b, c))
    log_x, omega, tail = torch.log(x), stirlerr(x), digamma_tail(x)
    increment = _digamma_step(x[:2], x[:2].flip(0), c, tail[:2], tail[2])  # psi(c) - psi(a), psi(c) - psi(b)
    weighted = x * tail
    self_term = (0.5 * (log_x[0] + log_x[1] - log_x[2]) - 0.5 - _HALF_LOG_2PI
                 - omega[0] - omega[1] + omega[2] - weighted[0] - weighted[1] + weighted[2])
    return lbeta(a0, b0) + self_term + a0 * increment[0] + b0 * increment[1]


def kl_gamma(a, b, a0, b0):
    """KL(Gamma(a, rate=b) || Gamma(a0, rate=b0)), elementwise:
    :math:`(a - a_0)\\psi(a) - \\log\\Gamma(a) + \\log\\Gamma(a_0) + a_0 \\log(b / b_0) + a (b_0 - b) / b`.
    The first two terms and the :math:`-a` of the last are taken together through Stirling's forms,
    :math:`(\\tfrac12 - a_0)\\log a - \\frac{a - a_0}{2a} - (a - a_0) S(a) - \\tfrac12\\log 2\\pi - \\omega(a)`
    (:func:`digamma_tail` ``S``, :func:`stirlerr` ``omega``), so no term grows like :math:`a \\log a`."""
    own = ((0.5 - a0) * torch.log(a) - (a - a0) / (2 * a) - (a - a0) * digamma_tail(a)
           - _HALF_LOG_2PI - stirlerr(a) + a * b0 / b)
    return own + torch.lgamma(a0) + a0 * (torch.log(b) - torch.log(b0))


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


# coefficients of stirlerr's asymptotic series 1/(12 n) - 1/(360 n^3) + 1/(1260 n^5) - ... (Loader 2000)
_STIRLING = (1.0 / 12, -1.0 / 360, 1.0 / 1260, -1.0 / 1680, 1.0 / 1188)
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def stirlerr(n):
    """Stirling's error :math:`\\log n! - (n + \\tfrac12)\\log n + n - \\tfrac12\\log 2\\pi`, elementwise for
    ``n > 0`` (Loader 2000, as R's ``stirlerr``): by its asymptotic series (five terms) above 15, where the
    difference of the log factorial and its Stirling form would cancel, from ``lgamma`` at and below 15
    (its terms there stay below ~50, so the difference keeps ~1e-14 absolute accuracy)."""
    big = torch.clamp(n, min=15.0)
    series = _polynomial(big ** -2, _STIRLING) / big
    m = torch.clamp(n, max=15.0)
    direct = torch.lgamma(m + 1) - (m + 0.5) * torch.log(m) + m - _HALF_LOG_2PI
    return torch.where(n <= 15, direct, series)


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
