"""Gaussian likelihood with a known noise covariance and an unknown mean: the Normal-Normal family.

Pyro's DP-mixture tutorial writes this model: ``mu_k ~ MultivariateNormal(m0, S0)`` and
``x_n ~ MultivariateNormal(mu_{z_n}, R)`` with ``R`` fixed. Its conjugate posterior is Gaussian:
with :math:`P = R^{-1}`, :math:`s_k = \\sum_n r_{nk} x_n` and :math:`N_k = \\sum_n r_{nk}`,

.. math::

    S_k^{-1} = S_0^{-1} + N_k P, \\qquad m_k = S_k (S_0^{-1} m_0 + P s_k) = m_0 + S_k P \\tilde s_k,

:math:`\\tilde s_k = s_k - N_k m_0 = \\sum_n r_{nk} (x_n - m_0)` (the second form keeps its digits for data far
from the origin).

Derivation of the terms (all exact; checked against Monte Carlo and Pyro's ELBO in the tests):

- :math:`E_q[\\log N(x \\mid \\mu_k, R)] = -\\tfrac D2 \\log 2\\pi - \\tfrac12 \\log|R|
  - \\tfrac12 (x - m_k)^T P (x - m_k) - \\tfrac12 \\mathrm{tr}(P S_k)`;
- summed with weights :math:`r_{nk}` and centred at the prior mean (:math:`\\tilde x = x - m_0`,
  :math:`\\tilde m_k = m_k - m_0`, :math:`\\tilde s_k = s_k - N_k m_0`), the quadratic is
  :math:`\\sum_n r_{nk} \\tilde x_n^T P \\tilde x_n - 2 \\tilde m_k^T P \\tilde s_k + N_k \\tilde m_k^T P \\tilde m_k`,
  so the statistics are ``x`` (:math:`\\sum_n r_{nk} (x_n - c)`, about the family's fixed ``centre``
  :math:`c`, by default :math:`m_0`: :math:`\\tilde s_k` = ``x`` :math:`- N_k (m_0 - c)`; see
  :class:`~pyro_memo.families.base.CentredFamily`) and ``xPx`` (:math:`\\sum_n r_{nk} \\tilde x_n^T P \\tilde x_n`);
  centred, the three terms stay small when ``R`` is small against the data's spread (raw moments
  cancel catastrophically there);
- :math:`KL(N(m, S) \\| N(m_0, S_0)) = \\tfrac12 [\\mathrm{tr}(S_0^{-1} S) + (m - m_0)^T S_0^{-1} (m - m_0)
  - D + \\log|S_0| - \\log|S|]`;
- completing the square in :math:`\\mu` gives the marginal likelihood
  :math:`-\\tfrac{N D}2 \\log 2\\pi - \\tfrac N2 \\log|R| + \\tfrac12(\\log|S| - \\log|S_0|)
  - \\tfrac12 (\\sum r \\tilde x^T P \\tilde x - \\tilde m^T S^{-1} \\tilde m)` (centred, the prior mean is zero),
  which equals the ELBO term
  (expected log-likelihood minus KL) at the conjugate posterior, also for soft counts.
"""

import math

import torch

from ._special import safe_cholesky
from ._wishart import regularized_scatter
from .base import CentredFamily, data_for_defaults, data_moments, weighted_sums


def _logdet(chol):
    return 2 * torch.log(torch.diagonal(chol, dim1=-2, dim2=-1)).sum(-1)


def _spd_inverse(a, what="known-gauss covariance"):
    chol = safe_cholesky(a, what)
    inv = torch.cholesky_inverse(chol)
    return 0.5 * (inv + inv.transpose(-1, -2))


