"""Dirichlet-process stick-breaking allocation with a truncated variational family.

Model (Hughes & Sudderth 2013, eq. 1): :math:`v_k \\sim Beta(1, \\alpha)`,
:math:`w_k = v_k \\prod_{\\ell<k} (1 - v_\\ell)`, :math:`z_n \\sim Cat(w)`.
Variational family: :math:`q(v_k) = Beta(\\eta_{k1}, \\eta_{k0})` for ``k <= K``.

* ``"nested"`` truncation (Hughes & Sudderth 2013, §2.1): :math:`q(z_n = k) = 0` for ``k > K``;
  sticks beyond ``K`` stay at their prior and add nothing to the ELBO, so a model
  with ``K`` components embeds exactly into one with more (births rely on this).
* ``"direct"`` truncation (Blei & Jordan 2006, §3): :math:`q(v_K = 1) = 1`, so the last
  component takes all remaining mass and has no stick of its own.
"""

import torch

from ..families._special import kl_beta

TRUNCATIONS = ("nested", "direct")


def stick_breaking_weights(v):
    """Mixture weights from sticks; with ``T - 1`` sticks the last weight closes the stick.

    ``v`` has shape ``(..., T - 1)``; the result ``(..., T)`` sums to one (the
    convention of Pyro's DP-mixture tutorial, :math:`v_T = 1`).
    """
    one = torch.ones_like(v[..., :1])
    remaining = torch.cumprod(torch.cat([one, 1 - v], -1), -1)
    return torch.cat([v, one], -1) * remaining


def log_stick_weights(v):
    """:math:`\\log w_k = \\log v_k + \\sum_{\\ell<k}\\log(1 - v_\\ell)` for stick values ``v``
    of shape ``(K,)`` (point values, e.g. a Gibbs draw; ``v[-1] = 1`` closes the stick)."""
    log_rest = torch.cumsum(torch.log1p(-v[:-1]), 0)
    return torch.log(v) + torch.cat([v.new_zeros(1), log_rest])


class DPSticks:
    """Stick-breaking allocation of a DP mixture.

    :param float alpha: DP concentration :math:`\\alpha_0 > 0`.
    :param str truncation: ``"nested"`` (default) or ``"direct"``.
    """

    def __init__(self, alpha=1.0, truncation="nested"):
        alpha = float(alpha)
        if not alpha > 0:
            raise ValueError(f"DP concentration alpha must be positive; got {alpha}")
        if truncation not in TRUNCATIONS:
            raise ValueError(f"truncation must be one of {TRUNCATIONS}; got '{truncation}'")
        self.alpha = alpha
        self.truncation = truncation

    def __repr__(self):
        return f"DPSticks(alpha={self.alpha}, truncation='{self.truncation}')"

    def posterior(self, counts):
        """Closed-form stick update (Hughes & Sudderth 2013, eq. 10): :math:`\\eta_{k1} = 1 + \\hat N_k`,
        :math:`\\eta_{k0} = \\alpha + \\sum_{\\ell > k} \\hat N_\\ell`. Returns ``(eta1, eta0)``."""
        tail = counts.flip(0).cumsum(0).flip(0) - counts  # sum over l > k
        return 1.0 + counts, self.alpha + tail.clamp_min(0.0)

    def _has_stick(self, K, like):
        """Mask of components that own a stick (all but the last under direct truncation)."""
        mask = torch.ones(K, dtype=torch.bool, device=like.device)
        if self.truncation == "direct":
            mask[-1] = False
        return mask

    def expected_log_weights(self, eta1, eta0):
        """:math:`E_q[\\log w_k] = E[\\log v_k] + \\sum_{\\ell<k} E[\\log(1 - v_\\ell)]`: ``(K,)``."""
        total = torch.digamma(eta1 + eta0)
        e_log_v = torch.digamma(eta1) - total
        e_log_1mv = torch.digamma(eta0) - total
        if self.truncation == "direct":
            e_log_v = torch.cat([e_log_v[:-1], torch.zeros_like(e_log_v[-1:])])
        prefix = torch.cumsum(e_log_1mv, 0) - e_log_1mv
        return e_log_v + prefix

    def kl_to_prior(self, eta1, eta0):
        """:math:`KL(q(v_k) \\| Beta(1, \\alpha))` per component, zero for a fixed last stick."""
        one = torch.ones_like(eta1)
        kl = kl_beta(eta1, eta0, one, self.alpha * one)
        return torch.where(self._has_stick(eta1.shape[0], eta1), kl, torch.zeros_like(kl))

    def elbo(self, counts, eta1, eta0):
        """Allocation part of Hughes & Sudderth 2013, eq. 8:
        :math:`\\sum_k \\hat N_k E[\\log w_k] - KL(q(v_k) \\| p(v_k))`."""
        return (counts * self.expected_log_weights(eta1, eta0)).sum() - self.kl_to_prior(eta1, eta0).sum()
