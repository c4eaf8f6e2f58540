"""Birth, merge and delete moves for memoized inference (paper 000 §3.1-3.2)."""

from .base import Move, optimal_elbo, sort_components
from .birth import BirthMove
from .delete import DeleteMove
from .greedy_merge import GreedyMergeMove
from .merge import MergeMove, merge_scores, pair_entropies

#: names accepted by ``make_moves`` / the CLI's ``--moves``, in the order moves run
MOVES = {"birth": BirthMove, "delete": DeleteMove, "merge": MergeMove, "greedy-merge": GreedyMergeMove}


def make_moves(names, seed=0, **options):
    """Move objects for ``names`` (an iterable or a comma-separated string), in canonical order.

    Births run first (their pseudo-batch must leave the memo before others are judged), then
    deletes, then merges. ``options`` maps a move name to its keyword arguments.
    """
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    unknown = set(names) - set(MOVES)
    if unknown:
        raise ValueError(f"unknown moves {sorted(unknown)}; choose from {', '.join(MOVES)}")
    if "merge" in names and "greedy-merge" in names:
        raise ValueError("choose either merge (exact) or greedy-merge (the ablation), not both")
    moves = []
    for name in MOVES:
        if name in names:
            kwargs = dict(options.get(name, {}))
            if name == "birth":
                kwargs.setdefault("seed", seed)
            moves.append(MOVES[name](**kwargs))
    return moves


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
