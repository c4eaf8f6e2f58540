"""GreedyMerge, the ablation of Hughes & Sudderth 2013, §4.1: merges judged on the current batch alone."""

from .base import Move, optimal_elbo, rewrite_memo
from .merge import pair_entropies, select_pairs

#: how GreedyMerge scores the current batch (see :class:`GreedyMergeMove`)
SCORES = ("current", "batch", "scaled")


class GreedyMergeMove(Move):
    """Merge when the ELBO of the *current batch alone* rises, not the exact full-data ELBO
    (Hughes & Sudderth 2013, §4.1's GreedyMerge ablation, "as done in" stochastic split-merge methods).
    "The ELBO of the current batch" can be read three ways; ``score`` picks one:

    * ``"current"`` (default): the ELBO with the data replaced by the batch, evaluated at
      the current full-data variational distribution (the globals fit to the memo, merged
      or not): the batch's likelihood, allocation and entropy terms minus the globals'
      whole KL to the prior -- the literal ELBO of the proposed ``q`` on the batch;
    * ``"batch"``: the batch scored as if it were the whole dataset, with the globals
      optimal for it (prior and batch in full);
    * ``"scaled"``: the same after blowing the batch's summary up by ``N / |batch|``, the
      single-batch estimate of the full-data ELBO used by stochastic methods.

    The batch's own summary is merged exactly; other cached batches use the entropy bound
    :math:`H_a + H_b` until they are revisited. Such merges can lower the full-data objective.

    :param str score: ``"current"`` (default), ``"batch"`` or ``"scaled"``.
    """

    name = "greedy-merge"
    #: the accepted values of ``score`` (:data:`SCORES`)
    SCORES = SCORES

    def __init__(self, score="current"):
        if score not in SCORES:
            raise ValueError(f"GreedyMergeMove score must be one of {SCORES}, got {score!r}")
        self.score = score

    def _value(self, state, key, batch, full):
        """The batch-level objective of batch summary ``batch`` (``full``: the memo total
        that includes it)."""
        post = state.posterior
        if self.score == "current":
            globals_ = post.optimal_for(full)
            return float(globals_.elbo(batch))
        scale = state.num_items / batch.num_items if self.score == "scaled" else 1.0
        return optimal_elbo(post, batch.scaled(scale))[0]

    def visit_batch(self, state, key, x, resp, summary):
        if summary.K < 2 or summary.num_items == 0:
            return summary
        full = state.cache.total_with(key, summary) if state.cache.total is not None else summary
        if self.score == "current":
            ranked = full
        else:
            ranked = summary.scaled(state.num_items / summary.num_items if self.score == "scaled" else 1.0)
        pairs = select_pairs(state.posterior.family, ranked, 1)
        entropies = pair_entropies(resp, pairs)
        current = self._value(state, key, summary, full)
        position = list(range(summary.K))
        used = set()
        proposed = accepted = 0
        for p, (a0, b0) in enumerate(pairs.tolist()):
            if a0 in used or b0 in used:
                continue
            a, b = position[a0], position[b0]
            proposed += 1
            batch = summary.merge(a, b, entropies[p])
            merged_full = full.merge(a, b, full.entropy[a] + full.entropy[b])
            value = self._value(state, key, batch, merged_full)
            if value > current:
                summary, full, current = batch, merged_full, value
                rewrite_memo(state, lambda k, s, a=a, b=b: s.merge(a, b, s.entropy[a] + s.entropy[b]))
                accepted += 1
                used.update((a0, b0))
                position = [None if i == b0 else (q - 1 if q is not None and q > b else q)
                            for i, q in enumerate(position)]
        self.log(state, proposed, accepted)
        return summary
