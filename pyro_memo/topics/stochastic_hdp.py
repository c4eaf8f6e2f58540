"""Stochastic online variational inference for the HDP topic model, the baseline of
memoized inference (paper 001, "Analysis of Document Corpora": memoized versus stochastic
rates; Hoffman, Blei, Wang & Paisley 2013 for the topic step).

Each step draws a batch of documents, runs the same document-level local step as
:class:`~pyro_memo.topics.MemoizedHDP` from scratch (nothing is memoized), and moves the
globals a step :math:`\\rho_t = (t + d)^{-\\kappa}` toward the optimum of the batch scaled
to the corpus: :math:`\\lambda \\leftarrow (1 - \\rho_t)\\lambda + \\rho_t(\\lambda_0 + (D/|B|) S_B)`
(the natural-gradient step of the conjugate topics), and the sticks' ``(rho, omega)``
toward those optimal for the scaled batch summary (the convex step bnpy takes for the
non-conjugate sticks). The scaled-batch optimum is exact when the batch is the corpus.
"""

import time

from ..engine import FitResult
from .hdp_posterior import HDPPosterior
from .hdp_sticks import optimize_sticks
from .memoized_hdp import MemoizedHDP


class StochasticHDP(MemoizedHDP):
    """Stochastic online VI for the HDP topic model over fixed document batches visited in a
    random order each pass.

    :param float kappa: learning-rate decay, in (0.5, 1].
    :param float delay: learning-rate delay ``d >= 0``.

    The other parameters are those of :class:`~pyro_memo.topics.MemoizedHDP` (no moves).
    The bound reported after each pass is the exact bound of the current globals with every
    document's local step recomputed (one extra pass, not counted as a step).
    """

    def __init__(self, K=100, kappa=0.5, delay=10.0, **kwargs):
        if kwargs.get("moves"):
            raise ValueError("StochasticHDP takes no moves")
        super().__init__(K=K, **kwargs)
        if not 0.5 <= float(kappa) <= 1.0:
            raise ValueError(f"kappa must lie in [0.5, 1]; got {kappa}")
        if not float(delay) >= 0:
            raise ValueError(f"delay must be non-negative; got {delay}")
        self.kappa, self.delay = float(kappa), float(delay)

    def fit(self, corpus, num_batches=1, state=None, callback=None):
        source = self.make_source(corpus, num_batches)
        tokens = source.tokens
        state = state or self.new_state()
        if state.posterior is None:
            state.posterior = self.initial_posterior(source)
        result = FitResult(state.posterior, state=state)
        for _ in range(self.laps - state.laps_done):
            start = time.perf_counter()
            for b in state.rng.permutation(len(tokens)):
                self.step(tokens[int(b)], corpus.num_docs, state)
            state.laps_done += 1
            state.lap_seconds.append(time.perf_counter() - start)
            elbo = self.full_bound(state.posterior, tokens)
            state.elbo_trace.append(elbo)
            if callback is not None and callback(state.laps_done - 1, elbo, state.posterior) is True:
                break
        result.posterior = state.posterior
        result.elbo_trace, result.lap_seconds = list(state.elbo_trace), list(state.lap_seconds)
        return result

    def step(self, batch, num_docs_total, state):
        """One stochastic step on ``batch`` (tokens and its number of documents)."""
        doc, word, count, num_docs = batch
        post = state.posterior
        _, _, summary, iters = post.local_step(doc, word, count, num_docs, max_iter=self.local_iters,
                                               tol=self.local_tol)
        state.local_iterations.append(iters)
        scale = num_docs_total / max(num_docs, 1)
        scaled = summary.scaled(scale, num_docs_total)
        rate = (state.steps + self.delay) ** -self.kappa if state.steps + self.delay > 0 else 1.0
        state.steps += 1
        lam = (1 - rate) * post.lam + rate * (post.lam0 + scaled.word_counts)
        rho, omega = optimize_sticks(post.rho, post.omega, scaled.num_docs, scaled.sum_log_pi, post.alpha,
                                     post.gamma)
        state.posterior = HDPPosterior(lam, (1 - rate) * post.rho + rate * rho,
                                       (1 - rate) * post.omega + rate * omega, post.alpha, post.gamma, post.lam0)

    def full_bound(self, posterior, tokens):
        """The exact bound of ``posterior``'s globals with fresh local steps on every batch."""
        total = None
        for doc, word, count, num_docs in tokens:
            _, _, summary, _ = posterior.local_step(doc, word, count, num_docs, max_iter=self.local_iters,
                                                    tol=self.local_tol)
            total = summary if total is None else total + summary
        return float(posterior.elbo(total))
