"""Memoized online variational inference for DP mixtures (paper 000 §3, Alg. 1)."""

import time

import numpy as np
import torch

from ..allocation import DPSticks
from ..data_sources import make_batches
from .dp_mixture_posterior import DPMixturePosterior
from .full_batch_vb import FitResult
from .initialization import initial_summary
from .moves import make_moves, sort_components
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
    :param moves: birth / merge / delete moves: names (``"birth,merge,delete"``, see
        :data:`~pyro_memo.inference.moves.MOVES`) or :class:`~pyro_memo.inference.moves.Move`
        objects. With moves, components are also reordered by size when that raises the ELBO,
        and a fit converges only after a lap with no accepted move.
    """

    def __init__(self, family, K, alpha=1.0, truncation="nested", laps=50, tol=1e-8, init="kmeans++",
                 init_items=10_000, seed=0, shuffle=True, record_batch_elbos=False, moves=()):
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
        if isinstance(moves, str) or (moves and all(isinstance(m, str) for m in moves)):
            moves = make_moves(moves, seed=seed)
        self.moves = list(moves)
        if self.moves and truncation != "nested":
            raise ValueError("birth / merge / delete moves need the nested truncation")

    # ----------------------------------------------------------------- setup
    def _batch(self, source, b):
        x = source.batch(b)
        return self.family.check_data(x if torch.is_tensor(x) else np.asarray(x))

    def initial_posterior(self, source, order):
        """Globals fitted to initial responsibilities on the first batches of ``order``."""
        summary, _ = initial_summary(self.family, source, order, self.K, self.init, self.init_items, self.seed)
        return DPMixturePosterior.from_summary(self.family, self.sticks, summary)

    def _order(self, rng, num_batches):
        return rng.permutation(num_batches) if self.shuffle else np.arange(num_batches)

    # ------------------------------------------------------------------- fit
    def fit(self, data, num_batches=None, posterior=None, state=None, callback=None):
        """Run memoized inference.

        :param data: anything :func:`~pyro_memo.data_sources.make_batches` accepts.
        :param int num_batches: ``B`` for array and file data.
        :param posterior: optional starting :class:`DPMixturePosterior`.
        :param MemoState state: resume from a saved state (see :func:`~pyro_memo.inference.load_state`).
        :param callback: optional ``callback(lap, elbo, posterior)`` after every lap; returning
            ``True`` stops the fit (a budget).
        :rtype: FitResult (with ``lap_seconds``, ``state`` and ``batch_elbos``)
        """
        source = make_batches(data, num_batches or 1)
        if state is None:
            state = MemoState(rng=np.random.default_rng(self.seed))
        if state.posterior is None:
            first_order = self._order(np.random.default_rng(self.seed), source.num_batches)
            state.posterior = posterior if posterior is not None else self.initial_posterior(source, first_order)
        for move in self.moves:
            if move.name in state.move_states:
                move.load_state_dict(state.move_states[move.name])
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
            if callback is not None and callback(state.laps_done - 1, elbo, state.posterior) is True:
                break
            trace = state.elbo_trace
            moved = self.moves and (any(c["accepted"] for c in state.move_log[-1].values())
                                    or not all(m.converged(state) for m in self.moves))
            if len(trace) >= 2 and not moved and abs(trace[-1] - trace[-2]) <= self.tol * abs(trace[-2]):
                result.converged = True
                break
        result.posterior, result.summary = state.posterior, state.cache.total
        result.elbo_trace, result.lap_seconds = list(state.elbo_trace), list(state.lap_seconds)
        result.seconds = time.perf_counter() - start
        return result

    def lap(self, source, state, batch_elbos=None):
        """One pass over all batches in a (random) order; updates ``state`` in place.

        Moves join through their hooks: ``start_lap`` before the first batch, ``visit_batch``
        after each local step, ``end_lap`` after the last batch (see
        :mod:`pyro_memo.inference.moves`).
        """
        order = self._order(state.rng, source.num_batches)
        state.num_items = source.num_items
        state.lap_moves = {m.name: {"proposed": 0, "accepted": 0} for m in self.moves}
        for move in self.moves:
            move.start_lap(state, self)
        cache = state.cache
        for b in order:
            x = self._batch(source, int(b))
            resp, summary = state.posterior.local_step(x)
            for move in self.moves:
                summary = move.visit_batch(state, int(b), x, resp, summary)
            cache.replace(int(b), summary)
            state.posterior.update(cache.total)
            if batch_elbos is not None and self.record_batch_elbos and cache.num_items == source.num_items \
                    and len(cache) == source.num_batches:
                batch_elbos.append(float(state.posterior.elbo(cache.total)))
        for move in self.moves:
            move.end_lap(state, self)
        if self.moves:
            sort_components(state)
            state.move_states = {m.name: m.state_dict() for m in self.moves}
        state.move_log.append(state.lap_moves)
        state.laps_done += 1


class MemoState:
    """Everything memoized inference needs to resume: globals, memo, RNG, traces.

    :ivar posterior: the current :class:`DPMixturePosterior` (``None`` before init).
    :ivar cache: the :class:`SummaryCache`.
    :ivar rng: numpy generator of the batch order.
    """

    def __init__(self, posterior=None, cache=None, rng=None, laps_done=0, elbo_trace=None, lap_seconds=None,
                 move_log=None, move_gains=None, move_states=None):
        self.posterior = posterior
        self.cache = cache if cache is not None else SummaryCache()
        self.rng = rng if rng is not None else np.random.default_rng(0)
        self.laps_done = laps_done
        self.elbo_trace = list(elbo_trace or [])
        self.lap_seconds = list(lap_seconds or [])
        #: per lap, ``{move: {"proposed": n, "accepted": n}}``
        self.move_log = list(move_log or [])
        #: exact ELBO before / after every accepted merge or delete
        self.move_gains = list(move_gains or [])
        #: resumable state of each move (e.g. a created, not yet adopted birth)
        self.move_states = dict(move_states or {})
        self.lap_moves = {}
        self.num_items = 0
