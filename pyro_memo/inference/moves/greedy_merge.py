"""GreedyMerge, the ablation of paper 000 §4.1: merges judged on the current batch alone."""

from .base import Move, optimal_elbo, rewrite_memo
from .merge import pair_entropies, select_pairs


class GreedyMergeMove(Move):
    """Merge when the ELBO of the *current batch alone* rises, not the exact full-data ELBO
    (paper 000 §4.1's GreedyMerge ablation). By default the batch is scored as if it were
    the whole dataset; ``scale_to_data=True`` blows its summary up by ``N / |batch|`` first,
    the single-batch estimate of stochastic split-merge methods. The batch's own summary is
    merged exactly; other cached batches use the entropy bound :math:`H_a + H_b` until they
    are revisited. Such merges can lower the full-data objective.

    :param bool scale_to_data: score the batch scaled to the data size.
    """

    name = "greedy-merge"

    def __init__(self, scale_to_data=False):
        self.scale_to_data = bool(scale_to_data)

    def visit_batch(self, state, key, x, resp, summary):
        if summary.K < 2 or summary.num_items == 0:
            return summary
        post = state.posterior
        scale = state.num_items / summary.num_items if self.scale_to_data else 1.0
        scaled = summary.scaled(scale)
        pairs = select_pairs(post.family, scaled, 1)
        entropies = pair_entropies(resp, pairs)
        current, _ = optimal_elbo(post, scaled)
        position = list(range(summary.K))
        used = set()
        proposed = accepted = 0
        for p, (a0, b0) in enumerate(pairs.tolist()):
            if a0 in used or b0 in used:
                continue
            a, b = position[a0], position[b0]
            proposed += 1
            candidate = scaled.merge(a, b, entropies[p] * scale)
            value, _ = optimal_elbo(post, candidate)
            if value > current:
                summary = summary.merge(a, b, entropies[p])
                scaled, current = candidate, value
                rewrite_memo(state, lambda k, s, a=a, b=b: s.merge(a, b, s.entropy[a] + s.entropy[b]))
                accepted += 1
                used.update((a0, b0))
                position = [None if i == b0 else (q - 1 if q is not None and q > b else q)
                            for i, q in enumerate(position)]
        self.log(state, proposed, accepted)
        return summary
