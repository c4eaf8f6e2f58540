"""How each family's component parameters and likelihood are written as Pyro sites.

The model and the guide share this code: the model calls :meth:`ComponentSites.sample`
with the prior hyperparameters, the guide with the posterior ones (the conjugate
posterior has the prior's form), so their sample sites match by construction. What the
sites are is declared by each family in its own file (``pyro_components``, ``pyro_prior``,
``pyro_likelihood``; see :class:`~pyro_memo.families.base.ConjugateFamily`); this module
only hands them ``pyro.sample`` and ``pyro.distributions``.
"""

import pyro
import pyro.distributions as dist
import torch

from ..families import FAMILIES, Bernoulli, DiagGaussian, Gaussian, Multinomial, Poisson, ZeroMeanGaussian


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
    """Pyro sample statements of one family; ``names`` maps roles to site names.

    :cvar family: the :class:`~pyro_memo.ConjugateFamily` subclass whose Pyro form
        this writes.
    """

    family = None

    def __init__(self, names=None):
        self.names = dict(self.default_names if names is None else names)

    @property
    def roles(self):
        """role -> number of event dims of the parameter value."""
        return {role: event_dim for role, (_, event_dim) in self.family.pyro_components.items()}

    @property
    def default_names(self):
        """Default site name of each role in the built-in models (the role itself)."""
        return {role: role for role in self.family.pyro_components}

    def sample(self, hyper):
        """Sample every component parameter inside the caller's component plate."""
        return self.family.pyro_prior(dist, hyper, lambda role, fn: pyro.sample(self.names[role], fn))

    def likelihood(self, theta, x=None):
        """The observation distribution given per-item parameters ``theta``."""
        return self.family.pyro_likelihood(dist, theta, x)

    def likelihood_for(self, theta, z, x=None):
        """The observation distribution of items assigned to components ``z``."""
        per_item = {role: index_components(theta[role], z, ev) for role, ev in self.roles.items()}
        per_item.update(_constants(theta, self.roles))
        return self.likelihood(per_item, x)


def _constants(theta, roles):
    """Entries of ``theta`` that are no component site (a family's fixed constants, e.g. the known
    covariance of :class:`~pyro_memo.families.KnownCovGaussian`): the same for every item, passed as is."""
    return {k: v for k, v in theta.items() if k not in roles}


def _sites_class(family_cls):
    return type(f"{family_cls.__name__}Sites", (ComponentSites,), {"family": family_cls,
                                                                   "__module__": __name__})


GaussianSites = _sites_class(Gaussian)
ZeroMeanGaussianSites = _sites_class(ZeroMeanGaussian)
DiagGaussianSites = _sites_class(DiagGaussian)
MultinomialSites = _sites_class(Multinomial)
BernoulliSites = _sites_class(Bernoulli)
PoissonSites = _sites_class(Poisson)

#: family class -> its Pyro site writer (built-in families; any registered family works with :func:`sites_for`)
SITES = {cls.family: cls for cls in (GaussianSites, ZeroMeanGaussianSites, DiagGaussianSites, MultinomialSites,
                                     BernoulliSites, PoissonSites)}


def sites_for(family, names=None):
    """The ``ComponentSites`` of ``family`` (an instance or a registered class) with site ``names``."""
    cls = family if isinstance(family, type) else type(family)
    if cls not in SITES:
        if cls.name not in FAMILIES or not cls.pyro_components:
            raise ValueError(f"family {cls.__name__} declares no Pyro form (pyro_components)")
        SITES[cls] = _sites_class(cls)
    return SITES[cls](names)
