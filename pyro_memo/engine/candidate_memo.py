"""A candidate memo built beside the main fit during a lap, kept only when the exact objective
rises: the acceptance step of every model's births, deletes and merges that re-run local steps
(Hughes & Sudderth 2013 §3.1; for the HDP, Hughes, Kim & Sudderth 2015 §5).

A move picks a target at the start of a lap; after each batch's local step it runs a second one
under the candidate globals (the current ones with the target changed), so the candidate keeps
pace with the fit through the lap; at the lap's end the complete candidate memo gets its optimal
globals (``posterior.optimal_for``) and replaces the memo, the globals and the warm starts only if
its exact objective is higher.
"""

import torch

from .moves import Move

__all__ = ["CandidateMemoMove", "accept_if_better", "candidate_total", "smallest_untried"]


def candidate_total(batches):
    """The total summary of a candidate memo (batch key -> ``(warm_start, summary)``)."""
    total = None
    for _, summary in batches.values():
        total = summary if total is None else total + summary
    return total


def accept_if_better(state, candidate, batches):
    """Compare the exact objective of a complete candidate memo with the current one.

    :param state: the fit's :class:`~pyro_memo.MemoState` (memo complete).
    :param candidate: the candidate's globals (any posterior); its optimum for the candidate
        memo starts from them.
    :param dict batches: batch key -> ``(warm_start, summary)``, one per memo batch, from local
        steps run under the candidate.
    :returns: ``(before, after)`` exact objectives when the candidate replaced the memo, the
        globals and the warm starts; ``None`` when it was not better.
    """
    current = float(state.posterior.elbo(state.cache.total))
    total = candidate_total(batches)
    new = candidate.optimal_for(total)
    value = float(new.elbo(total))
    if not value > current:
        return None
    for key, (warm, summary) in batches.items():
        if warm is None:  # a model without local factors to keep
            state.warm_starts.pop(key, None)
        else:
            state.warm_starts[key] = warm
        state.cache.batches[key] = summary
    state.cache.total = total
    state.posterior = new
    return current, value


def smallest_untried(state, name, sizes, max_share):
    """The smallest component (by ``sizes``) that move ``name`` has not tried since the components
    were last renumbered and that holds at most ``max_share`` of the total; ``None`` if none."""
    tried = state.tried_components(name, len(sizes))
    share = sizes / sizes.sum()
    for k in torch.argsort(sizes).tolist():
        if k not in tried and float(share[k]) <= max_share:
            return k
    return None


class CandidateMemoMove(Move):
    """Base of the moves that build a candidate memo beside the main fit through a lap: a
    subclass picks ``target`` and records ``num_components`` in ``start_lap``, and fills
    ``batches`` (key -> ``(warm_start, summary)``) and ``candidate`` (its globals) in
    ``visit_batch``; ``end_lap`` accepts the candidate only when its exact objective is higher,
    and remembers rejected targets in the state (:meth:`~pyro_memo.MemoState.tried_components`)."""

    name = None

    def __init__(self):
        self.target, self.candidate, self.batches, self.num_components = None, None, {}, None

    def end_lap(self, state, driver):
        complete = self.target is not None and set(self.batches) == set(state.cache.batches) \
            and state.cache.total.K == self.num_components
        if complete:
            gain = accept_if_better(state, self.candidate, self.batches)
            self.log(state, proposed=1, accepted=int(gain is not None))
            if gain is not None:
                self.record_gain(state, *gain)
                state.tried_components(self.name, state.posterior.K, reset=True)
            else:
                self.mark_tried(state)
        self.target, self.candidate, self.batches = None, None, {}

    def mark_tried(self, state):
        """A rejected candidate: its target counts as tried (:meth:`~pyro_memo.MemoState.tried_components`)."""
        state.tried_components(self.name, state.posterior.K).append(self.target)
