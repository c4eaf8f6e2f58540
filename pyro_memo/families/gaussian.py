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
from .base import CentredFamily, data_for_defaults, data_moments, outer_product_stats, weighted_sums


class Gaussian(CentredFamily):
    """:math:`x \\sim N(\\mu, \\Lambda^{-1})`, :math:`\\Lambda \\sim W(\\nu_0, B_0^{-1})`,
    :math:`\\mu \\mid \\Lambda \\sim N(m_0, (\\kappa_0\\Lambda)^{-1})`.

    Prior keys: ``m`` (D,), ``kappa`` (), ``nu`` (), ``B`` (D, D) — the Wishart's
    inverse scale, so :math:`E[\\Lambda^{-1}] = B / (\\nu - D - 1)`.
    Statistics, about the fixed ``centre`` :math:`c` (the prior mean unless given; see
    :class:`~pyro_memo.families.base.CentredFamily`): ``x`` :math:`\\sum_n r_{nk} (x_n - c)` and ``xx``
    :math:`\\sum_n r_{nk} (x_n - c)(x_n - c)^T`.
    """

    name = "gauss"
    prior_names = ("m", "kappa", "nu", "B")
    spread_key = "B"
    stat_names = ("x", "xx")
    stat_degree = 2

    def _check_prior(self):
        super()._check_prior()
        p = self.prior
        if p["kappa"].dim() != 0 or not bool(p["kappa"] > 0):
            raise ValueError("gauss prior 'kappa' must be a positive scalar")
        if p["B"].shape != (self.dim, self.dim):
            raise ValueError(f"gauss prior 'B' must be ({self.dim}, {self.dim}); got {tuple(p['B'].shape)}")
        check_wishart_prior(p["nu"], p["B"], "gauss")

    @classmethod
    def from_data(cls, x, dtype=torch.float64, device=None, **overrides):
        """Defaults: ``m`` = data mean, ``kappa`` = 1, ``nu`` = D + 2 and ``B`` = the
        (regularised) empirical covariance, so the prior mean covariance
        :math:`B/(\\nu - D - 1)` equals the data's covariance; the statistics are centred at the data mean."""
        x = data_for_defaults(x, dtype, device, cls)
        d = x.shape[1]
        mean, cov, square = data_moments(x)
        prior = {
            "m": mean,
            "kappa": torch.tensor(1.0),
            "nu": torch.tensor(d + 2.0),
            "B": regularized_scatter(cov, "gauss default prior B", square),
        }
        prior.update(overrides)
        return cls(prior, dtype=dtype, device=device, centre=mean)

    def stats(self, x, resp):
        y = x - self.centre
        return {"x": weighted_sums(resp, y), "xx": outer_product_stats(y, resp)}

    def posterior(self, counts, stats):
        """The Normal-Wishart update (Murphy 2007, "Conjugate Bayesian analysis of the Gaussian
        distribution", eqs. 250-254): :math:`\\kappa = \\kappa_0 + N`, :math:`\\nu = \\nu_0 + N`,
        :math:`m = (\\kappa_0 m_0 + \\sum r x) / \\kappa` and :math:`B = B_0 + \\sum r x x^T + \\kappa_0 m_0 m_0^T
        - \\kappa m m^T = B_0 + S - s s^T / \\kappa` with :math:`s = \\sum r (x - m_0)`,
        :math:`S = \\sum r (x - m_0)(x - m_0)^T`, read off the statistics about the centre :math:`c` with
        :math:`\\delta_0 = m_0 - c`: :math:`s = s_c - N\\delta_0`, :math:`S = S_c - s_c\\delta_0^T - \\delta_0 s_c^T +
        N\\delta_0\\delta_0^T` (no cancellation when :math:`c = m_0`). The second form is PSD by Cauchy-Schwarz
        (:math:`\\kappa > N_k`) and divides only by :math:`\\kappa \\ge \\kappa_0`, so near-empty components whose
        memoized counts drift to ~0 stay well defined."""
        p = self.prior
        kappa = p["kappa"] + counts
        d0 = p["m"] - self.centre
        m = self.centre + (p["kappa"] * d0 + stats["x"]) / kappa.unsqueeze(-1)
        s = stats["x"] - counts[:, None] * d0
        xm = stats["x"].unsqueeze(-1) * d0
        centred = stats["xx"] - xm - xm.transpose(-1, -2) + counts[:, None, None] * torch.outer(d0, d0)
        B = p["B"] + centred - s.unsqueeze(-1) * s.unsqueeze(-2) / kappa[:, None, None]
        B = 0.5 * (B + B.transpose(-1, -2))
        return {"m": m, "kappa": kappa, "nu": p["nu"] + counts, "B": B}

    def expected_log_lik(self, x, post):
        return self.log_lik_function(post)(x)

    def log_lik_function(self, post, dtype=None):
        """``x ->`` :math:`E_q[\\log N(x_n \\mid \\mu_k, \\Lambda_k^{-1})] = \\frac12 E[\\log|\\Lambda_k|] -
        \\frac D2 \\log 2\\pi - \\frac{D}{2\\kappa_k} - \\frac{\\nu_k}2 (x_n - m_k)^T B_k^{-1} (x_n - m_k)`, the
        Cholesky factors of the :math:`B_k` computed once (in ``post``'s precision; ``dtype``: that of the
        products with the data, see :meth:`~pyro_memo.ConjugateFamily.log_lik_function`). The data
        and means are whitened about the centre, so the differences keep their digits for data far from
        the origin."""
        d = self.dim
        chol, _, _, e_logdet = wishart_terms(post["nu"], post["B"])
        dtype = chol.dtype if dtype is None else dtype
        sq_norms = whitened_sq_norms(chol, post["m"] - self.centre, dtype)
        const = (0.5 * e_logdet - 0.5 * d * math.log(2 * math.pi) - 0.5 * d / post["kappa"]).to(dtype)
        nu = post["nu"].to(dtype)
        centre = self.centre.to(dtype)

        def log_lik(x):
            sq = sq_norms(x.to(dtype) - centre)
            if sq.requires_grad:  # differentiated (type-II updates): no in-place arithmetic
                return const - 0.5 * nu * sq
            return sq.mul_(-0.5 * nu).add_(const)  # in place: one (N, K) tensor, not three

        return log_lik

    def expected_log_lik_from_stats(self, counts, stats, post):
        """:meth:`expected_log_lik` summed with weights :math:`r_{nk}` (Hughes & Sudderth 2013, eq. 8's data
        term): the quadratic is :math:`\\nu_k \\mathrm{tr}(B_k^{-1} \\sum_n r_{nk} (x_n - m_k)(x_n - m_k)^T)` with the
        scatter :math:`S_c - s_c d^T - d s_c^T + N d d^T`, :math:`d = m_k - c`, from the statistics about the
        centre; linear in the statistics (differences of summaries rely on it)."""
        d = self.dim
        _, _, B_inv, e_logdet = wishart_terms(post["nu"], post["B"])
        m = post["m"] - self.centre
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
        Student-t, ``student_t_log_predictive()`` with
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
