"""The memo: per-batch summaries, the state of a fit, and its one checkpoint format (a fitted
model's file for prediction is :mod:`pyro_memo.model_file`)."""

from .cache import SummaryCache
from .checkpoint import load_state, save_state, state_from_dict, state_to_dict
from .clumps import Clumps, stats_log_lik, tied_local_step
from .compression import Compressor
from .state import MemoState

__all__ = ["Clumps", "Compressor", "MemoState", "SummaryCache", "load_state", "save_state", "state_from_dict",
           "state_to_dict", "stats_log_lik", "tied_local_step"]
