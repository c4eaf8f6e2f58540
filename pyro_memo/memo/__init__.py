"""The memo: per-batch summaries, the state of a fit, and its one checkpoint format."""

from .cache import SummaryCache
from .checkpoint import load_state, save_state, state_from_dict, state_to_dict
from .state import MemoState

__all__ = ["MemoState", "SummaryCache", "load_state", "save_state", "state_from_dict", "state_to_dict"]