class KnownCovGaussian(CentredFamily):
    """:math:`x \\sim N(\\mu, R)` with ``R`` known, :math:`\\mu \\sim N(m_0, S_0)`.

    Prior keys: ``m`` (D,) the prior mean of the component means, ``S`` (D, D) their prior
    covariance, ``noise`` (D, D) the known observation covariance ``R`` (the posterior keeps it
    unchanged). Statistics: ``x`` :math:`\\sum_n r_{nk} (x_n - c)`, about the fixed ``centre`` :math:`c`
    (the prior mean unless given; see :class:`~pyro_memo.families.base.CentredFamily`), and ``xPx``
    :math:`\\sum_n r_{nk} (x_n - m_0)^T R^{-1} (x_n - m_0)`.
    """

    name = "known-gauss"
    prior_names = ("m", "S", "noise")
    spread_key = "noise"
    stat_names = ("x", "xPx")
    stat_degree = 2

    def _check_prior(self):
        super()._check_prior()
        p = self.prior
        d = self.dim
        for key in ("S", "noise"):
            if p[key].shape != (d, d):
                raise ValueError(f"{self.name} prior '{key}' must be ({d}, {d}); got {tuple(p[key].shape)}")
            if not bool(torch.allclose(p[key], p[key].T)) or not bool(torch.linalg.eigvalsh(p[key]).min() > 0):
                raise ValueError(f"{self.name} prior '{key}' must be symmetric positive definite")
        self._noise_chol = torch.linalg.cholesky(p["noise"])
        eye = torch.eye(d, dtype=p["noise"].dtype, device=p["noise"].device)
        self._noise_chol_inv = torch.linalg.solve_triangular(self._noise_chol, eye, upper=False)
        self._precision = _spd_inverse(p["noise"])
        self._prior_precision = _spd_inverse(p["S"])

    @classmethod
    def from_data(cls, x, dtype=torch.float64, device=None, **overrides):
        """Defaults: ``m`` = data mean, ``S`` = the (regularised) data covariance (the means spread
        like the data) and ``noise`` = a tenth of it (components a tenth as spread as the data;
        set it with ``noise=...`` or scale it with the prior scale); the statistics are centred at the data
        mean."""
        x = data_for_defaults(x, dtype, device, cls)
        mean, second, square = data_moments(x)
        cov = regularized_scatter(second, f"{cls.name} default prior S", square)
        prior = {"m": mean, "S": cov, "noise": 0.1 * cov}
        prior.update(overrides)
        return cls(prior, dtype=dtype, device=device, centre=mean)

    # -------------------------------------------------------------- summaries
    def _whiten(self, t):
        """:math:`L^{-1} t` for rows ``t`` (``R = L L^T``)."""
        return t @ self._noise_chol_inv.T

    def stats(self, x, resp):
        y = self._whiten(x - self.prior["m"])
        return {"x": weighted_sums(resp, x - self.centre), "xPx": resp.T @ (y * y).sum(-1)}

    def _centred_sums(self, counts, stats):
        """:math:`\\tilde s_k = \\sum_n r_{nk} (x_n - m_0)` from the statistics about the centre: ``(K, D)``."""
        return stats["x"] - counts.unsqueeze(-1) * (self.prior["m"] - self.centre)

    def posterior(self, counts, stats):
        """:math:`S_k = (S_0^{-1} + N_k P)^{-1}` and :math:`m_k = m_0 + S_k P \\tilde s_k` (module docstring)."""
        p = self.prior
        prec = self._prior_precision + counts[:, None, None] * self._precision
        cov = _spd_inverse(prec)
        rhs = self._centred_sums(counts, stats) @ self._precision
        m = p["m"] + (cov @ rhs.unsqueeze(-1)).squeeze(-1)
        return {"m": m, "S": cov, "noise": p["noise"].expand(counts.shape + p["noise"].shape).clone()}

    # ------------------------------------------------------------- ELBO terms
    def _const(self, post):
        """Per-item constant of the expected log-likelihood: ``(K,)``."""
        trace = (self._precision * post["S"]).sum((-1, -2))
        return -0.5 * self.dim * math.log(2 * math.pi) - 0.5 * _logdet(self._noise_chol) - 0.5 * trace

    def expected_log_lik(self, x, post):
        """:math:`E_q[\\log N(x_n \\mid \\mu_k, R)]` (module docstring, first item) with the quadratic
        :math:`(\\tilde x_n - \\tilde m_k)^T P (\\tilde x_n - \\tilde m_k)` expanded about the prior mean
        (:math:`\\tilde x = x - m_0`, :math:`\\tilde m_k = m_k - m_0`), whitened: its rounding is relative to
        the centred terms, not to :math:`x^T P x` (which cancels for data far from the origin); it is
        non-negative, and clamped at 0 against round-off."""
        m0 = self.prior["m"]
        y, mk = self._whiten(x - m0), self._whiten(post["m"] - m0)
        quad = ((y * y).sum(-1, keepdim=True) - 2 * y @ mk.T + (mk * mk).sum(-1)).clamp_min(0.0)
        return self._const(post) - 0.5 * quad

    def expected_log_lik_from_stats(self, counts, stats, post):
        """:meth:`expected_log_lik` summed with weights :math:`r_{nk}` (module docstring, second item):
        linear in the statistics."""
        m0 = self.prior["m"]
        d = post["m"] - m0
        pd = d @ self._precision
        s = self._centred_sums(counts, stats)
        quad = stats["xPx"] - 2 * (pd * s).sum(-1) + counts * (pd * d).sum(-1)
        return counts * self._const(post) - 0.5 * quad

    def kl_to_prior(self, post):
        p = self.prior
        P0 = self._prior_precision
        delta = post["m"] - p["m"]
        maha = ((delta @ P0) * delta).sum(-1)
        trace = (P0 * post["S"]).sum((-1, -2))
        logdet_q = _logdet(safe_cholesky(post["S"], "known-gauss posterior covariance S"))
        logdet_p = _logdet(safe_cholesky(p["S"], "known-gauss prior covariance S"))
        return 0.5 * (trace + maha - self.dim + logdet_p - logdet_q)

    def log_marginal(self, counts, stats, post=None):
        p = self.prior
        post = self.posterior(counts, stats) if post is None else post
        P0 = self._prior_precision
        prec = P0 + counts[:, None, None] * self._precision
        m = post["m"] - p["m"]  # centred at the prior mean, where the prior's mean is zero
        fit = stats["xPx"] - torch.einsum("kd,kde,ke->k", m, prec, m)
        logdet_q = _logdet(safe_cholesky(post["S"], "known-gauss posterior covariance S"))
        logdet_p = _logdet(safe_cholesky(p["S"], "known-gauss prior covariance S"))
        return (-0.5 * counts * (self.dim * math.log(2 * math.pi) + _logdet(self._noise_chol))
                + 0.5 * (logdet_q - logdet_p) - 0.5 * fit)

    def point_estimates(self, post):
        """Posterior means of the component means, the known covariance, and the means' posterior covariance."""
        return {"means": post["m"], "covariances": self.prior["noise"].expand_as(post["S"]).clone(),
                "mean_covariances": post["S"]}

    # ------------------------------------------------ explicit parameter values
    def log_density(self, x, params):
        y = self._whiten(x - params["mu"])
        return -0.5 * (y * y).sum(-1) - 0.5 * self.dim * math.log(2 * math.pi) - 0.5 * _logdet(self._noise_chol)

    def log_prior_density(self, params):
        p = self.prior
        mvn = torch.distributions.MultivariateNormal(p["m"], covariance_matrix=p["S"], validate_args=False)
        return mvn.log_prob(params["mu"])

    def sample_posterior(self, post):
        """:math:`\\mu_k \\sim N(m_k, S_k)`."""
        chol = safe_cholesky(post["S"], "known-gauss posterior covariance S")
        mvn = torch.distributions.MultivariateNormal(post["m"], scale_tril=chol, validate_args=False)
        return {"mu": mvn.sample()}

    # ------------------------------------------------------------- Pyro form
    pyro_observation = ("MultivariateNormal",)
    pyro_components = {"mu": ("MultivariateNormal", 1)}
    pyro_constraints = {"m": "real", "S": "positive_definite", "noise": "positive_definite"}

    @staticmethod
    def pyro_prior(dist, hyper, sample):
        """``mu ~ MultivariateNormal(m, S)``; the known covariance rides along as the constant ``noise``."""
        mu = sample("mu", dist.MultivariateNormal(hyper["m"], covariance_matrix=hyper["S"]))
        return {"mu": mu, "noise": hyper["noise"].reshape((-1,) + hyper["noise"].shape[-2:])[0]}

    @staticmethod
    def pyro_likelihood(dist, theta, x=None):
        return dist.MultivariateNormal(theta["mu"], covariance_matrix=theta["noise"])

    @staticmethod
    def prior_from_pyro(sites, read):
        mvn, _ = sites["mu"]
        return {"m": read.constant(mvn.loc, 1, "mu", "mean"),
                "S": read.constant(mvn.covariance_matrix, 2, "mu", "covariance")}

    @staticmethod
    def pyro_observation_constants(obs, constant):
        """The known covariance, read off the observed ``MultivariateNormal``."""
        return {"noise": constant(obs.covariance_matrix, 2, "covariance")}

    @staticmethod
    def example_data(labels, clusters, D, generator):
        """Unit-variance groups around means drawn with scale 6."""
        centers = 6.0 * torch.randn(clusters, D, generator=generator, dtype=torch.float64)
        return centers[labels] + torch.randn(len(labels), D, generator=generator, dtype=torch.float64)


