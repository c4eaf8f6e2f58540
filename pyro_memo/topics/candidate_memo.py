"""The topic moves' candidate memo: the engine's (:mod:`pyro_memo.engine.candidate_memo`)."""

from ..engine.candidate_memo import CandidateMemoMove

__all__ = ["CandidateMemoMove", "tried_topics"]


def tried_topics(state, name, K, reset=False):
    """The topics move ``name`` tried without success since the topics were last renumbered
    (see :meth:`~pyro_memo.MemoState.tried_components`)."""
    return state.tried_components(name, K, reset)
