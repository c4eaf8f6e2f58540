"""Birth, merge and delete moves for memoized inference (Hughes & Sudderth 2013, §3.1-3.2)."""

from ...engine.moves import Move, optimal_elbo, sort_components
from ...engine.moves import make_moves as _make_moves
from .birth import BirthMove
from .delete import DeleteMove
from .greedy_merge import GreedyMergeMove
from .merge import MergeMove, merge_scores, pair_entropies

#: names accepted by ``make_moves`` / the CLI's ``--moves``, in the order moves run
MOVES = {"birth": BirthMove, "delete": DeleteMove, "merge": MergeMove, "greedy-merge": GreedyMergeMove}


def make_moves(names, seed=0, **options):
    """Move objects for ``names`` (an iterable or a comma-separated string; move objects may stand
    beside the names), in canonical order.

    Births run first (their pseudo-batch must leave the memo before others are judged), then
    deletes, then merges; moves of other kinds after them. ``options`` maps a move name to its
    keyword arguments.
    """
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    if "merge" in names and "greedy-merge" in names:
        raise ValueError("choose either merge (exact) or greedy-merge (the ablation), not both")
    return _make_moves(names, MOVES, seed=seed, **options)


__all__ = [
    "MOVES",
    "BirthMove",
    "DeleteMove",
    "GreedyMergeMove",
    "MergeMove",
    "Move",
    "make_moves",
    "merge_scores",
    "optimal_elbo",
    "pair_entropies",
    "sort_components",
]
