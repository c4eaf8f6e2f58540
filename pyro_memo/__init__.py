"""pyro-memo: memoized online variational inference for Bayesian nonparametric models in Pyro.

The public names below are imported on first use (PEP 562), so that ``import pyro_memo`` and the
``pyro-memo`` command line start without torch and Pyro until they are needed.
"""

import importlib

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
    "MemoryBoundedHDP",
    "MemoryBoundedVB",
    "MemoState",
    "fit_memoized",
    "load_model",
    "load_state",
    "make_batches",
    "save_model",
    "save_state",
    "FAMILIES",
    "Bernoulli",
    "ConjugateFamily",
    "DPMixtureGuide",
    "HDPGuide",
    "RelationalGuide",
    "DPMixture",
    "HDPTopics",
    "HDPCommunities",
    "ConvergenceWarning",
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
    "batch_pairs",
    "batch_tokens",
    "fit_vb",
    "full_data_elbo",
    "get_family",
    "recognize_model",
    "stick_breaking_weights",
    "vb_log_predictive",
]

#: where each public name is defined (relative to this package)
_SOURCES = {
    ".allocation": "DPSticks stick_breaking_weights".split(),
    ".community_estimator": "HDPCommunities".split(),
    ".bridge": ("ClosedFormOptimizer ConvergenceWarning DPMixtureGuide HDPGuide MemoizedELBO ModelStructureError "
                "PyroSVI RelationalGuide batch_pairs batch_tokens fit_memoized fit_vb recognize_model").split(),
    ".data": "make_batches".split(),
    ".estimator": "DPMixture".split(),
    ".families": ("FAMILIES Bernoulli ConjugateFamily DiagGaussian Gaussian Multinomial Poisson "
                  "ZeroMeanGaussian get_family").split(),
    ".inference": ("BlockedGibbs CollapsedGibbs DPMixturePosterior FitResult FullBatchVB MemoizedVB MemoState "
                   "MemoryBoundedHDP MemoryBoundedVB StochasticVB full_data_elbo load_state save_state "
                   "vb_log_predictive").split(),
    ".model_file": "load_model save_model".split(),
    ".inference.moves": "BirthMove DeleteMove GreedyMergeMove MergeMove Move".split(),
    ".models": "DPMixtureModel".split(),
    ".summaries": "Summary".split(),
    ".topic_estimator": "HDPTopics".split(),
}
_WHERE = {name: module for module, names in _SOURCES.items() for name in names}


def __getattr__(name):
    """Import a public name, or a subpackage (``pyro_memo.topics``), on first access."""
    if name in _WHERE:
        value = getattr(importlib.import_module(_WHERE[name], __name__), name)
    else:
        try:
            value = importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as err:
            if err.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
