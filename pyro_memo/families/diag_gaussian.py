"""Gaussian likelihood with diagonal covariance, independent Normal-Gamma prior per dimension."""

import math

import torch

from ._special import kl_gamma
from .base import CentredFamily, data_for_defaults, data_moments, spread_scale, weighted_sums


class DiagGaussian(CentredFamily):
    """Per dimension ``d``: :math:`\\lambda_d \\sim Gamma(a_0, b_0)` (rate ``b``),
    :math:`\\mu_d \\mid \\lambda_d \\sim N(m_0, (\\kappa_0\\lambda_d)^{-1})`,
    :math:`x_d \\sim N(\\mu_d, \\lambda_d^{-1})`.

    Prior keys, all (D,): ``m``, ``kappa``, ``a``, ``b``.
    Statistics, about the fixed ``centre`` :math:`c` (the prior mean unless given; see
    :class:`~pyro_memo.families.base.CentredFamily`): ``x`` :math:`\\sum_n r_{nk} (x_n - c)` and ``xx``
    :math:`\\sum_n r_{nk} (x_n - c)^2`.
    """

    name = "diag-gauss"
    prior_names = ("m", "kappa", "a", "b")
    spread_key = "b"
    stat_names = ("x", "xx")
    stat_degree = 2

    def __init__(self, prior, dtype=torch.float64, device=None, centre=None):
        prior = dict(prior)
        d = torch.as_tensor(prior["m"]).shape[-1] if "m" in prior else 1
        for key in ("kappa", "a", "b"):
            if key in prior:
                prior[key] = torch.as_tensor(prior[key], dtype=dtype).expand(d).clone()
        super().__init__(prior, dtype=dtype, device=device, centre=centre)

    def _check_prior(self):
        super()._check_prior()
        p = self.prior
        for key in ("kappa", "a", "b"):
            if not bool((p[key] > 0).all()):
                raise ValueError(f"diag-gauss prior '{key}' must be positive")

    @classmethod
    def from_data(cls, x, dtype=torch.float64, device=None, **overrides):
        """Defaults: ``m`` = data mean, ``kappa`` = 1, ``a`` = 1 and ``b`` = the data
        variance per dimension plus ``1e-4`` of the mean variance, so that
        :math:`E[\\lambda_d^{-1}]`-scale matches the data; the statistics are centred at the data mean.
        A mean variance that is round-off (identical points; ``spread_scale()``)
        is replaced by the data's mean square (1 for all-zero data) in the ``1e-4`` term."""
        x = data_for_defaults(x, dtype, device, cls)
        mean, var, square = data_moments(x, full=False)
        scale = spread_scale(var.mean(), square)
        prior = {
            "m": mean,
            "kappa": torch.tensor(1.0),
            "a": torch.tensor(1.0),
            "b": var + 1e-4 * scale,
        }
        prior.update(overrides)
        return cls(prior, dtype=dtype, device=device, centre=mean)

    def stats(self, x, resp):
        y = x - self.centre
        return {"x": weighted_sums(resp, y), "xx": weighted_sums(resp, y * y)}

    def posterior(self, counts, stats):
        """The Normal-Gamma update per dimension (Murphy 2007, "Conjugate Bayesian analysis of the
        Gaussian distribution", eqs. 86-89): :math:`\\kappa = \\kappa_0 + N`,
        :math:`m = (\\kappa_0 m_0 + \\sum r x) / \\kappa`, :math:`a = a_0 + N/2` and
        :math:`b = b_0 + \\tfrac12 (S - s^2 / \\kappa)` with :math:`s = \\sum r (x - m_0)`,
        :math:`S = \\sum r (x - m_0)^2` (eq. 89 with the statistics centred at :math:`m_0`), both
        read off the statistics about the centre :math:`c` with :math:`\\delta_0 = m_0 - c`:
        :math:`s = s_c - N\\delta_0`, :math:`S = S_c - 2\\delta_0 s_c + N\\delta_0^2` (no cancellation when
        :math:`c = m_0`). :math:`S - s^2/\\kappa \\ge 0` by Cauchy-Schwarz and divides by no :math:`N_k`,
        so near-empty components whose memoized counts drift to ~0 stay well defined; it is clamped at
        0 against round-off."""
        p = self.prior
        n = counts.unsqueeze(-1)
        kappa = p["kappa"] + n
        d0 = p["m"] - self.centre
        m = self.centre + (p["kappa"] * d0 + stats["x"]) / kappa
        s = stats["x"] - n * d0
        centred = stats["xx"] - 2 * d0 * stats["x"] + n * d0 * d0
        b = p["b"] + 0.5 * (centred - s * s / kappa).clamp_min(0.0)
        return {"m": m, "kappa": kappa, "a": p["a"] + 0.5 * n, "b": b}

    def expected_log_lik(self, x, post):
        """:math:`E_q[\\log N(x_n \\mid \\mu_k, \\lambda_k^{-1})] = \\sum_d \\tfrac12 (E[\\log\\lambda_{kd}]
        - \\log 2\\pi - 1/\\kappa_{kd} - E[\\lambda_{kd}] (x_{nd} - m_{kd})^2)`, :math:`E[\\lambda] = a/b`,
        :math:`E[\\log\\lambda] = \\psi(a) - \\log b` (Bishop 2006, eq. 10.64 per dimension). The quadratic is
        three matrix products of the data and the means about the centre, so its rounding is relative to
        :math:`(x - c)^2`, not :math:`x^2`; it is non-negative, and clamped at 0 against round-off."""
        e_log_lam = torch.digamma(post["a"]) - torch.log(post["b"])  # (K, D)
        e_lam = post["a"] / post["b"]
        y, d = x - self.centre, post["m"] - self.centre
        # sum_d e_lam (y - d)^2 expanded as three matrix products, (N, K)
        quad = ((y * y) @ e_lam.T - 2 * y @ (e_lam * d).T + (e_lam * d * d).sum(-1)).clamp_min(0.0)
        const = 0.5 * (e_log_lam - 1.0 / post["kappa"]).sum(-1) - 0.5 * self.dim * math.log(2 * math.pi)
        return const - 0.5 * quad

    def expected_log_lik_from_stats(self, counts, stats, post):
        """:meth:`expected_log_lik` summed with weights :math:`r_{nk}`: the quadratic
        :math:`\\sum_n r_{nk} (x_n - m_k)^2 = S_c - 2 d s_c + N d^2` with :math:`d = m_k - c` and the
        statistics :math:`s_c, S_c` about the centre (Hughes & Sudderth 2013, eq. 8's data term). Linear in
        the statistics and not clamped: differences of summaries (``elbo_gain``, over-relaxed steps) and
        the tied-item coefficients (:func:`~pyro_memo.memo.clumps.log_lik_coefficients`) rely on that."""
        e_log_lam = torch.digamma(post["a"]) - torch.log(post["b"])
        e_lam = post["a"] / post["b"]
        d = post["m"] - self.centre
        n = counts.unsqueeze(-1)
        quad = (e_lam * (stats["xx"] - 2 * d * stats["x"] + n * d * d)).sum(-1)
        per_item = 0.5 * (e_log_lam - 1.0 / post["kappa"]).sum(-1) - 0.5 * self.dim * math.log(2 * math.pi)
        return counts * per_item - 0.5 * quad

    def kl_to_prior(self, post):
        p = self.prior
        kl_lam = kl_gamma(post["a"], post["b"], p["a"], p["b"])
        ratio = p["kappa"] / post["kappa"]
        e_lam = post["a"] / post["b"]
        kl_mu = 0.5 * (ratio - 1.0 - torch.log(ratio) + p["kappa"] * e_lam * (post["m"] - p["m"]) ** 2)
        return (kl_lam + kl_mu).sum(-1)

    def log_marginal(self, counts, stats, post=None):
        p = self.prior
        post = self.posterior(counts, stats) if post is None else post
        per_dim = (
            torch.lgamma(post["a"])
            - torch.lgamma(p["a"])
            + p["a"] * torch.log(p["b"])
            - post["a"] * torch.log(post["b"])
            + 0.5 * (torch.log(p["kappa"]) - torch.log(post["kappa"]))
        )
        return per_dim.sum(-1) - 0.5 * counts * self.dim * math.log(2 * math.pi)

    def log_density(self, x, params):
        lam = params["lambda"]
        return (0.5 * torch.log(lam) - 0.5 * math.log(2 * math.pi) - 0.5 * lam * (x - params["mu"]) ** 2).sum(-1)

    def sample_posterior(self, post):
        """Per dimension :math:`\\lambda \\sim \\mathrm{Gamma}(a, b)` and
        :math:`\\mu \\sim N(m, (\\kappa\\lambda)^{-1})`."""
        lam = torch.distributions.Gamma(post["a"], post["b"], validate_args=False).sample()
        lam = lam.expand_as(post["m"]).clamp_min(torch.finfo(lam.dtype).tiny)
        mu = post["m"] + torch.randn_like(post["m"]) / torch.sqrt(post["kappa"] * lam)
        return {"mu": mu, "lambda": lam}

    def log_prior_density(self, params):
        p = self.prior
        lam = params["lambda"]
        log_gamma = torch.distributions.Gamma(p["a"], p["b"]).log_prob(lam)
        log_normal = torch.distributions.Normal(p["m"], (p["kappa"] * lam).rsqrt()).log_prob(params["mu"])
        return (log_gamma + log_normal).sum(-1)

    def point_estimates(self, post):
        """Posterior means and diagonal covariances :math:`E[\\lambda_d]^{-1} = b / a`."""
        return {"means": post["m"], "covariances": torch.diag_embed(post["b"] / post["a"])}

    # ------------------------------------------------------------- Pyro form
    pyro_observation = ("Normal",)
    pyro_components = {"lambda": ("Gamma", 1), "mu": ("Normal", 1)}
    pyro_constraints = {"m": "real"}

    @staticmethod
    def pyro_prior(dist, hyper, sample):
        """``lambda ~ Gamma(a, b)``, ``mu ~ Normal(m, (kappa lambda)^-1/2)`` per dimension."""
        lam = sample("lambda", dist.Gamma(hyper["a"], hyper["b"]).to_event(1))
        scale = (hyper["kappa"] * lam).rsqrt()
        return {"lambda": lam, "mu": sample("mu", dist.Normal(hyper["m"], scale).to_event(1))}

    @staticmethod
    def pyro_likelihood(dist, theta, x=None):
        return dist.Normal(theta["mu"], theta["lambda"].rsqrt()).to_event(1)

    @staticmethod
    def prior_from_pyro(sites, read):
        (gam, lam), (nor, _) = sites["lambda"], sites["mu"]
        return {"m": read.constant(nor.loc.expand_as(lam), 1, "mu", "mean"),
                "kappa": 1.0 / (read.first(nor.scale.expand_as(lam), 1) ** 2 * read.first(lam, 1)),
                "a": read.constant(gam.concentration.expand_as(lam), 1, "lambda", "shape"),
                "b": read.constant(gam.rate.expand_as(lam), 1, "lambda", "rate")}

    @staticmethod
    def example_data(labels, clusters, D, generator):
        """Unit-variance groups around means drawn with scale 6."""
        centers = 6.0 * torch.randn(clusters, D, generator=generator, dtype=torch.float64)
        return centers[labels] + torch.randn(len(labels), D, generator=generator, dtype=torch.float64)
