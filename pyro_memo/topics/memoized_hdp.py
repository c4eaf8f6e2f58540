"""Memoized online variational inference for the HDP topic model (paper 001; Hughes, Kim &
Sudderth, AISTATS 2015)."""

import time
from dataclasses import dataclass, field

import numpy as np
import torch

from ..inference.summary_cache import SummaryCache
from .corpus import Corpus
from .hdp_posterior import HDPPosterior
from .topic_birth import TopicBirthMove
from .topic_delete import TopicDeleteMove
from .topic_init import INITS, initial_topics
from .topic_merge import TopicMergeMove

#: topic moves by name, in the order their lap-end evaluations run
TOPIC_MOVES = {"birth": TopicBirthMove, "delete": TopicDeleteMove, "merge": TopicMergeMove}


def make_topic_move(move):
    """A topic move from its name (``"birth"``, ``"merge"``, ``"delete"``) or the move object itself."""
    if isinstance(move, str):
        if move not in TOPIC_MOVES:
            raise ValueError(f"unknown topic move {move!r}; available: {', '.join(TOPIC_MOVES)}")
        return TOPIC_MOVES[move]()
    return move


@dataclass
class HDPState:
    """Everything a memoized HDP fit needs to resume.

    :ivar posterior: current :class:`HDPPosterior`.
    :ivar cache: the memo, one :class:`~pyro_memo.topics.TopicSummary` per document batch.
    :ivar doc_topic_counts: batch -> ``(D_b, K)`` topic counts of the last visit, the warm
        start of the next one (``O(D K)`` numbers in all).
    :ivar tried_topics: per move, the topics it tried without success since the topics were
        last renumbered.
    :ivar steps: stochastic steps taken (:class:`~pyro_memo.topics.StochasticHDP`).
    """

    posterior: HDPPosterior = None
    cache: SummaryCache = field(default_factory=SummaryCache)
    doc_topic_counts: dict = field(default_factory=dict)
    rng: np.random.Generator = None
    laps_done: int = 0
    elbo_trace: list = field(default_factory=list)
    lap_seconds: list = field(default_factory=list)
    local_iterations: list = field(default_factory=list)
    move_log: list = field(default_factory=list)
    move_gains: list = field(default_factory=list)
    tried_topics: dict = field(default_factory=dict)
    steps: int = 0


@dataclass
class HDPFitResult:
    """Outcome of :meth:`MemoizedHDP.fit`: the posterior, the bound per lap (nats, whole
    corpus), seconds per lap, and the resumable state."""

    posterior: HDPPosterior
    elbo_trace: list
    lap_seconds: list
    state: HDPState
    converged: bool = False
    batch_elbos: list = field(default_factory=list)

    @property
    def elbo(self):
        return self.elbo_trace[-1] if self.elbo_trace else float("nan")


