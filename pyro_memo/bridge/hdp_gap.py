"""The gap between the memoized HDP bound and the model's true ELBO, in closed form.

The HDP bound (Hughes, Kim & Sudderth 2015, eq. 11; :mod:`pyro_memo.allocation.hdp_sticks`)
replaces each document's expected Dirichlet log-normaliser
:math:`E_q[\\log\\Gamma(\\alpha) - \\sum_{k=1}^{K+1}\\log\\Gamma(\\alpha\\beta_k)]` by the lower
bound :math:`K\\log\\alpha + \\sum_{k=1}^{K+1} E_q\\log\\beta_k`. Every other term is exact, so
for ``D`` documents

.. math::

    \\mathrm{ELBO}_{\\text{true}} - \\mathcal{L} = D\\, E_q\\Big[g(\\alpha) - \\sum_{k=1}^{K+1} g(\\alpha\\beta_k)\\Big]
    \\ge 0, \\qquad g(x) = \\log\\Gamma(1 + x),

which is what Pyro's ``Trace_ELBO`` of the fitted guide estimates minus the bound. Expanding
``g`` around :math:`\\alpha` (its Taylor series there has radius :math:`1 + \\alpha`, the
distance to the pole of :math:`\\Gamma(1 + x)` at :math:`x = -1`, and :math:`0 \\le \\alpha -
\\alpha\\beta_k \\le \\alpha`), with :math:`g^{(m)}(\\alpha) / m! = (-1)^m \\zeta(m, 1 + \\alpha) / m`
for :math:`m \\ge 2` and :math:`\\sum_k \\beta_k = 1`:

.. math::

    \\frac{\\text{gap}}{D} = K\\,[\\alpha\\psi(1 + \\alpha) - g(\\alpha)]
    - \\sum_{k=1}^{K+1}\\sum_{m\\ge 2} \\frac{\\zeta(m, 1 + \\alpha)\\,\\alpha^m}{m} E_q[(1 - \\beta_k)^m].

Every term of the double sum is non-negative and the ``m``-th is at most
:math:`(2 + \\alpha)(\\alpha / (1 + \\alpha))^m`, so the series is truncated where that bound
falls below 1e-17. The moments :math:`E_q[(1 - \\beta_k)^m]` are exact: with the remaining
stick :math:`R_k = \\prod_{\\ell<k}(1 - u_\\ell)`, :math:`1 - \\beta_k = (1 - R_k) + R_k(1 - u_k)`
and :math:`1 - R_{k+1} = (1 - R_k) + R_k u_k` are sums of non-negative terms, so the joint moments
:math:`E[(1 - R_k)^p R_k^q]` follow by binomial expansion from the Beta moments
:math:`E[u^i (1 - u)^j] = B(a + i, b + j) / B(a, b)` with no cancellation.
"""

import math

import torch


def _beta_moments(a, b, M):
    """``(M + 1, M + 1)`` table of :math:`E[u^i (1 - u)^j]` for ``u ~ Beta(a, b)``."""
    i = torch.arange(M + 1, dtype=torch.float64)
    ai, bj = a + i[:, None], b + i[None, :]
    log_b = torch.lgamma(ai) + torch.lgamma(bj) - torch.lgamma(ai + bj)
    return torch.exp(log_b - (math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)))


def _binomials(M):
    n = torch.arange(M + 1, dtype=torch.float64)
    rest = (n[:, None] - n[None, :]).clamp_min(0)
    log_c = torch.lgamma(n[:, None] + 1) - torch.lgamma(n[None, :] + 1) - torch.lgamma(rest + 1)
    return torch.where(n[None, :] <= n[:, None], torch.exp(log_c), torch.zeros(()))


def _terms_needed(alpha, tol=1e-17, limit=1000):
    ratio = alpha / (1.0 + alpha)
    M = max(2, math.ceil(math.log(tol / (2.0 + alpha)) / math.log(ratio)))
    if M > limit:
        raise ValueError(f"the normaliser gap's series needs {M} terms at alpha = {alpha}; alpha <= 20 is supported")
    return M


def one_minus_beta_moments(rho, omega, M):
    """:math:`E_q[(1 - \\beta_k)^m]` for ``k = 1..K+1`` and ``m = 0..M``: ``(K + 1, M + 1)``.

    :param rho: ``(K,)`` stick means.
    :param omega: ``(K,)`` stick concentrations (``q(u_k) = Beta(rho_k omega_k, (1 - rho_k) omega_k)``).
    :param int M: highest moment.
    """
    C = _binomials(M)
    m = torch.arange(M + 1)
    j = torch.arange(M + 1)
    below = j[None, :] <= m[:, None]
    p_index = (m[:, None] - j[None, :]).clamp_min(0)
    A = torch.zeros(M + 1, M + 1, dtype=torch.float64)  # A[p, q] = E[(1 - R)^p R^q], R_1 = 1
    A[0, :] = 1.0
    rows = []
    for r, w in zip(rho.double().tolist(), omega.double().tolist(), strict=True):
        B = _beta_moments(r * w, (1 - r) * w, M)
        # E[(1 - beta_k)^m] = sum_j C(m, j) E[(1 - R)^(m - j) R^j] E[(1 - u)^j]
        terms = C * A[p_index, j[None, :].expand(M + 1, M + 1)] * B[0][None, :]
        rows.append(torch.where(below, terms, torch.zeros(())).sum(1))
        new = torch.zeros_like(A)  # A'[p, q] = sum_i C(p, i) A[p - i, i + q] E[u^i (1 - u)^q]
        for i in range(M + 1):
            n = M + 1 - i
            new[i:, :n] += C[i:, i, None] * A[:n, i:] * B[i, None, :n]
        A = new
    rows.append(A[:, 0])  # the tail: beta_{K+1} = R_{K+1}
    return torch.stack(rows)


def normaliser_gap(rho, omega, alpha, num_docs):
    """``ELBO_true - bound`` of ``num_docs`` documents (see the module docstring), in closed form.

    :param rho: ``(K,)`` stick means.
    :param omega: ``(K,)`` stick concentrations.
    :param float alpha: the documents' concentration (at most 20: the series' terms shrink like
        :math:`(\alpha / (1 + \alpha))^m`).
    :param int num_docs: ``D``.
    :returns: a Python float, non-negative.
    """
    alpha = float(alpha)
    K = len(rho)
    M = _terms_needed(alpha)
    moments = one_minus_beta_moments(rho, omega, M)  # (K + 1, M + 1)
    m = torch.arange(2, M + 1, dtype=torch.float64)
    a1 = torch.tensor(1.0 + alpha, dtype=torch.float64)
    coef = torch.special.zeta(m, a1) * torch.exp(m * math.log(alpha)) / m
    series = float((moments[:, 2:] * coef).sum())
    per_doc = K * (alpha * float(torch.special.digamma(a1)) - math.lgamma(1.0 + alpha)) - series
    return num_docs * per_doc
