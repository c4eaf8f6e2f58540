"""pyro-memo: memoized online variational inference for Bayesian nonparametric models in Pyro."""

from .allocation import DPSticks, stick_breaking_weights
from .bridge import (
    ClosedFormOptimizer,
    DPMixtureGuide,
    HDPGuide,
    MemoizedELBO,
    ModelStructureError,
    PyroSVI,
    batch_tokens,
    fit_memoized,
    fit_vb,
    recognize_model,
)
from .data import make_batches
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
from .inference import (
    BlockedGibbs,
    CollapsedGibbs,
    DPMixturePosterior,
    FitResult,
    FullBatchVB,
    MemoizedVB,
    MemoState,
    StochasticVB,
    full_data_elbo,
    load_state,
    save_state,
    vb_log_predictive,
)
from .inference.moves import BirthMove, DeleteMove, GreedyMergeMove, MergeMove, Move
from .models import DPMixtureModel
from .summaries import Summary

__version__ = "0.1.0"

__all__ = [
    "BirthMove",
    "BlockedGibbs",
    "DeleteMove",
    "GreedyMergeMove",
    "MergeMove",
    "Move",
    "CollapsedGibbs",
    "ClosedFormOptimizer",
    "MemoizedELBO",
    "MemoizedVB",
    "MemoState",
    "fit_memoized",
    "load_state",
    "make_batches",
    "save_state",
    "FAMILIES",
    "Bernoulli",
    "ConjugateFamily",
    "DPMixtureGuide",
    "HDPGuide",
    "DPMixtureModel",
    "DPMixturePosterior",
    "DPSticks",
    "DiagGaussian",
    "FitResult",
    "FullBatchVB",
    "Gaussian",
    "ModelStructureError",
    "PyroSVI",
    "StochasticVB",
    "Multinomial",
    "Poisson",
    "Summary",
    "ZeroMeanGaussian",
    "batch_tokens",
    "fit_vb",
    "full_data_elbo",
    "get_family",
    "recognize_model",
    "stick_breaking_weights",
    "vb_log_predictive",
]
