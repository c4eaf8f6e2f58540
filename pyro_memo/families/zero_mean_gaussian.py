"""Zero-mean Gaussian likelihood with full covariance, Wishart prior."""

import math

import torch

from ._products import PRODUCT_CACHE
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
from .base import (
    ConjugateFamily,
    data_for_defaults,
    data_moments,
    outer_product_stats,
    packed_outer,
    packed_quadratic_weights,
    unpack_symmetric,
    weighted_sums,
)


class ZeroMeanGaussian(ConjugateFamily):
    """:math:`x \\sim N(0, \\Lambda^{-1})`, :math:`\\Lambda \\sim W(\\nu_0, B_0^{-1})`.

    Prior keys: ``nu`` (), ``B`` (D, D). Statistic: ``xx`` :math:`\\sum_n r_{nk} x_n x_n^T`.
    This is the family of the paper's image-patch experiments (Hughes & Sudderth 2013, §4).
    """

    name = "zm-gauss"
    prior_names = ("nu", "B")
    spread_key = "B"
    stat_names = ("xx",)
    stat_degree = 2

    @property
    def dim(self):
        return self.prior["B"].shape[-1]

    def _check_prior(self):
        check_wishart_prior(self.prior["nu"], self.prior["B"], "zm-gauss")

    @classmethod
    def from_data(cls, x, dtype=torch.float64, device=None, **overrides):
        """Defaults: ``nu`` = D + 2 and ``B`` = the (regularised) second-moment matrix
        :math:`\\frac1N\\sum_n x_n x_n^T`, so the prior mean covariance matches the data."""
        x = data_for_defaults(x, dtype, device, cls)
        d = x.shape[1]
        _, second, square = data_moments(x, centred=False)
        prior = {
            "nu": torch.tensor(d + 2.0),
            "B": regularized_scatter(second, "zm-gauss default prior B", square),
        }
        prior.update(overrides)
        return cls(prior, dtype=dtype, device=device)

    def stats(self, x, resp):
        return {"xx": outer_product_stats(x, resp)}

    def chunk_stats(self, x, resp, products=None):
        """The packed :math:`\\sum_n r_{nk}\\, x_{ni} x_{nj}`, ``i <= j``, of one chunk: ``(K, D(D+1)/2)``.
        Summed over a local step's chunks and unpacked once (:meth:`finish_stats`), instead of once per
        chunk: at K = 200, D = 64 a 50,000-item batch has 60 chunks, whose unpacking and summing took
        0.2 s of its 2.4 s local step (one thread)."""
        products = packed_outer(x) if products is None else products
        return {"xx": weighted_sums(resp, products)}

    def finish_stats(self, total):
        """:meth:`stats` from the summed :meth:`chunk_stats`: the packed second moments unpacked."""
        return {"xx": unpack_symmetric(total["xx"], self.dim)}

    def local_step_numbers(self, K):
        """The packed products, :math:`D(D+1)/2` per item, and the ``(N, K)`` log-weights and
        responsibilities: no ``(K, D)`` temporary per item is formed. At K = 200, D = 64 the chunks
        then hold 845 rows instead of 256 and a dense local step takes 0.51 s instead of 0.71 s for
        10,000 items (one thread; fewer per-chunk unpackings and summary sums)."""
        return self.dim * (self.dim + 1) // 2 + 2 * K

    def item_products(self, x, keep=False):
        """``packed_outer()`` ``(x)``, which the statistics and the float64
        expected log-likelihood of a chunk share, read from (and with ``keep`` kept in)
        :data:`~pyro_memo.families.PRODUCT_CACHE`, where the statistics of a move's visit find them."""
        return PRODUCT_CACHE.get(x, packed_outer, keep)

    def posterior(self, counts, stats):
        B = self.prior["B"] + stats["xx"]
        return {"nu": self.prior["nu"] + counts, "B": 0.5 * (B + B.transpose(-1, -2))}

    def expected_log_lik(self, x, post):
        return self.log_lik_function(post)(x)

    def log_lik_function(self, post, dtype=None):
        """``x ->`` :math:`E_q[\\log N(x_n \\mid 0, \\Lambda_k^{-1})] = \\frac12 E[\\log|\\Lambda_k|] -
        \\frac D2\\log 2\\pi - \\frac12 x_n^T E[\\Lambda_k] x_n` with :math:`E[\\Lambda_k] = \\nu_k B_k^{-1}`.

        In float64 the quadratic forms of all ``K`` components are one matrix product with the packed
        outer products of ``x`` (``packed_quadratic_weights()``, half the
        multiply-adds); its rounding is relative to :math:`\\sum_{ij}|x_i E[\\Lambda]_{ij} x_j|`, which
        float32 cannot afford for ill-conditioned components, so other dtypes whiten by the
        Cholesky factors instead (``whitened_sq_norms()``). The float64
        product is formed component-major, ``(K, N)`` = weights ``(K, D(D+1)/2)`` times the products'
        transpose, and returned as its ``(N, K)`` transpose: on one CPU thread that order takes half the
        time of the item-major product at ``N = 1,000, K = 25, D = 25`` (0.45 ms against 0.90 ms). The factors are
        computed in ``post``'s precision; ``dtype`` is that of the products with the data (see
        :meth:`~pyro_memo.ConjugateFamily.log_lik_function`)."""
        d = self.dim
        chol, _, B_inv, e_logdet = wishart_terms(post["nu"], post["B"])
        const = 0.5 * e_logdet - 0.5 * d * math.log(2 * math.pi)
        dtype = B_inv.dtype if dtype is None else dtype
        if dtype != torch.float64:
            sq_norms = whitened_sq_norms(chol, dtype=dtype)
            const, nu = const.to(dtype), post["nu"].to(dtype)
            return lambda x, products=None: const - 0.5 * nu * sq_norms(x.to(dtype))
        weights = packed_quadratic_weights(post["nu"][:, None, None] * B_inv).T.contiguous()  # (K, D(D+1)/2)
        bias = const[:, None]

        def log_lik(x, products=None):
            products = packed_outer(x) if products is None else products
            return torch.addmm(bias, weights, products.T, alpha=-0.5).T  # (K, N) product, read as (N, K)

        return log_lik

    def column_log_lik_function(self, post, dtype=None):
        """:meth:`log_lik_function` for the components ``columns`` only: in float64 the rows
        ``columns`` of the packed quadratic weights times the items' packed products, so ``C``
        columns cost ``C / K`` of all of them; in other dtypes the whitened norms under those
        components' Cholesky factors."""
        d = self.dim
        chol, _, B_inv, e_logdet = wishart_terms(post["nu"], post["B"])
        const = 0.5 * e_logdet - 0.5 * d * math.log(2 * math.pi)
        dtype = B_inv.dtype if dtype is None else dtype
        if dtype != torch.float64:
            nu = post["nu"].to(dtype)

            def whitened(x, columns, products=None):
                return const[columns].to(dtype) - 0.5 * nu[columns] * whitened_sq_norms(chol[columns], dtype=dtype)(
                    x.to(dtype))

            return whitened
        weights = packed_quadratic_weights(post["nu"][:, None, None] * B_inv).T.contiguous()  # (K, D(D+1)/2)

        def column_log_lik(x, columns, products=None):
            products = packed_outer(x) if products is None else products
            return torch.addmm(const[columns, None], weights[columns], products.T, alpha=-0.5).T

        return column_log_lik

    def expected_log_lik_from_stats(self, counts, stats, post):
        d = self.dim
        _, _, B_inv, e_logdet = wishart_terms(post["nu"], post["B"])
        quad = (B_inv * stats["xx"]).sum((-1, -2))
        return counts * (0.5 * e_logdet - 0.5 * d * math.log(2 * math.pi)) - 0.5 * post["nu"] * quad

    def kl_to_prior(self, post):
        return kl_wishart(post["nu"], post["B"], self.prior["nu"], self.prior["B"])

    def log_marginal(self, counts, stats, post=None):
        post = self.posterior(counts, stats) if post is None else post
        return -0.5 * counts * self.dim * math.log(math.pi) + log_normalizer_ratio(
            post["nu"], post["B"], self.prior["nu"], self.prior["B"]
        )

    def log_predictive(self, x, counts, stats):
        """The Wishart predictive in closed form (Blei & Jordan 2006, §4): a zero-mean multivariate
        Student-t, ``student_t_log_predictive()`` with :math:`c_k = 1`
        (equal to the default's marginal-likelihood ratio, without its rank-one-updated Cholesky):
        ``(n, K)``."""
        post = self.posterior(counts, stats)
        return student_t_log_predictive(x, post["nu"], post["B"], torch.ones_like(post["nu"]))

    def log_density(self, x, params):
        return mvn_log_density_precision(x, torch.zeros_like(x), params["Lambda"])

    def sample_posterior(self, post):
        """:math:`\\Lambda_k \\sim W(\\nu_k, B_k^{-1})`."""
        return {"Lambda": sample_wishart(post["nu"], post["B"])}

    def log_prior_density(self, params):
        p = self.prior
        wishart = torch.distributions.Wishart(df=p["nu"], precision_matrix=p["B"], validate_args=False)
        return wishart.log_prob(params["Lambda"])

    def point_estimates(self, post):
        """Zero means and :math:`E[\\Lambda]^{-1} = B / \\nu`."""
        cov = post["B"] / post["nu"][:, None, None]
        return {"means": cov.new_zeros(cov.shape[:-1]), "covariances": cov}

    # ------------------------------------------------------------- Pyro form
    pyro_observation = ("MultivariateNormal",)
    pyro_components = {"Lambda": ("Wishart", 2)}
    pyro_constraints = {"B": "positive_definite"}

    @staticmethod
    def pyro_prior(dist, hyper, sample):
        """``Lambda ~ Wishart(nu, B^-1)``."""
        return {"Lambda": sample("Lambda", dist.Wishart(df=hyper["nu"], precision_matrix=hyper["B"]))}

    @staticmethod
    def pyro_likelihood(dist, theta, x=None):
        lam = theta["Lambda"]
        return dist.MultivariateNormal(lam.new_zeros(lam.shape[:-1]), precision_matrix=lam)

    @staticmethod
    def prior_from_pyro(sites, read):
        wish, _ = sites["Lambda"]
        return {"nu": read.constant(wish.df, 0, "Lambda", "df"),
                "B": read.constant(wish.precision_matrix, 2, "Lambda", "scale")}

    @staticmethod
    def example_data(labels, clusters, D, generator):
        """Zero-mean groups with log-normal per-dimension scales."""
        scales = torch.exp(2.0 * torch.randn(clusters, D, generator=generator, dtype=torch.float64))
        return scales[labels] * torch.randn(len(labels), D, generator=generator, dtype=torch.float64)
