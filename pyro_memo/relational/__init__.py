"""The assortative HDP relational model (mixed-membership communities; Kim, Gopalan, Blei & Sudderth
2013) on the one memoized engine."""

from ..posterior.relational import RelationalPosterior
from .heldout import link_prediction
from .memoized_relational import MemoizedRelational, NodeBatches, PairBatch

__all__ = ["MemoizedRelational", "NodeBatches", "PairBatch", "RelationalPosterior", "link_prediction"]
