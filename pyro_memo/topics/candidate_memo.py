"""The topic moves' candidate memo: the engine's (:mod:`pyro_memo.engine.candidate_memo`)."""

from ..engine.candidate_memo import CandidateMemoMove, accept_if_better

__all__ = ["CandidateMemoMove", "accept_if_better", "tried_topics"]


def tried_topics(state, name, K, reset=False):
    """The topics move ``name`` tried without success since the topics were last renumbered
    (see :meth:`~pyro_memo.MemoState.tried_components`)."""
    return state.tried_components(name, K, reset)
