"""GreedyMerge, the ablation of paper 000 §4.1: merges judged on the current batch alone."""

from .base import Move, optimal_elbo, rewrite_memo
from .merge import pair_entropies, select_pairs


class GreedyMergeMove(Move):
    """Merge when the ELBO *estimated from the current batch*, blown up to data scale,
    rises (the single-batch criterion of stochastic split-merge methods), not the exact
    full-data ELBO. The batch's own summary is merged exactly; other cached batches use the
    entropy bound :math:`H_a + H_b` until they are revisited. Kept as the paper's ablation:
    such merges can lower the full-data objective.
    """

    name = "greedy-merge"

    def visit_batch(self, state, key, x, resp, summary):
        if summary.K < 2 or summary.num_items == 0:
            return summary
        post = state.posterior
        scale = state.num_items / summary.num_items
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
