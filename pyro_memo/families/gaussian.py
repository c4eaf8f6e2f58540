"""Gaussian likelihood with unknown mean and full covariance, Normal-Wishart prior."""

import math

import torch

from ._wishart import (
    check_wishart_prior,
    kl_wishart,
    log_normalizer_ratio,
    mvn_log_density_precision,
    regularized_scatter,
    sample_wishart,
    student_t_log_predictive,
    whitened_sq_norms,
    wishart_terms,
)
from .base import ConjugateFamily, data_for_defaults, outer_product_stats, weighted_sums


class Gaussian(ConjugateFamily):
    """:math:`x \\sim N(\\mu, \\Lambda^{-1})`, :math:`\\Lambda \\sim W(\\nu_0, B_0^{-1})`,
    :math:`\\mu \\mid \\Lambda \\sim N(m_0, (\\kappa_0\\Lambda)^{-1})`.

    Prior keys: ``m`` (D,), ``kappa`` (), ``nu`` (), ``B`` (D, D) — the Wishart's
    inverse scale, so :math:`E[\\Lambda^{-1}] = B / (\\nu - D - 1)`.
    Statistics: ``x`` :math:`\\sum_n r_{nk} x_n` and ``xx`` :math:`\\sum_n r_{nk} x_n x_n^T`.
    """

    name = "gauss"
    prior_names = ("m", "kappa", "nu", "B")
    spread_key = "B"
    stat_names = ("x", "xx")
    stat_degree = 2

    @property
    def dim(self):
        return self.prior["m"].shape[-1]

    def _check_prior(self):
        p = self.prior
        if p["m"].dim() != 1:
            raise ValueError(f"gauss prior 'm' must be a (D,) vector; got {tuple(p['m'].shape)}")
        if p["kappa"].dim() != 0 or not bool(p["kappa"] > 0):
            raise ValueError("gauss prior 'kappa' must be a positive scalar")
        if p["B"].shape != (self.dim, self.dim):
            raise ValueError(f"gauss prior 'B' must be ({self.dim}, {self.dim}); got {tuple(p['B'].shape)}")
        check_wishart_prior(p["nu"], p["B"], "gauss")

    @classmethod
    def from_data(cls, x, dtype=torch.float64, device=None, **overrides):
        """Defaults: ``m`` = data mean, ``kappa`` = 1, ``nu`` = D + 2 and ``B`` = the
        (regularised) empirical covariance, so the prior mean covariance
        :math:`B/(\\nu - D - 1)` equals the data's covariance."""
        x = data_for_defaults(x, dtype, device, cls)
        d = x.shape[1]
        mean = x.mean(0)
        centered = x - mean
        cov = centered.T @ centered / x.shape[0]
        prior = {
            "m": mean,
            "kappa": torch.tensor(1.0),
            "nu": torch.tensor(d + 2.0),
            "B": regularized_scatter(cov, "gauss default prior B", (x * x).mean()),
        }
        prior.update(overrides)
        return cls(prior, dtype=dtype, device=device)

    def stats(self, x, resp):
        return {"x": weighted_sums(resp, x), "xx": outer_product_stats(x, resp)}

    def posterior(self, counts, stats):
        p = self.prior
        kappa = p["kappa"] + counts
        m = (p["kappa"] * p["m"] + stats["x"]) / kappa.unsqueeze(-1)
        # B = B0 + xx + kappa0 m0 m0^T - kappa m m^T = B0 + S - s s^T / kappa, with S and s the
        # statistics centred at m0 (S = sum r (x - m0)(x - m0)^T, s = sum r (x - m0)). The
        # second form is PSD by Cauchy-Schwarz (kappa > N_k) and divides only by kappa >= kappa0,
        # so near-empty components whose memoized counts drift to ~0 stay well defined.
        m0 = p["m"]
        s = stats["x"] - counts[:, None] * m0
        xm = stats["x"].unsqueeze(-1) * m0
        centred = stats["xx"] - xm - xm.transpose(-1, -2) + counts[:, None, None] * torch.outer(m0, m0)
        B = p["B"] + centred - s.unsqueeze(-1) * s.unsqueeze(-2) / kappa[:, None, None]
        B = 0.5 * (B + B.transpose(-1, -2))
        return {"m": m, "kappa": kappa, "nu": p["nu"] + counts, "B": B}

    def expected_log_lik(self, x, post):
        return self.log_lik_function(post)(x)

    def log_lik_function(self, post, dtype=None):
        """``x ->`` :math:`E_q[\\log N(x_n \\mid \\mu_k, \\Lambda_k^{-1})] = \\frac12 E[\\log|\\Lambda_k|] -
        \\frac D2 \\log 2\\pi - \\frac{D}{2\\kappa_k} - \\frac{\\nu_k}2 (x_n - m_k)^T B_k^{-1} (x_n - m_k)`, the
        Cholesky factors of the :math:`B_k` computed once (in ``post``'s precision; ``dtype``: that of the
        products with the data, see :meth:`~pyro_memo.families.ConjugateFamily.log_lik_function`)."""
        d = self.dim
        chol, _, _, e_logdet = wishart_terms(post["nu"], post["B"])
        dtype = chol.dtype if dtype is None else dtype
        sq_norms = whitened_sq_norms(chol, post["m"], dtype)
        const = (0.5 * e_logdet - 0.5 * d * math.log(2 * math.pi) - 0.5 * d / post["kappa"]).to(dtype)
        nu = post["nu"].to(dtype)

        def log_lik(x):
            sq = sq_norms(x.to(dtype))
            if sq.requires_grad:  # differentiated (type-II updates): no in-place arithmetic
                return const - 0.5 * nu * sq
            return sq.mul_(-0.5 * nu).add_(const)  # in place: one (N, K) tensor, not three

        return log_lik

    def expected_log_lik_from_stats(self, counts, stats, post):
        d = self.dim
        _, _, B_inv, e_logdet = wishart_terms(post["nu"], post["B"])
        m = post["m"]
        xm = stats["x"].unsqueeze(-1) * m.unsqueeze(-2)
        scatter = stats["xx"] - xm - xm.transpose(-1, -2) + counts[:, None, None] * m.unsqueeze(-1) * m.unsqueeze(-2)
        quad = (B_inv * scatter).sum((-1, -2))
        per_item = 0.5 * e_logdet - 0.5 * d * math.log(2 * math.pi) - 0.5 * d / post["kappa"]
        return counts * per_item - 0.5 * post["nu"] * quad

    def kl_to_prior(self, post):
        p = self.prior
        d = self.dim
        kl_lam = kl_wishart(post["nu"], post["B"], p["nu"], p["B"])
        _, _, B_inv, _ = wishart_terms(post["nu"], post["B"])
        delta = post["m"] - p["m"]
        maha = post["nu"] * torch.einsum("kd,kde,ke->k", delta, B_inv, delta)
        ratio = p["kappa"] / post["kappa"]
        kl_mu = 0.5 * (d * ratio - d - d * torch.log(ratio) + p["kappa"] * maha)
        return kl_lam + kl_mu

    def log_marginal(self, counts, stats, post=None):
        p = self.prior
        post = self.posterior(counts, stats) if post is None else post
        d = self.dim
        return (
            -0.5 * counts * d * math.log(math.pi)
            + log_normalizer_ratio(post["nu"], post["B"], p["nu"], p["B"])
            + 0.5 * d * (torch.log(p["kappa"]) - torch.log(post["kappa"]))
        )

    def log_predictive(self, x, counts, stats):
        """The Normal-Wishart predictive in closed form (Blei & Jordan 2006, §4): a multivariate
        Student-t, :func:`~pyro_memo.families._wishart.student_t_log_predictive` with
        :math:`c_k = \\kappa_k/(\\kappa_k+1)` centred at :math:`m_k` (equal to the default's
        marginal-likelihood ratio, without its rank-one-updated Cholesky): ``(n, K)``."""
        post = self.posterior(counts, stats)
        scale = post["kappa"] / (post["kappa"] + 1)
        return student_t_log_predictive(x, post["nu"], post["B"], scale, post["m"])

    def log_density(self, x, params):
        return mvn_log_density_precision(x, params["mu"], params["Lambda"])

    def sample_posterior(self, post):
        """:math:`\\Lambda_k \\sim W(\\nu_k, B_k^{-1})`, :math:`\\mu_k \\sim N(m_k, (\\kappa_k\\Lambda_k)^{-1})`."""
        lam = sample_wishart(post["nu"], post["B"])
        mu = torch.distributions.MultivariateNormal(
            post["m"], precision_matrix=post["kappa"][:, None, None] * lam, validate_args=False).sample()
        return {"mu": mu, "Lambda": lam}

    def log_prior_density(self, params):
        p = self.prior
        lam = params["Lambda"]
        wishart = torch.distributions.Wishart(df=p["nu"], precision_matrix=p["B"], validate_args=False)
        return wishart.log_prob(lam) + mvn_log_density_precision(params["mu"], p["m"], p["kappa"] * lam)

    def point_estimates(self, post):
        """Posterior means of the mean and :math:`E[\\Lambda]^{-1} = B / \\nu`."""
        return {"means": post["m"], "covariances": post["B"] / post["nu"][:, None, None]}

    # ------------------------------------------------------------- Pyro form
    pyro_observation = ("MultivariateNormal",)
    pyro_components = {"Lambda": ("Wishart", 2), "mu": ("MultivariateNormal", 1)}
    pyro_constraints = {"m": "real", "B": "positive_definite"}

    @staticmethod
    def pyro_prior(dist, hyper, sample):
        """``Lambda ~ Wishart(nu, B^-1)``, ``mu ~ MultivariateNormal(m, (kappa Lambda)^-1)``."""
        lam = sample("Lambda", dist.Wishart(df=hyper["nu"], precision_matrix=hyper["B"]))
        prec = hyper["kappa"][..., None, None] * lam
        return {"Lambda": lam, "mu": sample("mu", dist.MultivariateNormal(hyper["m"], precision_matrix=prec))}

    @staticmethod
    def pyro_likelihood(dist, theta, x=None):
        return dist.MultivariateNormal(theta["mu"], precision_matrix=theta["Lambda"])

    @staticmethod
    def prior_from_pyro(sites, read):
        (wish, lam), (mvn, _) = sites["Lambda"], sites["mu"]
        ratio = read.first(mvn.precision_matrix, 2) / read.first(lam, 2)
        return {"m": read.constant(mvn.loc, 1, "mu", "mean"), "kappa": ratio[0, 0],
                "nu": read.constant(wish.df, 0, "Lambda", "df"),
                "B": read.constant(wish.precision_matrix, 2, "Lambda", "scale")}

    @staticmethod
    def example_data(labels, clusters, D, generator):
        """Unit-variance groups around means drawn with scale 6."""
        centers = 6.0 * torch.randn(clusters, D, generator=generator, dtype=torch.float64)
        return centers[labels] + torch.randn(len(labels), D, generator=generator, dtype=torch.float64)
