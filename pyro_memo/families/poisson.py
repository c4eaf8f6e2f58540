"""Independent Poisson likelihood per dimension, Gamma prior."""

import torch

from ._special import in_row_blocks, kl_gamma, log_negative_binomial, sum_over_nonzero
from .base import ConjugateFamily, data_for_defaults, weighted_sums
from .multinomial import check_counts


class Poisson(ConjugateFamily):
    """:math:`x_d \\sim Poisson(\\lambda_d)`, :math:`\\lambda_d \\sim Gamma(a_0, b_0)` (rate ``b``).

    Prior keys, (D,): ``a``, ``b``. Statistics: ``x`` :math:`\\sum_n r_{nk} x_n` and
    ``logfact`` :math:`\\sum_n r_{nk} \\sum_d \\log x_{nd}!`.
    """

    name = "poisson"
    prior_names = ("a", "b")
    stat_names = ("x", "logfact")

    def __init__(self, prior, dtype=torch.float64, device=None):
        prior = dict(prior)
        shape = torch.broadcast_shapes(*(torch.as_tensor(v).shape for v in prior.values()))
        prior = {k: torch.as_tensor(v, dtype=dtype).expand(shape).clone() for k, v in prior.items()}
        super().__init__(prior, dtype=dtype, device=device)

    @property
    def dim(self):
        return self.prior["a"].shape[-1]

    def _check_prior(self):
        p = self.prior
        if p["a"].dim() != 1:
            raise ValueError("poisson prior 'a' and 'b' must be (D,) vectors")
        if not bool((p["a"] > 0).all() and (p["b"] > 0).all()):
            raise ValueError("poisson prior 'a' and 'b' must be positive")

    @classmethod
    def from_data(cls, x, dtype=torch.float64, device=None, **overrides):
        """Defaults: ``a`` = 1 and ``b`` = 1 / (per-dimension mean), so :math:`E[\\lambda_d]`
        matches the data mean (the mean is floored at 1e-2 for all-zero columns)."""
        x = data_for_defaults(x, dtype, device, cls)
        mean = x.mean(0).clamp_min(1e-2)
        prior = {"a": torch.ones(x.shape[1]), "b": 1.0 / mean}
        prior.update(overrides)
        return cls(prior, dtype=dtype, device=device)

    def _check_support(self, x):
        check_counts(x, self.name)

    def stats(self, x, resp):
        return {"x": weighted_sums(resp, x), "logfact": resp.T @ torch.lgamma(x + 1).sum(-1)}

    def posterior(self, counts, stats):
        return {"a": self.prior["a"] + stats["x"], "b": self.prior["b"] + counts.unsqueeze(-1)}

    @staticmethod
    def _e_log_lam(post):
        return torch.digamma(post["a"]) - torch.log(post["b"])

    def expected_log_lik(self, x, post):
        e_lam = post["a"] / post["b"]
        return x @ self._e_log_lam(post).T - e_lam.sum(-1) - torch.lgamma(x + 1).sum(-1, keepdim=True)

    def expected_log_lik_from_stats(self, counts, stats, post):
        e_lam = post["a"] / post["b"]
        return (stats["x"] * self._e_log_lam(post)).sum(-1) - counts * e_lam.sum(-1) - stats["logfact"]

    def kl_to_prior(self, post):
        return kl_gamma(post["a"], post["b"], self.prior["a"], self.prior["b"]).sum(-1)

    def log_marginal(self, counts, stats, post=None):
        p = self.prior
        post = self.posterior(counts, stats) if post is None else post
        per_dim = (
            p["a"] * torch.log(p["b"])
            - torch.lgamma(p["a"])
            + torch.lgamma(post["a"])
            - post["a"] * torch.log(post["b"])
        )
        return per_dim.sum(-1) - stats["logfact"]

    def log_predictive(self, x, counts, stats):
        """Posterior predictive :math:`\\log p(x_n \\mid S_k)` ``(n, K)``: per dimension the Gamma-Poisson
        negative binomial of shape :math:`a_{kd}` and :math:`p = b_{kd} / (b_{kd} + 1)`, in closed form
        (``log_negative_binomial()``). The generic ratio of marginal
        likelihoods cancels the whole summary's ``lgamma`` terms: counts of 1e16 all scored -3.7 where the
        predictive is about -200."""
        post = self.posterior(counts, stats)
        a, b = post["a"].T, post["b"].T  # (D, K)
        p, q, log_p = b / (b + 1), 1 / (b + 1), -torch.log1p(1 / b)

        def nonzero(rows, columns, values):
            return log_negative_binomial(values.unsqueeze(-1), a[columns], p[columns], q[columns], log_p[columns])

        return in_row_blocks(lambda x: sum_over_nonzero(x, a * log_p, nonzero), x, a.numel())

    def log_density(self, x, params):
        lam = params["lambda"]
        return (torch.xlogy(x, lam) - lam - torch.lgamma(x + 1)).sum(-1)

    def sample_posterior(self, post):
        """:math:`\\lambda_{kd} \\sim \\mathrm{Gamma}(a_{kd}, b_{kd})`."""
        lam = torch.distributions.Gamma(post["a"], post["b"], validate_args=False).sample()
        return {"lambda": lam.clamp_min(torch.finfo(lam.dtype).tiny)}

    def log_prior_density(self, params):
        p = self.prior
        return torch.distributions.Gamma(p["a"], p["b"]).log_prob(params["lambda"]).sum(-1)

    def point_estimates(self, post):
        """Posterior mean rates."""
        return {"rates": post["a"] / post["b"]}

    # ------------------------------------------------------------- Pyro form
    pyro_observation = ("Poisson",)
    pyro_components = {"lambda": ("Gamma", 1)}

    @staticmethod
    def pyro_prior(dist, hyper, sample):
        """``lambda ~ Gamma(a, b)`` per dimension."""
        return {"lambda": sample("lambda", dist.Gamma(hyper["a"], hyper["b"]).to_event(1))}

    @staticmethod
    def pyro_likelihood(dist, theta, x=None):
        return dist.Poisson(theta["lambda"]).to_event(1)

    @staticmethod
    def prior_from_pyro(sites, read):
        gam, lam = sites["lambda"]
        return {"a": read.constant(gam.concentration.expand_as(lam), 1, "lambda", "shape"),
                "b": read.constant(gam.rate.expand_as(lam), 1, "lambda", "rate")}

    @staticmethod
    def example_data(labels, clusters, D, generator):
        """Count groups with rates in [1, e^2]."""
        rates = torch.exp(2.0 * torch.rand(clusters, D, generator=generator, dtype=torch.float64))
        return torch.poisson(rates[labels], generator=generator)