class MemoizedHDP:
    """Memoized coordinate ascent for the HDP topic model over fixed batches of documents.

    Each batch visit runs the document-level local step (restarted, or warm-started from the
    batch's last visit, whichever is better, so it never lowers the bound), swaps the
    batch's summary in the memo, and updates the globals from the whole-corpus summary:
    topics in closed form, top-level sticks by L-BFGS on the exact bound. From the end of lap 1 the bound is exact for
    the whole corpus and no batch step lowers it.

    :param int K: truncation (number of topics).
    :param float alpha: document-level concentration.
    :param float gamma: top-level concentration.
    :param float lam0: symmetric Dirichlet prior on topic-word distributions.
    :param int laps: maximum passes through the corpus.
    :param float tol: stop when the bound's relative change over a lap is below this.
    :param int local_iters: cap on document-level iterations per visit.
    :param float local_tol: document-level convergence threshold (mean change in counts).
    :param bool local_restart: start each visit's local step afresh (from the global
        weights) and keep it when it beats the batch's cached local parameters under the
        current globals, else continue from those; ``False``: always continue from them.
        Restarts escape the documents' local optima; both choices never lower the bound.
    :param int seed: seeds the initial topics and batch order.
    :param dtype: ``torch.float64`` (default) or ``torch.float32``.
    :param device: torch device.
    :param bool record_batch_elbos: compute the bound after every batch step once the memo
        is complete (for checks).
    :param str init: initial topics: ``"kmeans"`` (default; a k-means of the documents
        under the KL divergence, bnpy's Bregman k-means) or ``"documents"`` (``K`` random
        documents); see :mod:`pyro_memo.topics.topic_init`.
    :param bool incremental_first_lap: update the globals after every batch of the first
        lap from the partial memo. Default ``False``: the first lap runs every batch's local
        step against the initial topics and updates the globals once, when the memo is
        complete, so the initial topics are not refit to the first batch alone (on
        Wikipedia with 20 batches that refit costs about 0.1 nats/token held out).
    :param moves: ``"birth"``, ``"merge"``, ``"delete"`` (comma-separated) or move objects
        (:class:`~pyro_memo.topics.TopicBirthMove`, :class:`~pyro_memo.topics.TopicMergeMove`,
        :class:`~pyro_memo.topics.TopicDeleteMove`): topic births / merges / deletes accepted
        only when the exact bound rises (logged per lap in
        ``state.move_log``, gains in ``state.move_gains``); a fit with moves converges only
        after a lap with no accepted move.
    """

    def __init__(self, K=100, alpha=0.5, gamma=10.0, lam0=0.1, laps=50, tol=1e-6, local_iters=100,
                 local_tol=1e-3, local_restart=True, seed=0, dtype=torch.float64, device=None,
                 record_batch_elbos=False, moves=(), init="kmeans", incremental_first_lap=False):
        for name, value in (("K", K), ("laps", laps), ("local_iters", local_iters)):
            if int(value) < 1:
                raise ValueError(f"{name} must be a positive integer; got {value}")
        for name, value in (("alpha", alpha), ("gamma", gamma), ("lam0", lam0)):
            if not float(value) > 0:
                raise ValueError(f"{name} must be positive; got {value}")
        self.K, self.laps, self.local_iters = int(K), int(laps), int(local_iters)
        self.alpha, self.gamma, self.lam0 = float(alpha), float(gamma), float(lam0)
        self.tol, self.local_tol, self.local_restart = float(tol), float(local_tol), bool(local_restart)
        self.seed, self.dtype, self.device = seed, dtype, device
        self.record_batch_elbos = record_batch_elbos
        if init not in INITS:
            raise ValueError(f"init must be one of {', '.join(INITS)}; got {init!r}")
        self.init = init
        self.incremental_first_lap = bool(incremental_first_lap)
        if isinstance(moves, str):
            moves = [m.strip() for m in moves.split(",") if m.strip()]
        order = list(TOPIC_MOVES)
        self.moves = sorted((make_topic_move(m) for m in moves),
                            key=lambda m: order.index(m.name) if m.name in order else len(order))

    def initial_posterior(self, corpus):
        """Topics from :func:`~pyro_memo.topics.topic_init.initial_topics` (``self.init``),
        sticks at the prior."""
        post = HDPPosterior.prior(self.K, corpus.vocab_size, self.alpha, self.gamma, self.lam0, self.dtype,
                                  self.device)
        post.lam = initial_topics(corpus, self.K, self.lam0, self.init, self.seed, self.dtype, self.device)
        return post

    @staticmethod
    def batches(corpus, num_batches, seed=0):
        """A fixed random partition of the documents into ``num_batches`` index arrays."""
        if not 1 <= int(num_batches) <= corpus.num_docs:
            raise ValueError(f"num_batches must lie in [1, {corpus.num_docs}] (the number of documents); "
                             f"got {num_batches}")
        order = np.random.default_rng(seed).permutation(corpus.num_docs)
        return [np.sort(part) for part in np.array_split(order, int(num_batches))]

    def fit(self, corpus, num_batches=1, state=None, callback=None):
        """Run memoized inference on ``corpus``.

        :param Corpus corpus: the documents.
        :param int num_batches: ``B``.
        :param HDPState state: resume from a previous fit's state.
        :param callback: optional ``callback(lap, elbo, posterior)``; returning ``True`` stops.
        :rtype: HDPFitResult
        """
        if not isinstance(corpus, Corpus):
            raise TypeError(f"fit needs a pyro_memo.topics.Corpus; got {type(corpus).__name__}")
        batches = self.batches(corpus, num_batches, self.seed)
        tokens = [(*corpus.tokens(b, dtype=self.dtype, device=self.device), len(b)) for b in batches]
        if state is None:
            state = HDPState(rng=np.random.default_rng(self.seed))
        if state.posterior is None:
            state.posterior = self.initial_posterior(corpus)
        result = HDPFitResult(state.posterior, [], [], state)
        for _ in range(self.laps - state.laps_done):
            start = time.perf_counter()
            self.lap(tokens, state, result.batch_elbos)
            elbo = float(state.posterior.elbo(state.cache.total))
            if elbo != elbo:
                raise FloatingPointError(f"the bound became NaN in lap {state.laps_done}")
            state.elbo_trace.append(elbo)
            state.lap_seconds.append(time.perf_counter() - start)
            if callback is not None and callback(state.laps_done - 1, elbo, state.posterior) is True:
                break
            trace = state.elbo_trace
            moved = any(c["accepted"] for c in state.move_log[-1].values()) if self.moves else False
            if len(trace) >= 2 and not moved and abs(trace[-1] - trace[-2]) <= self.tol * abs(trace[-2]):
                result.converged = True
                break
        result.posterior = state.posterior
        result.elbo_trace, result.lap_seconds = list(state.elbo_trace), list(state.lap_seconds)
        return result

    def lap(self, tokens, state, batch_elbos=None):
        """One pass over the batches in a random order; updates ``state`` in place."""
        cache = state.cache
        hold_globals = state.laps_done == 0 and not self.incremental_first_lap
        for move in self.moves:
            move.start_lap(state)
        for b in state.rng.permutation(len(tokens)):
            b = int(b)
            doc, word, count, num_docs = tokens[b]
            warm = state.doc_topic_counts.get(b)
            if warm is not None and warm.shape[1] != state.posterior.K:
                warm = None
            post = state.posterior
            start = None if self.local_restart else warm
            resp, counts, summary, iters = post.local_step(doc, word, count, num_docs, init_counts=start,
                                                           max_iter=self.local_iters, tol=self.local_tol)
            old = cache.batches.get(b)
            if start is None and warm is not None and old is not None and old.K == post.K \
                    and float(post.elbo(summary)) < float(post.elbo(old)):
                # the restart is worse for this batch than its cached local parameters under the
                # current globals: continue from those instead, which cannot lower the bound
                resp, counts, summary, more = post.local_step(doc, word, count, num_docs, init_counts=warm,
                                                              max_iter=self.local_iters, tol=self.local_tol)
                iters += more
            for move in self.moves:
                move.visit_batch(state, b, tokens[b], resp, self)
            state.local_iterations.append(iters)
            state.doc_topic_counts[b] = counts
            cache.replace(b, summary)
            if hold_globals and len(cache) < len(tokens):
                continue
            state.posterior = state.posterior.updated(cache.total)
            if batch_elbos is not None and self.record_batch_elbos and len(cache) == len(tokens):
                batch_elbos.append(float(state.posterior.elbo(cache.total)))
        state.move_log.append({move.name: move.end_lap(state) for move in self.moves})
        state.laps_done += 1

