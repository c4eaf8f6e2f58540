"""Multinomial / Categorical likelihood over count vectors, Dirichlet prior."""

import torch

from ._special import in_row_blocks, log_negative_binomial, sum_over_nonzero
from .base import ConjugateFamily, data_for_defaults


def log_multinomial_coefficient(x):
    """:math:`\\log (\\sum_v x_v)! - \\sum_v \\log x_v!` per row of ``x``."""
    return torch.lgamma(x.sum(-1) + 1) - torch.lgamma(x + 1).sum(-1)


def check_counts(x, name):
    """Raise :class:`ValueError` unless ``x`` holds non-negative integers."""
    if bool((x < 0).any()):
        raise ValueError(f"{name} data must be non-negative counts; found {int((x < 0).sum())} negative entries")
    if bool((x != torch.round(x)).any()):
        raise ValueError(f"{name} data must be integer counts; found non-integer values")


class Multinomial(ConjugateFamily):
    """:math:`x_n \\sim Mult(n_n, \\phi)`, :math:`\\phi \\sim Dir(\\lambda_0)`.

    Each row of ``x`` is a count vector over ``V`` categories (a one-hot row is a single
    Categorical draw). Prior key: ``lam`` (V,). Statistics: ``x`` :math:`\\sum_n r_{nk} x_n`
    and ``logc``, the responsibility-weighted log multinomial coefficients (constant in
    :math:`\\phi`, kept so the ELBO is the exact log-likelihood bound).
    """

    name = "mult"
    prior_names = ("lam",)
    stat_names = ("x", "logc")

    @property
    def dim(self):
        return self.prior["lam"].shape[-1]

    def _check_prior(self):
        lam = self.prior["lam"]
        if lam.dim() != 1 or not bool((lam > 0).all()):
            raise ValueError("mult prior 'lam' must be a positive (V,) vector")

    @classmethod
    def from_data(cls, x, dtype=torch.float64, device=None, **overrides):
        """Default: symmetric Dirichlet with concentration 0.5 (Jeffreys) per category."""
        x = data_for_defaults(x, dtype, device, cls)
        prior = {"lam": torch.full((x.shape[1],), 0.5)}
        prior.update(overrides)
        return cls(prior, dtype=dtype, device=device)

    def _check_support(self, x):
        check_counts(x, self.name)

    def stats(self, x, resp):
        return {"x": resp.T @ x, "logc": resp.T @ log_multinomial_coefficient(x)}

    def posterior(self, counts, stats):
        return {"lam": self.prior["lam"] + stats["x"]}

    @staticmethod
    def _e_log_phi(lam):
        return torch.digamma(lam) - torch.digamma(lam.sum(-1, keepdim=True))

    def expected_log_lik(self, x, post):
        return x @ self._e_log_phi(post["lam"]).T + log_multinomial_coefficient(x).unsqueeze(-1)

    def expected_log_lik_from_stats(self, counts, stats, post):
        return (stats["x"] * self._e_log_phi(post["lam"])).sum(-1) + stats["logc"]

    def kl_to_prior(self, post):
        lam, lam0 = post["lam"], self.prior["lam"]
        return (
            torch.lgamma(lam.sum(-1))
            - torch.lgamma(lam).sum(-1)
            - torch.lgamma(lam0.sum(-1))
            + torch.lgamma(lam0).sum(-1)
            + ((lam - lam0) * self._e_log_phi(lam)).sum(-1)
        )

    def log_marginal(self, counts, stats, post=None):
        lam0 = self.prior["lam"]
        lam = (self.posterior(counts, stats) if post is None else post)["lam"]
        return (
            torch.lgamma(lam0.sum(-1))
            - torch.lgamma(lam.sum(-1))
            + (torch.lgamma(lam) - torch.lgamma(lam0)).sum(-1)
            + stats["logc"]
        )

    def log_predictive(self, x, counts, stats):
        """Posterior predictive :math:`\\log p(x_n \\mid S_k)` ``(n, K)``: the Dirichlet-multinomial of
        :math:`\\lambda_k`, multinomial coefficient included, in closed form. With :math:`N = \\sum_v x_v`,
        :math:`A = \\sum_v \\lambda_{kv}` and any :math:`p = 1 - q`, it is
        :math:`\\sum_v \\log NB(x_v; \\lambda_{kv}, p) - \\log NB(N; A, p)` (the :math:`p^{\\lambda} q^{x}`
        factors cancel), each negative binomial by
        ``log_negative_binomial()``; :math:`p = A / (A + N)` puts
        :math:`N` at the second's mean. The generic ratio of marginal likelihoods cancels the whole
        summary's ``lgamma`` terms and loses the result at large counts."""
        lam = self.posterior(counts, stats)["lam"].T  # (V, K)
        size = lam.sum(0)  # (K,)

        def predictive(x):
            total = x.sum(-1, keepdim=True)  # (n, 1)
            p, q = size / (size + total), total / (size + total)  # (n, K)
            log_p = -torch.log1p(total / size)

            def nonzero(rows, columns, values):
                return log_negative_binomial(values.unsqueeze(-1), lam[columns], p[rows], q[rows], log_p[rows])

            zeros = ((x == 0).to(lam.dtype) @ lam) * log_p  # the words x leaves out: lam_kv log p each
            words = sum_over_nonzero(x, torch.zeros_like(lam), nonzero) + zeros
            return words - log_negative_binomial(total.expand_as(p), size.expand_as(p), p, q, log_p)

        return in_row_blocks(predictive, x, lam.numel())

    def log_density(self, x, params):
        return (x * torch.log(params["phi"])).sum(-1) + log_multinomial_coefficient(x)

    def sample_posterior(self, post):
        """:math:`\\phi_k \\sim \\mathrm{Dirichlet}(\\lambda_k)`."""
        phi = torch.distributions.Dirichlet(post["lam"], validate_args=False).sample()
        return {"phi": phi.clamp_min(torch.finfo(phi.dtype).tiny)}

    def log_prior_density(self, params):
        return torch.distributions.Dirichlet(self.prior["lam"]).log_prob(params["phi"])

    def point_estimates(self, post):
        """Posterior mean category probabilities."""
        return {"probabilities": post["lam"] / post["lam"].sum(-1, keepdim=True)}

    # ------------------------------------------------------------- Pyro form
    pyro_observation = ("Multinomial", "Categorical")
    pyro_one_hot = ("Categorical",)
    pyro_components = {"phi": ("Dirichlet", 1)}

    @staticmethod
    def pyro_prior(dist, hyper, sample):
        """``phi ~ Dirichlet(lam)``."""
        return {"phi": sample("phi", dist.Dirichlet(hyper["lam"]))}

    @staticmethod
    def pyro_likelihood(dist, theta, x=None):
        # torch's Multinomial.log_prob uses each row's own total; total_count only bounds the support
        total = 1 if x is None else max(int(x.sum(-1).max()), 1)
        return dist.Multinomial(total_count=total, probs=theta["phi"])

    @staticmethod
    def prior_from_pyro(sites, read):
        dirichlet, _ = sites["phi"]
        return {"lam": read.constant(dirichlet.concentration, 1, "phi", "concentration")}

    @staticmethod
    def example_data(labels, clusters, D, generator):
        """Count rows of 5-24 draws from per-group Dirichlet(1) probabilities (normalised Exp(1) draws),
        all from ``generator``."""
        exp1 = -torch.log1p(-torch.rand(clusters, D, dtype=torch.float64, generator=generator))
        probs = exp1 / exp1.sum(1, keepdim=True)
        counts = 5 + torch.randint(20, (len(labels),), generator=generator)
        return torch.stack([torch.multinomial(probs[k], int(c), replacement=True, generator=generator).bincount(
            minlength=D).double() for k, c in zip(labels, counts, strict=True)])
