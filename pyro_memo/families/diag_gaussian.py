"""Gaussian likelihood with diagonal covariance, independent Normal-Gamma prior per dimension."""

import math

import torch

from ._special import kl_gamma
from .base import ConjugateFamily, data_for_defaults, weighted_sums


class DiagGaussian(ConjugateFamily):
    """Per dimension ``d``: :math:`\\lambda_d \\sim Gamma(a_0, b_0)` (rate ``b``),
    :math:`\\mu_d \\mid \\lambda_d \\sim N(m_0, (\\kappa_0\\lambda_d)^{-1})`,
    :math:`x_d \\sim N(\\mu_d, \\lambda_d^{-1})`.

    Prior keys, all (D,): ``m``, ``kappa``, ``a``, ``b``.
    Statistics: ``x`` :math:`\\sum_n r_{nk} x_n` and ``xx`` :math:`\\sum_n r_{nk} x_n^2`.
    """

    name = "diag-gauss"
    prior_names = ("m", "kappa", "a", "b")
    spread_key = "b"
    stat_names = ("x", "xx")
    stat_degree = 2

    def __init__(self, prior, dtype=torch.float64, device=None):
        prior = dict(prior)
        d = torch.as_tensor(prior["m"]).shape[-1] if "m" in prior else 1
        for key in ("kappa", "a", "b"):
            if key in prior:
                prior[key] = torch.as_tensor(prior[key], dtype=dtype).expand(d).clone()
        super().__init__(prior, dtype=dtype, device=device)

    @property
    def dim(self):
        return self.prior["m"].shape[-1]

    def _check_prior(self):
        p = self.prior
        if p["m"].dim() != 1:
            raise ValueError(f"diag-gauss prior 'm' must be a (D,) vector; got {tuple(p['m'].shape)}")
        for key in ("kappa", "a", "b"):
            if not bool((p[key] > 0).all()):
                raise ValueError(f"diag-gauss prior '{key}' must be positive")

    @classmethod
    def from_data(cls, x, dtype=torch.float64, device=None, **overrides):
        """Defaults: ``m`` = data mean, ``kappa`` = 1, ``a`` = 1 and ``b`` = the data
        variance per dimension (floored at ``1e-4`` of the mean variance), so that
        :math:`E[\\lambda_d^{-1}]`-scale matches the data."""
        x = data_for_defaults(x, dtype, device, cls)
        var = x.var(0, unbiased=False)
        scale = var.mean()
        if not bool(scale > 0):
            scale = torch.ones((), dtype=x.dtype, device=x.device)
        prior = {
            "m": x.mean(0),
            "kappa": torch.tensor(1.0),
            "a": torch.tensor(1.0),
            "b": var + 1e-4 * scale,
        }
        prior.update(overrides)
        return cls(prior, dtype=dtype, device=device)

    def stats(self, x, resp):
        return {"x": weighted_sums(resp, x), "xx": weighted_sums(resp, x * x)}

    def posterior(self, counts, stats):
        p = self.prior
        n = counts.unsqueeze(-1)
        kappa = p["kappa"] + n
        m = (p["kappa"] * p["m"] + stats["x"]) / kappa
        # b = b0 + (sum r x^2 + kappa0 m0^2 - kappa m^2) / 2 = b0 + (S - s^2 / kappa) / 2 with S, s
        # centred at m0: non-negative by Cauchy-Schwarz and free of any division by N_k, so
        # near-empty components whose memoized counts drift to ~0 stay well defined.
        m0 = p["m"]
        s = stats["x"] - n * m0
        centred = stats["xx"] - 2 * m0 * stats["x"] + n * m0 * m0
        b = p["b"] + 0.5 * (centred - s * s / kappa).clamp_min(0.0)
        return {"m": m, "kappa": kappa, "a": p["a"] + 0.5 * n, "b": b}

    def expected_log_lik(self, x, post):
        e_log_lam = torch.digamma(post["a"]) - torch.log(post["b"])  # (K, D)
        e_lam = post["a"] / post["b"]
        # sum_d e_lam (x - m)^2 expanded as three matrix products, (N, K)
        quad = (x * x) @ e_lam.T - 2 * x @ (e_lam * post["m"]).T + (e_lam * post["m"] ** 2).sum(-1)
        const = 0.5 * (e_log_lam - 1.0 / post["kappa"]).sum(-1) - 0.5 * self.dim * math.log(2 * math.pi)
        return const - 0.5 * quad

    def expected_log_lik_from_stats(self, counts, stats, post):
        e_log_lam = torch.digamma(post["a"]) - torch.log(post["b"])
        e_lam = post["a"] / post["b"]
        m = post["m"]
        n = counts.unsqueeze(-1)
        quad = (e_lam * (stats["xx"] - 2 * m * stats["x"] + n * m * m)).sum(-1)
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
