"""Independent Bernoulli likelihood per dimension, Beta prior."""

import torch

from ._special import kl_beta, lbeta
from .base import ConjugateFamily, data_for_defaults, weighted_sums


class Bernoulli(ConjugateFamily):
    """:math:`x_{d} \\sim Bern(\\phi_d)`, :math:`\\phi_d \\sim Beta(a_0, b_0)`.

    Prior keys, (D,): ``a``, ``b``. Statistic: ``x`` :math:`\\sum_n r_{nk} x_n`.
    """

    name = "bern"
    prior_names = ("a", "b")
    stat_names = ("x",)

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
            raise ValueError("bern prior 'a' and 'b' must be (D,) vectors")
        if not bool((p["a"] > 0).all() and (p["b"] > 0).all()):
            raise ValueError("bern prior 'a' and 'b' must be positive")

    @classmethod
    def from_data(cls, x, dtype=torch.float64, device=None, **overrides):
        """Default: uniform Beta(1, 1) per dimension."""
        x = data_for_defaults(x, dtype, device, cls)
        d = x.shape[1]
        prior = {"a": torch.ones(d), "b": torch.ones(d)}
        prior.update(overrides)
        return cls(prior, dtype=dtype, device=device)

    def _check_support(self, x):
        if bool(((x != 0) & (x != 1)).any()):
            raise ValueError("bern data must be binary (0/1); found other values")

    def stats(self, x, resp):
        return {"x": weighted_sums(resp, x)}

    def posterior(self, counts, stats):
        a = self.prior["a"] + stats["x"]
        b = self.prior["b"] + (counts.unsqueeze(-1) - stats["x"]).clamp_min(0.0)
        return {"a": a, "b": b}

    @staticmethod
    def _e_logs(post):
        total = torch.digamma(post["a"] + post["b"])
        return torch.digamma(post["a"]) - total, torch.digamma(post["b"]) - total

    def expected_log_lik(self, x, post):
        e_log_phi, e_log_1m = self._e_logs(post)
        return x @ (e_log_phi - e_log_1m).T + e_log_1m.sum(-1)

    def expected_log_lik_from_stats(self, counts, stats, post):
        e_log_phi, e_log_1m = self._e_logs(post)
        return (stats["x"] * (e_log_phi - e_log_1m)).sum(-1) + counts * e_log_1m.sum(-1)

    def kl_to_prior(self, post):
        return kl_beta(post["a"], post["b"], self.prior["a"], self.prior["b"]).sum(-1)

    def log_marginal(self, counts, stats, post=None):
        post = self.posterior(counts, stats) if post is None else post
        return (lbeta(post["a"], post["b"]) - lbeta(self.prior["a"], self.prior["b"])).sum(-1)

    def log_density(self, x, params):
        phi = params["phi"]
        return (torch.xlogy(x, phi) + torch.xlogy(1 - x, 1 - phi)).sum(-1)

    def sample_posterior(self, post):
        """:math:`\\phi_{kd} \\sim \\mathrm{Beta}(a_{kd}, b_{kd})`."""
        return {"phi": torch.distributions.Beta(post["a"], post["b"], validate_args=False).sample()}

    def log_prior_density(self, params):
        return torch.distributions.Beta(self.prior["a"], self.prior["b"]).log_prob(params["phi"]).sum(-1)

    def point_estimates(self, post):
        """Posterior mean success probabilities."""
        return {"probabilities": post["a"] / (post["a"] + post["b"])}

    # ------------------------------------------------------------- Pyro form
    pyro_observation = ("Bernoulli",)
    pyro_components = {"phi": ("Beta", 1)}

    @staticmethod
    def pyro_prior(dist, hyper, sample):
        """``phi ~ Beta(a, b)`` per dimension."""
        return {"phi": sample("phi", dist.Beta(hyper["a"], hyper["b"]).to_event(1))}

    @staticmethod
    def pyro_likelihood(dist, theta, x=None):
        return dist.Bernoulli(theta["phi"]).to_event(1)

    @staticmethod
    def prior_from_pyro(sites, read):
        beta, phi = sites["phi"]
        return {"a": read.constant(beta.concentration1.expand_as(phi), 1, "phi", "a"),
                "b": read.constant(beta.concentration0.expand_as(phi), 1, "phi", "b")}

    @staticmethod
    def example_data(labels, clusters, D, generator):
        """Binary groups with success probabilities in [0.1, 0.9]."""
        probs = torch.rand(clusters, D, generator=generator, dtype=torch.float64) * 0.8 + 0.1
        return torch.bernoulli(probs[labels], generator=generator)
