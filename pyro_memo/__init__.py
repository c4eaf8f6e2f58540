"""pyro-memo: memoized online variational inference for Bayesian nonparametric models in Pyro."""

from .allocation import DPSticks, stick_breaking_weights
from .bridge import DPMixtureGuide, ModelStructureError, fit_vb, recognize_model
from .families import (
    FAMILIES,
    Bernoulli,
    ConjugateFamily,
    DiagGaussian,
    Gaussian,
    Multinomial,
    Poisson,
    ZeroMeanGaussian,
    get_family,
)
from .inference import DPMixturePosterior, FitResult, FullBatchVB
from .models import DPMixtureModel
from .summaries import Summary

__version__ = "0.1.0"

__all__ = [
    "FAMILIES",
    "Bernoulli",
    "ConjugateFamily",
    "DPMixtureGuide",
    "DPMixtureModel",
    "DPMixturePosterior",
    "DPSticks",
    "DiagGaussian",
    "FitResult",
    "FullBatchVB",
    "Gaussian",
    "ModelStructureError",
    "Multinomial",
    "Poisson",
    "Summary",
    "ZeroMeanGaussian",
    "fit_vb",
    "get_family",
    "recognize_model",
    "stick_breaking_weights",
]
