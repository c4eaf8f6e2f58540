"""Inference algorithms on the exact DP-mixture ELBO."""

from .blocked_gibbs import BlockedGibbs
from .checkpoint import load_state, save_state
from .collapsed_gibbs import CollapsedGibbs
from .dp_mixture_posterior import DPMixturePosterior
from .full_batch_vb import FitResult, FullBatchVB
from .gibbs import GibbsResult
from .initialization import initial_responsibilities
from .memoized_vb import MemoizedVB, MemoState
from .memory_bounded import MemoryBoundedHDP, MemoryBoundedResult, MemoryBoundedVB
from .predictive import log_predictive, vb_log_predictive
from .stochastic_vb import StochasticVB, full_data_elbo
from .summary_cache import SummaryCache

__all__ = [
    "BlockedGibbs",
    "CollapsedGibbs",
    "GibbsResult",
    "DPMixturePosterior",
    "FitResult",
    "FullBatchVB",
    "MemoState",
    "MemoizedVB",
    "MemoryBoundedResult",
    "MemoryBoundedHDP",
    "MemoryBoundedVB",
    "StochasticVB",
    "SummaryCache",
    "full_data_elbo",
    "initial_responsibilities",
    "load_state",
    "log_predictive",
    "save_state",
    "vb_log_predictive",
]
