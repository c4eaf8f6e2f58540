"""A candidate memo built beside the main fit during a lap, kept only when the exact bound
rises: the acceptance step shared by topic births and deletes."""

from ..allocation.hdp_sticks import optimize_sticks
from ..engine import Move
from .hdp_posterior import HDPPosterior


def accept_if_better(state, candidate, batches):
    """Compare the exact bound of a complete candidate memo with the current one.

    :param state: the fit's :class:`~pyro_memo.memo.MemoState` (memo complete).
    :param HDPPosterior candidate: globals the candidate's sticks start from.
    :param dict batches: batch key -> ``(doc_topic_counts, TopicSummary)``, one per memo batch,
        from local steps run under the candidate's topics.
    :returns: ``(before, after)`` exact bounds when the candidate replaced the memo, the globals
        and the warm starts; ``None`` when it was not better.
    """
    current = float(state.posterior.elbo(state.cache.total))
    total = None
    for _, summary in batches.values():
        total = summary if total is None else total + summary
    rho, omega = optimize_sticks(candidate.rho, candidate.omega, total.num_docs, total.sum_log_pi, candidate.alpha,
                                 candidate.gamma)
    new = HDPPosterior(candidate.lam0 + total.word_counts, rho, omega, candidate.alpha, candidate.gamma,
                       candidate.lam0)
    value = float(new.elbo(total))
    if not value > current:
        return None
    for key, (counts, summary) in batches.items():
        state.doc_topic_counts[key] = counts
        state.cache.batches[key] = summary
    state.cache.total = total
    state.posterior = new
    return current, value


def tried_topics(state, name, K, reset=False):
    """The topics move ``name`` tried without success since the topics were last renumbered
    (a list to append to), kept in the state so that a resumed fit goes on alike; emptied when
    ``K`` changed or ``reset`` (see :meth:`~pyro_memo.memo.MemoState.tried_components`)."""
    return state.tried_components(name, K, reset)


class CandidateMemoMove(Move):
    """Base of the topic moves that build a candidate memo beside the main fit through a lap
    (births, deletes): a subclass picks ``target`` and records ``num_topics`` in
    ``start_lap``, and fills ``batches`` (key -> ``(doc_topic_counts, summary)``) and
    ``candidate`` (its globals) in ``visit_batch``; ``end_lap`` accepts the candidate only
    when its exact bound is higher, and remembers rejected targets in the state."""

    name = None

    def __init__(self):
        self.target, self.candidate, self.batches, self.num_topics = None, None, {}, None

    def end_lap(self, state, driver):
        complete = self.target is not None and set(self.batches) == set(state.cache.batches) \
            and state.cache.total.K == self.num_topics
        if complete:
            gain = accept_if_better(state, self.candidate, self.batches)
            self.log(state, proposed=1, accepted=int(gain is not None))
            if gain is not None:
                self.record_gain(state, *gain)
                tried_topics(state, self.name, state.posterior.K, reset=True)
            else:
                tried_topics(state, self.name, state.posterior.K).append(self.target)
        self.target, self.candidate, self.batches = None, None, {}
