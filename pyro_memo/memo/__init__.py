"""The memo: per-batch summaries, the state of a fit, and its one checkpoint format, and
the model file of a fitted model (:func:`save_model`, :func:`load_model`)."""

from .cache import SummaryCache
from .checkpoint import load_state, save_state, state_from_dict, state_to_dict
from .model_file import load_model, save_model
from .state import MemoState

__all__ = ["MemoState", "SummaryCache", "load_model", "load_state", "save_model", "save_state", "state_from_dict",
           "state_to_dict"]
