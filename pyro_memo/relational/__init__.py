"""The assortative HDP relational model (mixed-membership communities; Kim, Gopalan, Blei & Sudderth
2013) on the one memoized engine, and its stochastic baselines."""

from ..posterior.relational import RelationalPosterior
from ..posterior.relational_tied import TiedRelationalPosterior
from .heldout import link_prediction
from .memoized_relational import MemoizedRelational, NodeBatches, PairBatch
from .stochastic import StochasticAMMSB, StochasticRelational

__all__ = ["MemoizedRelational", "NodeBatches", "PairBatch", "RelationalPosterior", "StochasticAMMSB",
           "StochasticRelational", "TiedRelationalPosterior", "link_prediction"]
