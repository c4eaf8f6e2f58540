"""Hyperparameters learnt by type-II maximum likelihood on the exact bound.

A :class:`Learnt` value is a ``float`` (the current point estimate) that marks a hyperparameter to be
re-estimated at every global step: with the variational factors fixed, the bound is maximised over
the hyperparameter exactly, so the step never lowers it (empirical Bayes; Minka 2000, "Estimating a
Dirichlet distribution", for the fixed point of a Dirichlet's concentration).

:func:`symmetric_dirichlet_ml` gives the case of the topics' symmetric prior :math:`\\mathrm{Dir}(\\lambda_0
\\mathbf 1_V)`: the bound's terms in :math:`\\lambda_0` are
:math:`f(\\lambda_0) = K[\\log\\Gamma(V\\lambda_0) - V\\log\\Gamma(\\lambda_0)] + \\lambda_0 T`, with
:math:`T = \\sum_{k,v} E_q[\\log\\phi_{kv}]`; :math:`f` is concave and
:math:`f'(\\lambda_0) = KV[\\psi(V\\lambda_0) - \\psi(\\lambda_0)] + T` falls from :math:`+\\infty` to
:math:`KV\\log V + T`, so the maximiser is the unique root of :math:`f'` (found by bisection on
:math:`\\log\\lambda_0`), or unbounded when :math:`T \\ge -KV\\log V` (the topics are uniform).
"""

import math

import torch

__all__ = ["Learnt", "symmetric_dirichlet_ml"]


class Learnt(float):
    """A hyperparameter's current value, re-estimated by type-II maximum likelihood at every
    global step (a ``float`` everywhere a number is needed)."""

    def __repr__(self):
        return f"Learnt({float(self)!r})"

    def __reduce__(self):
        return Learnt, (float(self),)


def symmetric_dirichlet_ml(K, V, total_e_log, lower=1e-6, upper=1e3, iters=80):
    """The :math:`\\lambda_0` maximising :math:`K[\\log\\Gamma(V\\lambda_0) - V\\log\\Gamma(\\lambda_0)] +
    \\lambda_0 T` for ``T = total_e_log`` (see the module docstring), within ``[lower, upper]``."""
    K, V, T = float(K), float(V), float(total_e_log)

    def slope(lam0):
        x = torch.tensor(lam0, dtype=torch.float64)
        return K * V * float(torch.digamma(V * x) - torch.digamma(x)) + T

    if slope(upper) >= 0:
        return upper
    if slope(lower) <= 0:
        return lower
    lo, hi = math.log(lower), math.log(upper)
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        if slope(math.exp(mid)) > 0:
            lo = mid
        else:
            hi = mid
    return math.exp(0.5 * (lo + hi))
