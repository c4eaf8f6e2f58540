"""How each family's component parameters and likelihood are written as Pyro sites.

The model and the guide share this code: the model calls :meth:`ComponentSites.sample`
with the prior hyperparameters, the guide with the posterior ones (the conjugate
posterior has the prior's form), so their sample sites match by construction.
"""

import pyro
import pyro.distributions as dist
import torch

from ..families import Bernoulli, DiagGaussian, Gaussian, Multinomial, Poisson, ZeroMeanGaussian


def index_components(value, z, event_dim):
    """``value[..., z[..., n], *event]``: pick each item's component parameter.

    :param torch.Tensor value: ``(..., T, *event)`` component parameters.
    :param torch.Tensor z: ``(..., N)`` assignments (any broadcastable batch shape,
        including Pyro's particle and enumeration dimensions).
    :param int event_dim: number of event dimensions of ``value``.
    :returns: ``(..., N, *event)``.
    """
    event = value.shape[value.dim() - event_dim:]
    batch = torch.broadcast_shapes(value.shape[: value.dim() - event_dim - 1], z.shape[:-1])
    value = value.expand(batch + value.shape[value.dim() - event_dim - 1:])
    z = z.expand(batch + z.shape[-1:])
    index = z.reshape(z.shape + (1,) * event_dim).expand(z.shape + event)
    return torch.gather(value, len(batch), index)


class ComponentSites:
    """Pyro sample statements of one family; ``names`` maps roles to site names."""

    #: role -> number of event dims of the parameter value
    roles = {}
    #: default site name of each role in the built-in models
    default_names = {}

    def __init__(self, names=None):
        self.names = dict(self.default_names if names is None else names)

    def sample(self, hyper):
        """Sample every component parameter inside the caller's component plate."""
        raise NotImplementedError

    def likelihood(self, theta, x=None):
        """The observation distribution given per-item parameters ``theta``."""
        raise NotImplementedError

    def likelihood_for(self, theta, z, x=None):
        """The observation distribution of items assigned to components ``z``."""
        per_item = {role: index_components(theta[role], z, ev) for role, ev in self.roles.items()}
        return self.likelihood(per_item, x)


class GaussianSites(ComponentSites):
    roles = {"Lambda": 2, "mu": 1}
    default_names = {"Lambda": "Lambda", "mu": "mu"}

    def sample(self, hyper):
        lam = pyro.sample(self.names["Lambda"], dist.Wishart(df=hyper["nu"], precision_matrix=hyper["B"]))
        prec = hyper["kappa"][..., None, None] * lam
        mu = pyro.sample(self.names["mu"], dist.MultivariateNormal(hyper["m"], precision_matrix=prec))
        return {"Lambda": lam, "mu": mu}

    def likelihood(self, theta, x=None):
        return dist.MultivariateNormal(theta["mu"], precision_matrix=theta["Lambda"])


class ZeroMeanGaussianSites(ComponentSites):
    roles = {"Lambda": 2}
    default_names = {"Lambda": "Lambda"}

    def sample(self, hyper):
        lam = pyro.sample(self.names["Lambda"], dist.Wishart(df=hyper["nu"], precision_matrix=hyper["B"]))
        return {"Lambda": lam}

    def likelihood(self, theta, x=None):
        lam = theta["Lambda"]
        return dist.MultivariateNormal(lam.new_zeros(lam.shape[:-1]), precision_matrix=lam)


class DiagGaussianSites(ComponentSites):
    roles = {"lambda": 1, "mu": 1}
    default_names = {"lambda": "lambda", "mu": "mu"}

    def sample(self, hyper):
        lam = pyro.sample(self.names["lambda"], dist.Gamma(hyper["a"], hyper["b"]).to_event(1))
        scale = (hyper["kappa"] * lam).rsqrt()
        mu = pyro.sample(self.names["mu"], dist.Normal(hyper["m"], scale).to_event(1))
        return {"lambda": lam, "mu": mu}

    def likelihood(self, theta, x=None):
        return dist.Normal(theta["mu"], theta["lambda"].rsqrt()).to_event(1)


class MultinomialSites(ComponentSites):
    roles = {"phi": 1}
    default_names = {"phi": "phi"}

    def sample(self, hyper):
        return {"phi": pyro.sample(self.names["phi"], dist.Dirichlet(hyper["lam"]))}

    def likelihood(self, theta, x=None):
        # torch's Multinomial.log_prob uses each row's own total; total_count only bounds the support
        total = 1 if x is None else max(int(x.sum(-1).max()), 1)
        return dist.Multinomial(total_count=total, probs=theta["phi"])


class BernoulliSites(ComponentSites):
    roles = {"phi": 1}
    default_names = {"phi": "phi"}

    def sample(self, hyper):
        return {"phi": pyro.sample(self.names["phi"], dist.Beta(hyper["a"], hyper["b"]).to_event(1))}

    def likelihood(self, theta, x=None):
        return dist.Bernoulli(theta["phi"]).to_event(1)


class PoissonSites(ComponentSites):
    roles = {"lambda": 1}
    default_names = {"lambda": "lambda"}

    def sample(self, hyper):
        return {"lambda": pyro.sample(self.names["lambda"], dist.Gamma(hyper["a"], hyper["b"]).to_event(1))}

    def likelihood(self, theta, x=None):
        return dist.Poisson(theta["lambda"]).to_event(1)


#: family class -> its Pyro site writer
SITES = {
    Gaussian: GaussianSites,
    ZeroMeanGaussian: ZeroMeanGaussianSites,
    DiagGaussian: DiagGaussianSites,
    Multinomial: MultinomialSites,
    Bernoulli: BernoulliSites,
    Poisson: PoissonSites,
}


def sites_for(family, names=None):
    """The :class:`ComponentSites` of ``family`` with site ``names`` (role -> name)."""
    return SITES[type(family)](names)
