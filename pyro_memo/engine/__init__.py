"""The engine: one memoized driver and one move base for every model."""

from .driver import FitResult, MemoizedDriver
from .moves import Move, PairMergeMove, candidate_pairs, make_moves, optimal_elbo, rewrite_memo, sort_components
from .stochastic import StochasticDriver
from .threads import ThreadPolicy

__all__ = [
    "FitResult",
    "MemoizedDriver",
    "Move",
    "PairMergeMove",
    "StochasticDriver",
    "ThreadPolicy",
    "candidate_pairs",
    "make_moves",
    "optimal_elbo",
    "rewrite_memo",
    "sort_components",
]
