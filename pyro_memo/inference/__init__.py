"""Inference algorithms on the exact DP-mixture ELBO."""

from .checkpoint import load_state, save_state
from .dp_mixture_posterior import DPMixturePosterior
from .full_batch_vb import FitResult, FullBatchVB
from .initialization import initial_responsibilities
from .memoized_vb import MemoizedVB, MemoState
from .stochastic_vb import StochasticVB, full_data_elbo
from .summary_cache import SummaryCache

__all__ = [
    "DPMixturePosterior",
    "FitResult",
    "FullBatchVB",
    "MemoState",
    "MemoizedVB",
    "StochasticVB",
    "SummaryCache",
    "full_data_elbo",
    "initial_responsibilities",
    "load_state",
    "save_state",
]
