"""Deletes of HDP topics accepted only when the exact memoized bound rises.

At the start of a lap the smallest topic (by expected tokens) that has not been tried since
the last accepted move is proposed for deletion. During the lap every batch runs a second
local step under the current globals without that topic, so its tokens are reassigned to the other
topics exactly as the document-level coordinate ascent would; the resulting summaries form
the candidate memo. After the lap the candidate's sticks are optimised and its exact bound
compared with the current one; the delete is kept only if the bound rises.
"""

import torch

from ..allocation.hdp_sticks import expected_beta, rho_from_weights
from ..checks import as_share
from ..engine.candidate_memo import smallest_untried
from .candidate_memo import CandidateMemoMove
from .hdp_posterior import HDPPosterior


def sticks_without(rho, omega, k):
    """Sticks whose expected weights are the current ones with topic ``k``'s moved to the tail."""
    weights = expected_beta(rho)
    keep = [i for i in range(len(rho)) if i != k]
    return rho_from_weights(torch.cat([weights[keep], weights.new_zeros(1)])), omega[keep]


class TopicDeleteMove(CandidateMemoMove):
    """Exact-bound deletion of small HDP topics, as a move of :class:`~pyro_memo.topics.MemoizedHDP`.

    :param float max_share: only topics holding at most this share of the tokens are tried.
    """

    name = "delete"

    def __init__(self, max_share=0.05):
        super().__init__()
        self.max_share = as_share(max_share, "max_share")

    def start_lap(self, state, driver):
        self.target, self.candidate, self.batches, self.driver = None, None, {}, driver
        total = state.cache.total
        if total is None or total.K < 2 or len(state.cache) == 0:
            return
        self.target = smallest_untried(state, self.name, total.topic_counts, self.max_share)
        if self.target is None:
            return
        post = state.posterior
        self.keep, self.num_components = [i for i in range(post.K) if i != self.target], post.K

    def _without_target(self, post):
        """The current globals with the target topic removed (its weight moved to the tail)."""
        rho, omega = sticks_without(post.rho, post.omega, self.target)
        return HDPPosterior(post.lam[self.keep], rho, omega, post.alpha, post.gamma, post.lam0)

    def visit_batch(self, state, key, batch, local, summary):
        if self.target is None or state.posterior.K != self.num_components:
            return summary
        doc, word, count, num_docs = batch
        # the candidate's batch step runs under the current globals less the target, so it
        # keeps pace with the main fit's updates during the lap
        self.candidate = self._without_target(state.posterior)
        warm = state.doc_topic_counts.get(key)
        if warm is not None and warm.shape[1] == len(self.keep) + 1:
            warm = warm.clone()
            share = warm[:, self.target:self.target + 1]
            rest = warm[:, self.keep]
            # the target's counts spread over the others in proportion (a start, then iterated)
            warm = rest + share * (rest + 1e-12) / (rest + 1e-12).sum(1, keepdim=True)
        _, counts, candidate, _ = self.candidate.local_step(doc, word, count, num_docs, init_counts=warm,
                                                            max_iter=self.driver.local_iters,
                                                            tol=self.driver.local_tol,
                                                            sparse_L=self.driver.sparse_L)
        self.batches[key] = (counts, candidate)
        return summary
