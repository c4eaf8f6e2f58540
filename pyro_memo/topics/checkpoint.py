"""HDP checkpoints are the one checkpoint format of :mod:`pyro_memo.memo.checkpoint`; these names
are kept so old imports work."""

from ..memo.checkpoint import load_state as load_hdp_state
from ..memo.checkpoint import save_state as save_hdp_state

__all__ = ["load_hdp_state", "save_hdp_state"]
