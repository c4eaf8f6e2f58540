"""Conjugate exponential families: pure torch math, no Pyro (see :mod:`.base`)."""

from .base import ConjugateFamily
from .bernoulli import Bernoulli
from .diag_gaussian import DiagGaussian
from .gaussian import Gaussian
from .multinomial import Multinomial
from .poisson import Poisson
from .zero_mean_gaussian import ZeroMeanGaussian

#: CLI / config name -> family class
FAMILIES = {
    cls.name: cls for cls in (Gaussian, ZeroMeanGaussian, DiagGaussian, Multinomial, Bernoulli, Poisson)
}


def get_family(name):
    """The family class registered under ``name`` (one of :data:`FAMILIES`)."""
    try:
        return FAMILIES[name]
    except KeyError:
        raise ValueError(f"unknown family '{name}'; choose one of {sorted(FAMILIES)}") from None


__all__ = [
    "FAMILIES",
    "Bernoulli",
    "ConjugateFamily",
    "DiagGaussian",
    "Gaussian",
    "Multinomial",
    "Poisson",
    "ZeroMeanGaussian",
    "get_family",
]
