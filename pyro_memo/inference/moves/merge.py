"""Merge moves with exact full-data ELBO acceptance (Hughes & Sudderth 2013, §3.2)."""

import torch

from ...checks import as_positive_int
from ...engine.moves import PairMergeMove, candidate_pairs
from .base import optimal_elbo, rewrite_memo


def merge_scores(family, summary, pairs=None):
    """Paper 000 eq. 12 for every pair ``a < b`` (or the rows of ``pairs``):
    :math:`\\log M(S_a + S_b) - \\log M(S_a) - \\log M(S_b)`; returns ``(pairs (P, 2), scores (P,))``."""
    if pairs is None:
        pairs = torch.combinations(torch.arange(summary.K, device=summary.counts.device), 2)
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


class MergeMove(PairMergeMove):
    """Merge pairs of components when the exact full-data ELBO rises.

    At the start of a lap the candidate pairs are chosen by the marginal-likelihood ratio
    (Hughes & Sudderth 2013, eq. 12); during the lap every batch caches the merged-assignment entropy of
    each candidate pair; after the lap each candidate is evaluated exactly (eq. 8 is linear
    in the summaries, the pair entropies supply the one non-linear term) and accepted only
    if the ELBO increases. A component takes part in at most one merge per lap (the loop is
    :class:`~pyro_memo.engine.PairMergeMove`'s).

    :param int pairs_per_component: partners considered for each component.
    """

    def __init__(self, pairs_per_component=3):
        super().__init__(per_component=as_positive_int(pairs_per_component, "pairs_per_component"))
        self.pairs_per_component = self.per_component

    def pair_scores(self, state, total):
        return merge_scores(state.posterior.family, total)

    def batch_pair_entropy(self, batch, local, pairs):
        return pair_entropies(local, pairs)

    def current(self, state):
        return optimal_elbo(state.posterior, state.cache.total)[0]

    def evaluate(self, state, a, b, p):
        candidate = state.cache.total.merge(a, b, self.total_entropy[p])
        return optimal_elbo(state.posterior, candidate)[0], None

    def apply(self, state, candidate, a, b, p):
        rewrite_memo(state, lambda key, s: s.merge(a, b, self.pair_entropy[key][p]))
