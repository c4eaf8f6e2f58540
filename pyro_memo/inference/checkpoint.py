"""Moved to :mod:`pyro_memo.memo.checkpoint` (one format for every model); kept so old imports work."""

from ..memo.checkpoint import FORMAT_VERSION, load_state, save_state, state_from_dict, state_to_dict

__all__ = ["FORMAT_VERSION", "load_state", "save_state", "state_from_dict", "state_to_dict"]
