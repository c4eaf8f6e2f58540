"""Memoized online variational inference for DP mixtures (paper 000 §3, Alg. 1)."""

import time

import numpy as np
import torch

from ..allocation import DPSticks
from ..data_sources import make_batches
from ..summaries import Summary
from .dp_mixture_posterior import DPMixturePosterior
from .full_batch_vb import FitResult
from .initialization import initial_responsibilities
from .summary_cache import SummaryCache


class MemoizedVB:
    """Memoized coordinate ascent over fixed data batches.

    For each batch ``b`` in a random order each lap: the exact local step on ``b``
    (paper 000 eq. 9), the memo update :math:`S \\leftarrow S - S^b_{old} + S^b_{new}`
    (eq. 11) and the closed-form global update from the whole-data summary (eq. 10).
    From the end of the first lap the total is the summary of the whole data, the ELBO
    (eq. 8) is exact and no batch step can lower it. With one batch this is
    :class:`~pyro_memo.inference.FullBatchVB`.

    :param family: a :class:`~pyro_memo.families.ConjugateFamily`.
    :param int K: truncation level.
    :param float alpha: DP concentration.
    :param str truncation: ``"nested"`` or ``"direct"``.
    :param int laps: maximum number of passes through the data.
    :param float tol: stop when the exact ELBO's relative change over a lap is below this.
    :param str init: ``"kmeans++"`` or ``"random"`` responsibilities for the initial globals.
    :param int init_items: initialise from the first batches (in lap-1 order) holding at
        least this many items.
    :param int seed: seeds the initialisation and the batch order.
    :param bool shuffle: visit batches in a new random order every lap (else in order).
    :param bool record_batch_elbos: compute the exact ELBO after every batch step once the
        memo is complete (for checks; costs one ELBO evaluation per batch).
    """

    def __init__(self, family, K, alpha=1.0, truncation="nested", laps=50, tol=1e-8, init="kmeans++",
                 init_items=10_000, seed=0, shuffle=True, record_batch_elbos=False):
        if int(K) < 1:
            raise ValueError(f"K must be a positive integer; got {K}")
        if int(laps) < 1:
            raise ValueError(f"laps must be a positive integer; got {laps}")
        self.family = family
        self.sticks = DPSticks(alpha, truncation)
        self.K = int(K)
        self.laps = int(laps)
        self.tol = float(tol)
        self.init = init
        self.init_items = int(init_items)
        self.seed = seed
        self.shuffle = shuffle
        self.record_batch_elbos = record_batch_elbos

    # ----------------------------------------------------------------- setup
    def _batch(self, source, b):
        x = source.batch(b)
        return self.family.check_data(x if torch.is_tensor(x) else np.asarray(x))

    def initial_posterior(self, source, order):
        """Globals fitted to initial responsibilities on the first batches of ``order``."""
        parts, count = [], 0
        for b in order:
            parts.append(self._batch(source, b))
            count += parts[-1].shape[0]
            if count >= self.init_items:
                break
        x = torch.cat(parts)
        resp = initial_responsibilities(x, self.K, self.init, self.seed)
        summary = Summary.from_responsibilities(self.family, x, resp)
        return DPMixturePosterior.from_summary(self.family, self.sticks, summary)

    def _order(self, rng, num_batches):
        return rng.permutation(num_batches) if self.shuffle else np.arange(num_batches)

    # ------------------------------------------------------------------- fit
    def fit(self, data, num_batches=None, posterior=None, state=None, callback=None):
        """Run memoized inference.

        :param data: anything :func:`~pyro_memo.data_sources.make_batches` accepts.
        :param int num_batches: ``B`` for array and file data.
        :param posterior: optional starting :class:`DPMixturePosterior`.
        :param MemoState state: resume from a saved state (see :meth:`MemoState.load`).
        :param callback: optional ``callback(lap, elbo, posterior)`` after every lap.
        :rtype: FitResult (with ``lap_seconds``, ``state`` and ``batch_elbos``)
        """
        source = make_batches(data, num_batches or 1)
        if state is None:
            state = MemoState(rng=np.random.default_rng(self.seed))
        if state.posterior is None:
            first_order = self._order(np.random.default_rng(self.seed), source.num_batches)
            state.posterior = posterior if posterior is not None else self.initial_posterior(source, first_order)
        result = FitResult(state.posterior, state.cache.total, state=state)
        start = time.perf_counter()
        for _ in range(self.laps - state.laps_done):
            lap_start = time.perf_counter()
            self.lap(source, state, result.batch_elbos)
            elbo = float(state.posterior.elbo(state.cache.total))
            if elbo != elbo:
                raise FloatingPointError(f"the ELBO became NaN in lap {state.laps_done}")
            state.elbo_trace.append(elbo)
            state.lap_seconds.append(time.perf_counter() - lap_start)
            if callback is not None:
                callback(state.laps_done - 1, elbo, state.posterior)
            trace = state.elbo_trace
            if len(trace) >= 2 and abs(trace[-1] - trace[-2]) <= self.tol * abs(trace[-2]):
                result.converged = True
                break
        result.posterior, result.summary = state.posterior, state.cache.total
        result.elbo_trace, result.lap_seconds = list(state.elbo_trace), list(state.lap_seconds)
        result.seconds = time.perf_counter() - start
        return result

    def lap(self, source, state, batch_elbos=None):
        """One pass over all batches in a (random) order; updates ``state`` in place."""
        order = self._order(state.rng, source.num_batches)
        post, cache = state.posterior, state.cache
        for b in order:
            x = self._batch(source, int(b))
            _, summary = post.local_step(x)
            cache.replace(int(b), summary)
            post.update(cache.total)
            if batch_elbos is not None and self.record_batch_elbos and len(cache) == source.num_batches:
                batch_elbos.append(float(post.elbo(cache.total)))
        state.laps_done += 1


class MemoState:
    """Everything memoized inference needs to resume: globals, memo, RNG, traces.

    :ivar posterior: the current :class:`DPMixturePosterior` (``None`` before init).
    :ivar cache: the :class:`SummaryCache`.
    :ivar rng: numpy generator of the batch order.
    """

    def __init__(self, posterior=None, cache=None, rng=None, laps_done=0, elbo_trace=None, lap_seconds=None):
        self.posterior = posterior
        self.cache = cache if cache is not None else SummaryCache()
        self.rng = rng if rng is not None else np.random.default_rng(0)
        self.laps_done = laps_done
        self.elbo_trace = list(elbo_trace or [])
        self.lap_seconds = list(lap_seconds or [])
