"""Merge moves with exact full-data ELBO acceptance (paper 000 §3.2)."""

import torch

from ...engine.moves import candidate_pairs
from .base import Move, optimal_elbo, rewrite_memo


def merge_scores(family, summary):
    """Paper 000 eq. 12 for every pair ``a < b``:
    :math:`\\log M(S_a + S_b) - \\log M(S_a) - \\log M(S_b)`; returns ``(pairs (P, 2), scores (P,))``."""
    K = summary.K
    pairs = torch.combinations(torch.arange(K, device=summary.counts.device), 2)
    if len(pairs) == 0:
        return pairs, summary.counts.new_zeros(0)
    single = family.log_marginal(summary.counts, summary.stats)
    a, b = pairs[:, 0], pairs[:, 1]
    scores = []
    for lo in range(0, len(pairs), 512):  # chunked: merged (P, D, D) statistics can be large
        ia, ib = a[lo:lo + 512], b[lo:lo + 512]
        counts = summary.counts[ia] + summary.counts[ib]
        stats = {k: v[ia] + v[ib] for k, v in summary.stats.items()}
        scores.append(family.log_marginal(counts, stats) - single[ia] - single[ib])
    return pairs, torch.cat(scores)


def select_pairs(family, summary, per_component):
    """Candidate pairs: each component with its ``per_component`` best partners by eq. 12,
    ordered by decreasing score."""
    pairs, scores = merge_scores(family, summary)
    return candidate_pairs(pairs, scores, summary.K, per_component)


def pair_entropies(resp, pairs):
    """:math:`-\\sum_n (r_{na} + r_{nb}) \\log (r_{na} + r_{nb})` for each pair: ``(P,)``."""
    merged = resp[:, pairs[:, 0]] + resp[:, pairs[:, 1]]
    return -torch.special.xlogy(merged, merged).sum(0)


class MergeMove(Move):
    """Merge pairs of components when the exact full-data ELBO rises.

    At the start of a lap the candidate pairs are chosen by the marginal-likelihood ratio
    (paper 000 eq. 12); during the lap every batch caches the merged-assignment entropy of
    each candidate pair; after the lap each candidate is evaluated exactly (eq. 8 is linear
    in the summaries, the pair entropies supply the one non-linear term) and accepted only
    if the ELBO increases. A component takes part in at most one merge per lap.

    :param int pairs_per_component: partners considered for each component.
    """

    name = "merge"

    def __init__(self, pairs_per_component=3):
        self.pairs_per_component = int(pairs_per_component)
        self.pairs = None
        self.pair_entropy = {}
        self.num_components = None

    def start_lap(self, state, driver):
        total = state.cache.total
        self.pair_entropy = {}
        self.pairs = None
        self.num_components = None if total is None else total.K
        if total is not None and total.K > 1:
            self.pairs = select_pairs(state.posterior.family, total, self.pairs_per_component)

    def visit_batch(self, state, key, x, resp, summary):
        if self.pairs is not None and len(self.pairs):
            self.pair_entropy[key] = pair_entropies(resp, self.pairs)
        return summary

    def end_lap(self, state, driver):
        cache = state.cache
        if self.pairs is None or not len(self.pairs) or set(self.pair_entropy) != set(cache.batches) \
                or cache.total.K != state.posterior.K or int(self.pairs.max()) >= cache.total.K \
                or self.num_components != cache.total.K:
            return  # an accepted delete changed the components: these pair entropies no longer apply
        total_h = sum(self.pair_entropy.values())
        current, _ = optimal_elbo(state.posterior, cache.total)
        position = list(range(cache.total.K))  # original index -> current index (None once merged)
        used = set()
        proposed = accepted = 0
        for p, (a0, b0) in enumerate(self.pairs.tolist()):
            if a0 in used or b0 in used:
                continue
            a, b = position[a0], position[b0]
            proposed += 1
            candidate = cache.total.merge(a, b, total_h[p])
            value, _ = optimal_elbo(state.posterior, candidate)
            if value > current:
                rewrite_memo(state, lambda key, s, a=a, b=b, p=p: s.merge(a, b, self.pair_entropy[key][p]))
                self.record_gain(state, current, value)
                current = value
                accepted += 1
                used.update((a0, b0))
                position = [None if i == b0 else (q - 1 if q is not None and q > b else q)
                            for i, q in enumerate(position)]
        self.log(state, proposed, accepted)
        self.pairs, self.pair_entropy = None, {}