class KnownDiagGaussian(KnownCovGaussian):
    """:class:`KnownCovGaussian` written with independent ``Normal`` sites: the known covariance and
    the prior covariance of the means are diagonal. Pyro form:
    ``mu ~ Normal(m, sqrt(diag S)).to_event(1)``, ``x ~ Normal(mu, sqrt(diag noise)).to_event(1)``."""

    name = "known-diag-gauss"

    def _check_prior(self):
        super()._check_prior()
        for key in ("S", "noise"):
            off = self.prior[key] - torch.diag_embed(torch.diagonal(self.prior[key]))
            if bool(off.abs().max() > 0):
                raise ValueError(f"{self.name} prior '{key}' must be diagonal (use known-gauss for a full one)")

    @classmethod
    def from_data(cls, x, dtype=torch.float64, device=None, **overrides):
        """Defaults as :meth:`KnownCovGaussian.from_data`, keeping only the diagonals."""
        full = KnownCovGaussian.from_data(x, dtype=dtype, device=device)
        prior = {"m": full.prior["m"], "S": torch.diag_embed(torch.diagonal(full.prior["S"])),
                 "noise": torch.diag_embed(torch.diagonal(full.prior["noise"]))}
        prior.update(overrides)
        return cls(prior, dtype=dtype, device=device, centre=full.centre)

    pyro_observation = ("Normal",)
    pyro_components = {"mu": ("Normal", 1)}

    @staticmethod
    def pyro_prior(dist, hyper, sample):
        scale = torch.diagonal(hyper["S"], dim1=-2, dim2=-1).sqrt()
        mu = sample("mu", dist.Normal(hyper["m"], scale).to_event(1))
        noise = hyper["noise"].reshape((-1,) + hyper["noise"].shape[-2:])[0]
        return {"mu": mu, "noise": noise}

    @staticmethod
    def pyro_likelihood(dist, theta, x=None):
        scale = torch.diagonal(theta["noise"], dim1=-2, dim2=-1).sqrt()
        return dist.Normal(theta["mu"], scale).to_event(1)

    @staticmethod
    def prior_from_pyro(sites, read):
        nor, mu = sites["mu"]
        return {"m": read.constant(nor.loc.expand_as(mu), 1, "mu", "mean"),
                "S": torch.diag_embed(read.constant(nor.scale.expand_as(mu), 1, "mu", "scale") ** 2)}

    @staticmethod
    def pyro_observation_constants(obs, constant):
        """The known standard deviations, read off the observed ``Normal``."""
        scale = obs.scale.expand(obs.batch_shape)
        return {"noise": torch.diag_embed(constant(scale, 1, "scale") ** 2)}
