"""The engine: one memoized driver and one move base for every model."""

from .driver import SCHEDULES, FitResult, MemoizedDriver
from .executors import BatchStep, DaskExecutor, Executor, SerialExecutor, as_executor
from .moves import Move, PairMergeMove, candidate_pairs, make_moves, optimal_elbo, rewrite_memo, sort_components
from .overrelax import Overrelaxation
from .stochastic import StochasticDriver
from .threads import ThreadPolicy

__all__ = [
    "SCHEDULES",
    "BatchStep",
    "DaskExecutor",
    "Executor",
    "FitResult",
    "MemoizedDriver",
    "Move",
    "Overrelaxation",
    "PairMergeMove",
    "SerialExecutor",
    "StochasticDriver",
    "ThreadPolicy",
    "as_executor",
    "candidate_pairs",
    "make_moves",
    "optimal_elbo",
    "rewrite_memo",
    "sort_components",
]
