"""The memo: per-batch summaries, the state of a fit, and its one checkpoint format (a fitted
model's file for prediction is :mod:`pyro_memo.model_file`)."""

from .cache import SummaryCache
from .checkpoint import load_state, save_state, state_from_dict, state_to_dict
from .clumps import Clumps, clump_size, stats_log_lik, tied_local_step
from .compression import Compressor
from .group_clumps import GroupedClumps
from .state import MemoState

__all__ = ["Clumps", "Compressor", "GroupedClumps", "MemoState", "SummaryCache", "clump_size", "load_state",
           "save_state", "state_from_dict", "state_to_dict", "stats_log_lik", "tied_local_step"]
