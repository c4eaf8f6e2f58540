"""Conjugate exponential families: pure torch math, no Pyro (see :mod:`.base`).

Every family lives in one file of this package and registers itself (by its ``name``) when
the file is imported; every public module here is imported below, so adding a family means
adding its file. Besides its math, a family declares its Pyro form (observation and
component sites, the guide's parameter constraints and its recognition rule) as data and
Pyro-free functions: see :class:`~pyro_memo.families.base.ConjugateFamily`.
"""

import importlib
import pkgutil

import torch

from ._products import PRODUCT_CACHE, ProductCache
from ._sparse import SparseResponsibilities, candidate_groups, check_sparse_candidates, check_sparse_L
from .base import REGISTRY, ConjugateFamily, NonFiniteDataError
from .bernoulli import Bernoulli
from .diag_gaussian import DiagGaussian
from .gaussian import Gaussian
from .known_gaussian import KnownCovGaussian, KnownDiagGaussian
from .multinomial import Multinomial
from .poisson import Poisson
from .zero_mean_gaussian import ZeroMeanGaussian

for _module in pkgutil.iter_modules(__path__):
    if not _module.name.startswith("_") and _module.name != "base":
        importlib.import_module(f"{__name__}.{_module.name}")

#: CLI / config name -> family class (the registry itself: every registered family)
FAMILIES = REGISTRY


def get_family(name):
    """The family class registered under ``name`` (one of :data:`FAMILIES`)."""
    try:
        return FAMILIES[name]
    except KeyError:
        raise ValueError(f"unknown family '{name}'; choose one of {sorted(FAMILIES)}") from None


def family_from_state(d, device=None):
    """The family :meth:`ConjugateFamily.state_dict <pyro_memo.ConjugateFamily.state_dict>` describes (keys
    ``family``, ``prior``, ``dtype`` and the family's :meth:`~pyro_memo.ConjugateFamily.state_extras`)."""
    cls = get_family(d["family"])
    return cls(d["prior"], dtype=getattr(torch, d["dtype"]), device=device, **cls.extras_from_state(d))


__all__ = [
    "FAMILIES",
    "Bernoulli",
    "ConjugateFamily",
    "DiagGaussian",
    "Gaussian",
    "KnownCovGaussian",
    "KnownDiagGaussian",
    "Multinomial",
    "NonFiniteDataError",
    "PRODUCT_CACHE",
    "Poisson",
    "ProductCache",
    "SparseResponsibilities",
    "ZeroMeanGaussian",
    "candidate_groups",
    "check_sparse_L",
    "check_sparse_candidates",
    "family_from_state",
    "get_family",
]
