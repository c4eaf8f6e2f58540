"""DP mixture models written as ordinary Pyro programs."""

import pyro
import pyro.distributions as dist
import torch

from ..allocation import stick_breaking_weights
from ..checks import as_positive_float, as_positive_int
from ..families import ConjugateFamily
from ..families._wishart import quiet_wishart
from .component_sites import sites_for


class DPMixtureModel:
    """A truncated stick-breaking DP mixture of ``family`` components, as a Pyro model.

    The model is the one of Pyro's DP-mixture tutorial: ``T - 1`` sticks
    ``v ~ Beta(1, alpha)`` in plate ``"sticks"``, ``T`` component parameters in plate
    ``"components"`` drawn from the family's conjugate prior, and inside plate
    ``"data"`` an assignment ``z ~ Categorical(w(v))`` and an observation ``x`` whose
    distribution indexes the component parameters by ``z``. It runs unchanged under
    :class:`pyro.infer.SVI` (Trace_ELBO, or TraceEnum_ELBO with ``z`` enumerated),
    under :class:`pyro.infer.Predictive`, and under pyro-memo's inference.

    :param family: a :class:`~pyro_memo.ConjugateFamily` (its prior is used).
    :param int T: number of components of the truncated model (``T >= 2``: ``T - 1`` sticks).
    :param float alpha: DP concentration.
    """

    def __init__(self, family, T, alpha=1.0):
        if not isinstance(family, ConjugateFamily):
            raise TypeError(f"family must be a family object with its prior, e.g. pyro_memo.Gaussian.from_data(x); "
                            f"got {family!r}")
        if as_positive_int(T, "T") < 2:
            raise ValueError(f"T must be at least 2 (the model has T - 1 sticks); got {T!r}")
        self.family = family
        self.T = int(T)
        self.alpha = as_positive_float(alpha, "alpha")
        self.sites = sites_for(family)

    def __repr__(self):
        return f"DPMixtureModel({self.family!r}, T={self.T}, alpha={self.alpha})"

    def __call__(self, data=None, num_data=None, subsample_size=None):
        """Run the model.

        :param data: ``(N, D)`` observations, or ``None`` to generate.
        :param int num_data: ``N`` when ``data`` is ``None``.
        :param int subsample_size: optional minibatch size of the ``"data"`` plate.
        """
        fam = self.family
        if data is not None:
            data = fam.check_data(data)
            num_data = data.shape[0]
        elif num_data is None:
            raise ValueError("pass data, or num_data to generate data")
        else:
            num_data = as_positive_int(num_data, "num_data")
        one = torch.ones((), dtype=fam.dtype, device=fam.device)
        with pyro.plate("sticks", self.T - 1):
            v = pyro.sample("v", dist.Beta(one, self.alpha * one))
        with pyro.plate("components", self.T), quiet_wishart():  # torch's false warning on every Wishart draw
            theta = self.sites.sample(fam.prior_posterior(self.T))
        weights = stick_breaking_weights(v)
        with pyro.plate("data", num_data, subsample_size=subsample_size) as idx:
            z = pyro.sample("z", dist.Categorical(weights.unsqueeze(-2)))
            x = None if data is None else data[idx]
            return pyro.sample("x", self.sites.likelihood_for(theta, z, x), obs=x)
