"""A concentration parameter with a Gamma prior and a Gamma variational factor.

A concentration :math:`c` (the HDP's document-level :math:`\\alpha` or top-level :math:`\\gamma`) with
prior :math:`c \\sim \\mathrm{Gamma}(s_1, s_2)` (shape, rate) and factor :math:`q(c) = \\mathrm{Gamma}(w_1,
w_2)`. Wherever the bound of an HDP involves :math:`c`, it does so through a term
:math:`n\\,E[\\log c] - t\\,E[c]` (Blei & Jordan 2006, §5, for DP sticks; the HDP's surrogate bound of
Hughes, Kim & Sudderth 2015, eq. 11, is of this form in :math:`\\alpha`). Such terms plus
:math:`E[\\log p(c)] - E[\\log q(c)]` are a Gamma log-density in :math:`c` up to a constant, so the optimal
factor is :math:`w_1 = s_1 + n`, :math:`w_2 = s_2 + t` (:meth:`GammaConcentration.updated`), and the
bound gains :math:`-KL(q(c) \\| p(c))` (:meth:`GammaConcentration.kl`).

:class:`GammaConcentration` is a ``float`` equal to :math:`E_q[c]`: everything that needs a number
(a local step's Dirichlet prior :math:`E[\\alpha] E[\\beta]`, a stick update) takes it unchanged, and the
factor travels with the posterior that holds it.
"""

import math

import torch

from ..families._special import kl_gamma

__all__ = ["GammaConcentration", "concentration_from_state", "concentration_state", "expected_log",
           "gamma_prior_pair", "learnable"]


def gamma_prior_pair(prior, name="a concentration's Gamma prior"):
    """``prior`` as ``(s1, s2)``, a Gamma prior's shape and rate, two positive finite floats.

    :raises ValueError: naming ``name`` for anything else: three numbers or one, a string, a non-number
        (they failed in tuple unpacking or ``float``), a zero, negative or infinite shape or rate.
    """
    try:
        s1, s2 = (float(a) for a in prior) if not isinstance(prior, (str, bytes)) else (None, None)
    except (TypeError, ValueError):
        s1 = s2 = None
    if s1 is None or not (0 < s1 < math.inf and 0 < s2 < math.inf):
        raise ValueError(f"{name} (shape, rate) must be two positive finite numbers; got {prior!r}")
    return s1, s2


class GammaConcentration(float):
    """:math:`q(c) = \\mathrm{Gamma}(w_1, w_2)` under the prior :math:`\\mathrm{Gamma}(s_1, s_2)`; as a
    number, :math:`E_q[c] = w_1 / w_2`.

    :param prior: ``(s1, s2)``, shape and rate, both positive and finite.
    :param q: ``(w1, w2)``; default the prior itself.
    """

    def __new__(cls, prior, q=None):
        s1, s2 = gamma_prior_pair(prior)
        w1, w2 = (s1, s2) if q is None else (float(a) for a in q)
        if not (0 < w1 < math.inf and 0 < w2 < math.inf):
            raise ValueError(f"q(concentration) = Gamma({w1}, {w2}) is not a proper Gamma")
        value = super().__new__(cls, w1 / w2)
        value.prior, value.q = (s1, s2), (w1, w2)
        return value

    def __repr__(self):
        return f"GammaConcentration(prior={self.prior}, q={self.q}, mean={float(self):.6g})"

    def __reduce__(self):
        return GammaConcentration, (self.prior, self.q)

    @property
    def e_log(self):
        """:math:`E_q[\\log c] = \\psi(w_1) - \\log w_2`."""
        w1, w2 = self.q
        return float(torch.special.digamma(torch.tensor(w1, dtype=torch.float64))) - math.log(w2)

    def kl(self):
        """:math:`KL(q(c) \\| p(c))` (a float)."""
        t = torch.tensor([*self.q, *self.prior], dtype=torch.float64)
        return float(kl_gamma(t[0], t[1], t[2], t[3]))

    def updated(self, n, t):
        """The optimal factor given the bound's terms :math:`n E[\\log c] - t E[c]`:
        :math:`\\mathrm{Gamma}(s_1 + n, s_2 + t)` (needs :math:`s_2 + t > 0`)."""
        s1, s2 = self.prior
        return GammaConcentration(self.prior, (s1 + float(n), s2 + float(t)))


def learnable(value, prior, name="a concentration's Gamma prior"):
    """``value`` as a fixed float when ``prior`` is ``None``, else a :class:`GammaConcentration`
    starting at the prior (``value`` then unused); a bad ``prior`` is a :class:`ValueError` naming ``name``."""
    if prior is None:
        return float(value)
    return GammaConcentration(gamma_prior_pair(prior, name))


def expected_log(c):
    """:math:`E_q[\\log c]`: the factor's for a :class:`GammaConcentration`, else :math:`\\log c`."""
    return c.e_log if isinstance(c, GammaConcentration) else math.log(float(c))


def concentration_state(c):
    """A concentration as plain data: a float, or ``[s1, s2, w1, w2]`` for a learnt one."""
    return [*c.prior, *c.q] if isinstance(c, GammaConcentration) else float(c)


def concentration_from_state(state):
    """The inverse of :func:`concentration_state`."""
    if isinstance(state, (list, tuple)):
        return GammaConcentration(state[:2], state[2:])
    if torch.is_tensor(state) and state.numel() == 4:
        return GammaConcentration(state[:2].tolist(), state[2:].tolist())
    return float(state)
