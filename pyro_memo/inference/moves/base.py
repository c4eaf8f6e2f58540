"""What every move shares: the hook protocol, exact ELBO evaluation and memo rewrites.

A move takes part in each memoized lap through three hooks (see
:meth:`pyro_memo.inference.MemoizedVB.lap`): :meth:`Move.start_lap` before the first
batch, :meth:`Move.visit_batch` after each batch's local step (before its summary enters
the memo) and :meth:`Move.end_lap` after the last batch. Moves change the number of
components only at lap boundaries (GreedyMerge excepted), by rewriting every cached
batch summary, so the memo stays the exact summary of one variational distribution.
"""

import torch

from ..dp_mixture_posterior import DPMixturePosterior


def optimal_elbo(posterior, summary):
    """Exact ELBO of ``summary`` with the globals that are optimal for it (paper 000 eq. 10)."""
    best = DPMixturePosterior.from_summary(posterior.family, posterior.sticks, summary)
    return float(best.elbo(summary)), best


def rewrite_memo(state, rewrite):
    """Replace every cached batch summary ``s`` by ``rewrite(key, s)``, re-add the total from
    scratch and refit the globals to it (nothing to rewrite while the memo is still empty)."""
    cache = state.cache
    if not cache.batches:
        return
    cache.batches = {key: rewrite(key, s) for key, s in cache.batches.items()}
    cache.total = cache.recomputed_total()
    state.posterior = DPMixturePosterior.from_summary(state.posterior.family, state.posterior.sticks, cache.total)


class Move:
    """Base class of birth / merge / delete moves.

    :ivar str name: the move's name in logs (``"birth"``, ``"merge"``, ...).
    """

    name = None

    def start_lap(self, state, driver):
        """Called before the lap's first batch."""

    def visit_batch(self, state, key, x, resp, summary):
        """Called after batch ``key``'s local step; returns the summary to memoize."""
        return summary

    def end_lap(self, state, driver):
        """Called after the lap's last batch."""

    def converged(self, state):
        """Whether this move has nothing left to try (a fit with moves stops only then)."""
        return True

    def log(self, state, proposed=0, accepted=0):
        counts = state.lap_moves.setdefault(self.name, {"proposed": 0, "accepted": 0})
        counts["proposed"] += proposed
        counts["accepted"] += accepted

    def record_gain(self, state, before, after):
        """Keep the exact ELBO before and after an accepted move (checked by the tests)."""
        state.move_gains.append({"move": self.name, "lap": state.laps_done, "before": before, "after": after})

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        pass


def sort_components(state):
    """Reorder components by decreasing expected count when that raises the exact ELBO
    (stick-breaking favours big components first; used after births and merges)."""
    total = state.cache.total
    order = torch.argsort(total.counts, descending=True)
    if bool((order == torch.arange(len(order), device=order.device)).all()):
        return False
    before, _ = optimal_elbo(state.posterior, total)
    after, _ = optimal_elbo(state.posterior, total.select(order))
    if after <= before:
        return False
    rewrite_memo(state, lambda key, s: s.select(order))
    return True
