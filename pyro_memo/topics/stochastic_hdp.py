"""Stochastic online variational inference for the HDP topic model, the baseline of
memoized inference (Sudderth's HDP talk, "Analysis of Document Corpora": memoized versus stochastic
rates; Hoffman, Blei, Wang & Paisley 2013 for the topic step).

Each step draws a batch of documents, runs the same document-level local step as
:class:`~pyro_memo.topics.MemoizedHDP` from scratch (nothing is memoized), and moves the
globals a step :math:`\\rho_t = (t + d)^{-\\kappa}` toward the optimum of the batch scaled
to the corpus: :math:`\\lambda \\leftarrow (1 - \\rho_t)\\lambda + \\rho_t(\\lambda_0 + (D/|B|) S_B)`
(the natural-gradient step of the conjugate topics), and the sticks' ``(rho, omega)``
toward those optimal for the scaled batch summary (the convex step bnpy takes for the
non-conjugate sticks). The scaled-batch optimum is exact when the batch is the corpus.
"""

import torch

from ..allocation.hdp_sticks import optimize_sticks
from ..engine import StochasticDriver
from .hdp_posterior import HDPPosterior
from .memoized_hdp import HDPSteps


class StochasticHDP(HDPSteps, StochasticDriver):
    """Stochastic online VI for the HDP topic model over fixed document batches visited in a
    random order each pass (the engine's :class:`~pyro_memo.engine.StochasticDriver`).

    :param int K: truncation (number of topics).
    :param float kappa: learning-rate decay, in [0.5, 1].
    :param float delay: learning-rate delay ``d >= 0``; step ``t = 1, 2, ...`` has rate
        :math:`(t + d)^{-\\kappa}`.

    The other parameters are those of :class:`~pyro_memo.topics.MemoizedHDP` (no moves, no
    memo). The bound reported after each pass is the exact bound of the current globals with
    every document's local step recomputed (one extra pass, not counted as a step).

    :param int threads: the most intra-op threads of the local steps; each fit times one against this many
        and keeps the faster (:class:`~pyro_memo.engine.ThreadPolicy`). ``None``: torch's setting.
    """

    def __init__(self, K=100, kappa=0.5, delay=10.0, alpha=0.5, gamma=10.0, lam0=0.1, laps=50, local_iters=100,
                 local_tol=1e-3, seed=0, dtype=torch.float64, device=None, init="kmeans", moves=(), threads=None):
        if moves:
            raise ValueError("StochasticHDP takes no moves")
        self.set_model(K, alpha, gamma, lam0, local_iters, local_tol, dtype, device, init)
        super().__init__(laps=laps, kappa=kappa, delay=delay, seed=seed, threads=threads)

    def fresh_local_step(self, posterior, batch):
        local, summary, _ = self.document_step(posterior, batch)
        return local, summary

    def step(self, state, summary, scale, rate):
        """:math:`\\lambda \\leftarrow (1 - \\rho_t)\\lambda + \\rho_t(\\lambda_0 + \\frac{D}{|B|} S_B)` (the
        natural-gradient step of the conjugate topics) and the sticks' ``(rho, omega)`` the same
        step toward those optimal for the scaled batch summary (the convex step bnpy takes for
        the non-conjugate sticks)."""
        post = state.posterior
        scaled = summary.scaled(scale, round(summary.num_docs * scale))
        lam = (1 - rate) * post.lam + rate * (post.lam0 + scaled.word_counts)
        rho, omega = optimize_sticks(post.rho, post.omega, scaled.num_docs, scaled.sum_log_pi, post.alpha,
                                     post.gamma)
        state.posterior = HDPPosterior(lam, (1 - rate) * post.rho + rate * rho,
                                       (1 - rate) * post.omega + rate * omega, post.alpha, post.gamma, post.lam0)
