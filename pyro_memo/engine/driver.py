"""The memoized driver: the lap loop written once for every model (Hughes & Sudderth 2013, Alg. 1).

A model plugs in through its :class:`~pyro_memo.posterior.VariationalPosterior` and summaries,
and a model's subclass (or a mixin shared with the stochastic driver) fills in the steps every
:class:`~pyro_memo.engine.driver.Driver` has, as scikit-learn's ``BaseMixture`` has its models fill in the
E- and M-steps: how data become batches (:meth:`Driver.make_source`), how a batch is read
(:meth:`Driver.read_batch`), the initial globals (:meth:`Driver.initial_posterior`) and,
optionally, a local step that uses the batch's cached local parameters
(:meth:`Driver.local_step`, :meth:`MemoizedDriver.memoize`).
"""

import copy
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from ..checks import as_bool, as_non_negative_float, as_positive_int, as_seed, check_callback
from ..data.batch_source import batch_digest
from ..families import PRODUCT_CACHE
from ..memo import MemoState
from ..posterior import VariationalPosterior
from .executors import Untimed, as_executor
from .moves import Move, listed_moves, move_states, restart_moves, sort_components
from .overrelax import as_overrelaxation
from .threads import ThreadPolicy

#: a component whose expected size (items, or tokens for topics) falls below this is empty
EMPTY = 1.0

#: the precisions a memoized fit's local step can run in, by name (see ``local_dtype``)
LOCAL_DTYPES = {"float32": torch.float32, "float64": torch.float64}

#: the lap schedules of :class:`MemoizedDriver` (see ``schedule``)
SCHEDULES = ("sequential", "parallel")


class ConvergenceWarning(UserWarning):
    """A fit stopped at its iteration limit before its objective converged (as scikit-learn's)."""


def as_float_dtype(value, name="dtype", also=""):
    """``value``, a name in :data:`LOCAL_DTYPES` or one of its dtypes, as a torch dtype.

    :raises ValueError: for anything else, in one line naming the option ``name`` and the choices (and
        ``also``, what else the option takes).
    """
    if value in LOCAL_DTYPES.values():
        return value
    if isinstance(value, str) and value in LOCAL_DTYPES:
        return LOCAL_DTYPES[value]
    raise ValueError(f"{name} must be one of {', '.join(LOCAL_DTYPES)}{also}; got {value!r}")


def as_local_dtype(value):
    """``local_dtype`` as a torch dtype: ``None`` (the fit's own) or :func:`as_float_dtype`'s."""
    return None if value is None else as_float_dtype(value, "local_dtype", " (or None: the fit's dtype)")


def in_dtype(value, dtype):
    """``value`` with its floating-point tensors converted to ``dtype``: a tensor, or a tuple
    (named or not) of tensors and other values, which are kept as they are."""
    if torch.is_tensor(value):
        return value.to(dtype) if value.is_floating_point() else value
    if isinstance(value, tuple):
        items = [in_dtype(v, dtype) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    return value


@dataclass
class FitResult:
    """What a fit returns, for every model and driver.

    :ivar posterior: the fitted variational posterior.
    :ivar summary: the whole-data summary it was fitted to.
    :ivar list elbo_trace: exact objective (total nats) after each iteration / lap.
    :ivar list step_elbos: exact objective after every coordinate step (full-batch VB).
    :ivar bool converged: whether the relative change fell below ``tol``.
    :ivar float seconds: wall time.
    :ivar list lap_seconds: wall time of each iteration / lap.
    :ivar list batch_elbos: exact objective after every memoized batch step (when recorded).
    :ivar state: the resumable :class:`~pyro_memo.MemoState` of a memoized fit.
    :ivar list emptied: components each lap emptied (see
        :meth:`MemoizedDriver.count_emptied <pyro_memo.engine.MemoizedDriver.count_emptied>`).
    """

    posterior: object
    summary: object = None
    elbo_trace: list = field(default_factory=list)
    step_elbos: list = field(default_factory=list)
    converged: bool = False
    seconds: float = 0.0
    lap_seconds: list = field(default_factory=list)
    batch_elbos: list = field(default_factory=list)
    state: object = None
    emptied: list = field(default_factory=list)
    #: the exact objective of ``posterior`` with its local parameters re-optimised, when a caller
    #: has computed it (:func:`~pyro_memo.fit_vb` does); ``elbo`` then reports it
    final_elbo: float = None

    @property
    def elbo(self):
        if self.final_elbo is not None:
            return self.final_elbo
        return self.elbo_trace[-1] if self.elbo_trace else float("nan")


class Driver:
    """What every driver shares: the model's steps, filled in by a model's subclass or mixin
    (how data become batches, how a batch is read, the initial globals, the local step).

    :param int laps: maximum number of passes through the data.
    :param int seed: seeds the initialisation and the batch order: a whole number in ``[0, 2**63 - 1]``, or a
        numpy ``Generator`` / ``RandomState`` to draw one from (``as_seed()``).
    :param bool shuffle: visit batches in a new random order every lap (else in order).
    :param int threads: the most intra-op threads the local steps may use; each fit times one
        thread against this many and keeps the faster (:class:`~pyro_memo.engine.ThreadPolicy`),
        and restores torch's setting when it ends. ``None`` (default): torch's setting; ``1``: one thread.
    """

    def __init__(self, laps=50, seed=0, shuffle=True, threads=None):
        self.laps = as_positive_int(laps, "laps")
        self.seed = as_seed(seed)
        self.shuffle = as_bool(shuffle, "shuffle")
        self.thread_policy = ThreadPolicy(threads)

    @property
    def threads(self):
        """The most intra-op threads a fit may use (``None``: torch's setting)."""
        return self.thread_policy.threads

    def make_source(self, data, num_batches):
        """Fixed batches of ``data``: an object with ``num_batches``, ``num_items`` and ``batch(b)``.
        The default takes such an object as it is."""
        for attribute in ("num_batches", "num_items", "batch"):
            if not hasattr(data, attribute):
                raise TypeError(f"{type(self).__name__}.fit needs a batch source with num_batches, num_items and "
                                f"batch(b); got {type(data).__name__}")
        return data

    def read_batch(self, source, b):
        """Batch ``b`` of ``source``, ready for the local step."""
        return source.batch(b)

    def initial_posterior(self, source, order):
        """The globals a fit starts from (``order``: the first lap's batch order)."""
        raise TypeError(f"{type(self).__name__} has no initialisation: pass posterior= to fit")

    def local_globals(self, state):
        """The globals the local step reads (``state.posterior``; the memoized driver's mixed
        precision reads a copy,
        :meth:`MemoizedDriver.local_globals <pyro_memo.engine.MemoizedDriver.local_globals>`)."""
        return state.posterior

    def local_step(self, state, key, batch):
        """The local step of batch ``key`` under :meth:`local_globals`: ``(local, summary)``."""
        return self.local_globals(state).local_step(batch)

    def resume_mismatch(self, posterior, source):
        """Why ``posterior`` (a resumed state's) cannot go on with ``source``, as a phrase, or ``None``;
        each model adds its checks (its posterior's class, the data's dimension)."""
        return None

    def fit_dtype(self):
        """The precision of this fit's globals, where the model sets it before the data are read: its
        ``dtype`` (``None``: it has none; a model whose family sets it says so)."""
        return getattr(self, "dtype", None)

    def dtype_mismatch(self, posterior):
        """Why ``posterior`` (a resumed state's) cannot go on in this fit's precision (:meth:`fit_dtype`), as a
        phrase, or ``None``."""
        dtype = self.fit_dtype()
        if dtype is None or posterior.dtype == dtype:
            return None
        return (f"it was fitted in {str(posterior.dtype).replace('torch.', '')}, this fit runs in "
                f"{str(dtype).replace('torch.', '')}")

    def check_start(self, source, state=None, posterior=None):
        """Refuse what a fit was given to start from, before it is read: a ``state`` that is no
        :class:`~pyro_memo.MemoState` (a path: read it with ``load_state``) or a ``posterior`` that is no
        variational posterior (:class:`TypeError`), or one this fit's model and data cannot go on from
        (:meth:`resume_mismatch`: :class:`ValueError`)."""
        if state is not None and not isinstance(state, MemoState):
            raise TypeError(f"state must be a MemoState (a fit's result.state; pyro_memo.load_state(path) reads a "
                            f"saved one); got a {type(state).__name__}")
        if posterior is None or state is not None and state.posterior is not None:  # a resumed state's own wins
            return
        if not isinstance(posterior, VariationalPosterior):
            raise TypeError(f"posterior must be a variational posterior (a fit's result.posterior); got a "
                            f"{type(posterior).__name__}")
        problem = self.resume_mismatch(posterior, source) or self.dtype_mismatch(posterior)
        if problem is not None:
            raise ValueError(f"cannot start from this posterior: {problem}")

    def new_state(self):
        """An empty :class:`~pyro_memo.MemoState` seeded by ``seed``."""
        return MemoState(rng=np.random.default_rng(self.seed))

    def order(self, rng, num_batches):
        """This lap's batch order."""
        return rng.permutation(num_batches) if self.shuffle else np.arange(num_batches)

    def first_order(self, num_batches):
        """The first lap's batch order as the initialisation sees it (from ``seed``, not the fit's generator)."""
        return self.order(np.random.default_rng(self.seed), num_batches)


class MemoizedDriver(Driver):
    """Memoized coordinate ascent over fixed batches, for any model.

    For each batch ``b`` in a random order each lap: the exact local step on ``b`` (eq. 9),
    the memo update :math:`S \\leftarrow S - S^b_{old} + S^b_{new}` (eq. 11) and the global
    update from the whole-data summary (eq. 10). From the end of the first lap the total is the
    summary of the whole data, the objective (eq. 8) is exact and no batch step can lower it.

    :param int laps: maximum number of passes through the data.
    :param float tol: stop when the exact objective's relative change over a lap is below this.
    :param int seed: seeds the initialisation and the batch order.
    :param bool shuffle: visit batches in a new random order every lap (else in order).
    :param bool record_batch_elbos: compute the exact objective after every batch step once the
        memo is complete (for checks; one evaluation per batch).
    :param moves: a list of :class:`~pyro_memo.Move` objects (subclasses also take names).
    :param bool hold_first_lap: during the first lap, run every batch's local step against the
        initial globals and update them once, when the memo is complete (the default, for every
        model: lap 1 is then full-batch VB's first iteration). ``False`` updates the globals after
        every batch from the partial memo, which refits the initial components to the first
        batches alone and empties some of them (``benchmarks/bench_memo_schedule.py``).
    :param bool sort_after_moves: after a lap with moves, reorder components by size when that
        raises the objective.
    :param local_dtype: mixed precision: ``"float32"`` runs the local step (expected
        log-likelihoods, responsibilities, the batch's summary) on a float32 copy of the globals,
        while the globals, the memo and the exact objective stay in the fit's dtype (float64):
        each batch summary is converted before it enters the memo, so the memo's add and subtract
        (eq. 11) never accumulate float32 round-off. ``None`` (default): the fit's dtype throughout.
    :param int threads: see :class:`~pyro_memo.engine.driver.Driver`.
    :param str schedule: ``"sequential"``: the globals are updated after every batch (Hughes &
        Sudderth 2013, Alg. 1); ``"parallel"``: each round of ``round_size`` batches runs its local
        steps against the same globals, then the globals are updated once from the memo. Both are
        coordinate ascent (a round's batches have disjoint local factors), so after lap 1 neither
        lowers the exact objective. ``None`` (default): the executor's (sequential in one process,
        parallel on a Dask cluster, and parallel whenever ``round_size`` is given). The result never
        depends on the executor or its workers.
    :param int round_size: batches per round of the parallel schedule (``None``: the whole lap,
        one global update per lap, as full-batch VB).
    :param overrelax: over-relaxed batch steps after its warm-up laps (by default two laps of exact steps:
        the memo is built, then refreshed once under its own globals; :mod:`~pyro_memo.engine.overrelax`,
        Salakhutdinov & Roweis 2003): each round's local steps run under globals extrapolated along the
        last round's change of the memo and are kept only when the exact objective rises, else redone
        under the exact globals, so no round lowers the objective. ``True``: an
        :class:`~pyro_memo.engine.overrelax.Overrelaxation` with its defaults; ``False``: exact steps only (Hughes &
        Sudderth 2013, Alg. 1); or an :class:`~pyro_memo.engine.overrelax.Overrelaxation`; ``None`` (default): the
        model's :attr:`overrelax_default` (``False`` here; of the memoized models only the DP mixture,
        :class:`~pyro_memo.MemoizedVB`, over-relaxes by default). Rounds whose moves visit batches (births,
        deletes) take exact steps.
    """

    #: whether :meth:`~pyro_memo.engine.driver.Driver.local_step` reads the batch's cached summary
    local_step_reads_memo = False
    #: whether a model's fits over-relax by default (``overrelax=None``; measured per model in
    #: ``benchmarks/bench_overrelax.py``)
    overrelax_default = False

    def __init__(self, laps=50, tol=1e-8, seed=0, shuffle=True, record_batch_elbos=False, moves=(),
                 hold_first_lap=True, sort_after_moves=False, local_dtype=None, threads=None, schedule=None,
                 round_size=None, overrelax=None):
        super().__init__(laps=laps, seed=seed, shuffle=shuffle, threads=threads)
        if schedule not in (None,) + SCHEDULES:
            raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)} (or None: the executor's); "
                             f"got {schedule!r}")
        if round_size is not None:  # 2.5 was truncated to 2, "2" failed in int() with Python's message
            round_size = as_positive_int(round_size, "round_size")
        if round_size is not None and schedule == "sequential":
            raise ValueError("round_size sets the rounds of the parallel schedule; the sequential schedule updates the "
                             "globals after every batch (give schedule='parallel' or no schedule)")
        self.schedule = schedule
        self.round_size = round_size
        self.tol = as_non_negative_float(tol, "tol")
        self.record_batch_elbos = record_batch_elbos
        self.moves = listed_moves(moves, names=False)
        #: each move's state as the driver was made: a fit from scratch starts its moves from it
        self.initial_move_states = move_states(self.moves)
        self.hold_first_lap = bool(hold_first_lap)
        self.sort_after_moves = bool(sort_after_moves)
        self.local_dtype = as_local_dtype(local_dtype)
        self.overrelax = as_overrelaxation(self.overrelax_default if overrelax is None else overrelax)
        self._local_globals = None
        self._returns_batch = None
        self._relax_elbo = None  # the exact objective of the current globals and memo, when known
        self._unverified = set()  # batches whose first visit in this fit is still to come (visit_digest)
        #: over-relaxed rounds proposed and kept in the last fit (each rejected one cost a second local step)
        self.relax_counts = {"proposed": 0, "accepted": 0}
        self.executor = None  # the fit's executor, while it runs

    # ------------------------------------------------------ mixed precision
    def local_globals(self, state):
        """The globals the local step reads: ``state.posterior``, or with a ``local_dtype`` other
        than the fit's its copy in that precision, made once per global update (the driver drops
        it, :meth:`globals_changed`, whenever the globals may have changed)."""
        if self.local_dtype is None or self.local_dtype == state.posterior.dtype:
            return state.posterior
        if self._local_globals is None:
            self._local_globals = state.posterior.to(dtype=self.local_dtype)
        return self._local_globals

    def globals_changed(self):
        """Drop the copy of the globals :meth:`local_globals` made."""
        self._local_globals = None

    def memo_summary(self, state, summary):
        """A batch summary in the globals' precision, ready for the memo (the same object when
        the local step ran in it)."""
        if self.local_dtype is None:
            return summary
        return summary.to(dtype=state.posterior.dtype)

    def moves_local(self, state, local):
        """A batch's local parameters in the globals' precision, as the moves read them with the
        globals (``local`` itself when the local step ran in it)."""
        if self.local_dtype is None:
            return local
        return in_dtype(local, state.posterior.dtype)

    def keep_local(self, local):
        """What of a batch's local factors its next visit starts from (a warm start kept in
        ``state.warm_starts``), or ``None`` (the default: nothing)."""
        return None

    def memoize(self, state, key, warm, summary):
        """Keep batch ``key``'s warm start (:meth:`keep_local`) and swap its summary into the memo (eq. 11)."""
        if warm is not None:
            state.warm_starts[key] = warm
        state.cache.replace(key, summary)

    # ----------------------------------------------------------- batch side
    def batch_step(self, state, key, batch):
        """Everything that runs where batch ``key`` lives: its local step under the globals,
        timed by the thread policy, the summary in the memo's precision, and each move's
        :meth:`~pyro_memo.Move.batch_terms` in ``summary.extras``, and each move's
        :meth:`~pyro_memo.Move.batch_visit`. Returns ``(local, summary, visits)``, ``visits``
        the non-``None`` visits by move name."""
        with self.thread_policy.step():
            local, summary = self.local_step(state, key, batch)
        summary = self.memo_summary(state, summary)
        if self.moves:
            local = self.moves_local(state, local)
        visits = {}
        for move in self.moves:
            terms = move.batch_terms(batch, local)
            if terms is not None:
                summary.extras[move.name] = terms
            payload = move.batch_visit(state.posterior, key, batch, local)
            if payload is not None:
                visits[move.name] = payload
        return local, summary, visits

    def visiting_moves(self):
        """The moves that visit batches on the driver (they override
        :meth:`Move.visit_batch <pyro_memo.Move.visit_batch>`)."""
        return [m for m in self.moves if type(m).visit_batch is not Move.visit_batch]

    def returns_batch(self):
        """Whether a batch step hands the batch and its local factors back to the driver (for the
        moves that visit batches there; a copy made by :meth:`for_workers` keeps the answer)."""
        return bool(self.visiting_moves()) if self._returns_batch is None else self._returns_batch

    def reader(self):
        """A copy of the driver without moves, globals, executor or thread policy, to read batches elsewhere."""
        other = copy.copy(self)
        other.moves, other._local_globals, other.thread_policy, other.executor = [], None, Untimed(), None
        other._relax_elbo = None
        return other

    def for_workers(self, state):
        """``(driver, globals)`` for a round of batch steps elsewhere (:mod:`~pyro_memo.engine.executors`):
        a copy of the driver with the light copies (:meth:`Move.for_workers <pyro_memo.Move.for_workers>`) of
        the moves that have a batch side, the local-precision copy of the globals made once, and whether moves need the
        batch and its local factors back."""
        other = self.reader()
        other.moves = [m.for_workers() for m in self.moves
                       if type(m).batch_terms is not Move.batch_terms or type(m).batch_visit is not Move.batch_visit]
        local_globals = self.local_globals(state)
        other._local_globals = None if local_globals is state.posterior else local_globals
        other._returns_batch = self.returns_batch()
        return other, state.posterior

    # ------------------------------------------------------------- resuming
    def check_resume(self, state, source):
        """Refuse to go on from ``state`` with ``source`` when they cannot belong together: a posterior
        another model's fit or data of another shape made
        (:meth:`~pyro_memo.engine.driver.Driver.resume_mismatch`), batches whose contents differ from those
        the state was fitted to (:meth:`data_digests`, where both are known), or a memo of other batches or
        other data. The state's K and hyperparameters are the fit's from then on.

        :raises ValueError: naming the mismatch.
        """
        problem = self.resume_mismatch(state.posterior, source) or self.dtype_mismatch(state.posterior)
        cached = state.cache.batches
        foreign = any(not isinstance(b, int) or not 0 <= b < source.num_batches for b in cached)
        if problem is None and cached and (len(cached) != source.num_batches or foreign):
            problem = f"its memo holds {len(cached)} batches, these data come in {source.num_batches}"
        elif problem is None and cached and state.cache.total.num_items != source.num_items:
            problem = f"it summarises {state.cache.total.num_items} items, these data hold {source.num_items}"
        digests = self.data_digests(source)
        if problem is None and state.digests and digests:
            changed = [b for b, digest in digests.items() if state.digests.get(b) != digest]
            if changed:
                problem = (f"{len(changed)} of its {len(digests)} batches (the first: batch {changed[0] + 1}) hold "
                           f"other items than it was fitted to (other data, or the same data in another order or "
                           f"split; the split follows seed=)")
        if digests:
            state.digests = digests
        if problem is not None:
            raise ValueError(f"cannot resume this state on these data: {problem} (resume a state with the model, "
                             f"data and batches it was fitted with)")

    def visit_digest(self, key, batch):
        """``batch_digest()`` of batch ``key`` as the local step reads it, on its first visit in this fit of data
        not held in memory (files, a cluster: hashed as they are read, never read an extra time), else
        ``None``."""
        return batch_digest(batch) if key in self._unverified else None

    def check_visit(self, state, source, key, digest):
        """Batch ``key``'s first visit in this fit (``digest``: :meth:`visit_digest`; ``None`` passes): it must
        hold what the state's fit read there (``state.read_digests``), else the memo and warm starts of other
        items would be mixed in; it is recorded when the state has no record.

        :raises ValueError: naming the batch, before its summary enters the memo.
        """
        self._unverified.discard(key)  # a batch that cannot be hashed is not hashed again
        if digest is None:
            return
        saved = state.read_digests.get(key)
        if saved is not None and saved != digest:
            raise ValueError(f"cannot resume this state on these data: {source.describe(key)} holds other items than "
                             f"it was fitted to (other data, or the same data in another order or split) (resume a "
                             f"state with the model, data and batches it was fitted with)")
        state.read_digests[key] = digest

    @staticmethod
    def data_digests(source):
        """Batch key -> ``batch_digest()`` of each batch of a ``source`` that
        holds its batches in memory (:attr:`~pyro_memo.data.BatchSource.held`), else ``{}`` (data read
        from files or a cluster are not read an extra time): a fit records them in its state, and
        :meth:`check_resume` compares them."""
        if not getattr(source, "held", False):
            return {}
        digests = {b: batch_digest(source.batch(b)) for b in range(source.num_batches)}
        return {} if None in digests.values() else digests

    # ---------------------------------------------------------------- fit
    def fit(self, data, num_batches=None, posterior=None, state=None, callback=None, executor=None):
        """Run memoized inference.

        :param data: what :meth:`~pyro_memo.engine.driver.Driver.make_source` accepts.
        :param int num_batches: ``B`` for data that are not yet batched.
        :param posterior: optional starting posterior (copied: the fit never changes the object given). Its own
            truncation and hyperparameters (``K``, ``alpha`` and its prior) hold, not the driver's, as a resumed
            state's do; it must be of this model and fit these data (checked as a resumed state's posterior is).
        :param MemoState state: resume from a saved state (see :func:`~pyro_memo.load_state`).
        :param callback: optional ``callback(lap, elbo, posterior)`` after every lap; returning
            ``True`` stops the fit (a budget).
        :param executor: where the local steps run: ``None`` (this process), a
            ``dask.distributed.Client`` or an :class:`~pyro_memo.engine.Executor`
            (:mod:`~pyro_memo.engine.executors`).
        :rtype: FitResult (with ``lap_seconds``, ``state`` and ``batch_elbos``)
        """
        check_callback(callback)
        self.executor = as_executor(executor)
        self.relax_counts = {"proposed": 0, "accepted": 0}
        try:
            with self.thread_policy, PRODUCT_CACHE.scope():
                return self._fit(data, num_batches, posterior, state, callback)
        finally:
            self.executor.close()
            self.executor = None

    def _fit(self, data, num_batches, posterior, state, callback):
        source = self.make_source(data, num_batches)
        self.check_start(source, state, posterior)
        if state is None:
            state = self.new_state()
        if state.posterior is None:
            state.posterior = copy.copy(posterior) if posterior is not None else \
                self.initial_posterior(source, self.first_order(source.num_batches))
            state.digests = self.data_digests(source)
        else:
            self.check_resume(state, source)
        restart_moves(self.moves, self.initial_move_states, state.move_states)
        # data not held in memory are hashed at each batch's first visit (check_visit), as are held data resumed
        # from a state that recorded them so (a fit of the same data read from a file)
        self._unverified = set(range(source.num_batches)) \
            if not getattr(source, "held", False) or state.read_digests else set()
        result = FitResult(state.posterior, state.cache.total, state=state)
        start = time.perf_counter()
        self.executor.start(self, source)
        self._run_laps(source, state, result, callback)
        result.posterior, result.summary = state.posterior, state.cache.total
        result.elbo_trace, result.lap_seconds = list(state.elbo_trace), list(state.lap_seconds)
        result.emptied = list(state.emptied)
        result.seconds = time.perf_counter() - start
        return result

    def _run_laps(self, source, state, result, callback):
        """Laps until ``laps`` are done, the objective converges or ``callback`` stops the fit. A resumed
        state that has already converged runs none: a lap more would only add round-off to its trace (a
        checkpoint written after the converged lap, then resumed, went on for 7 laps of changes below
        1e-12 relative before two laps agreed to the last bit)."""
        if state.laps_done and self.converged(state):
            result.converged = True
            return
        for _ in range(self.laps - state.laps_done):
            lap_start = time.perf_counter()
            self.lap(source, state, result.batch_elbos)
            elbo = float(state.posterior.elbo(state.cache.total))
            if elbo != elbo:
                raise FloatingPointError(f"the objective became NaN in lap {state.laps_done}")
            state.elbo_trace.append(elbo)
            state.lap_seconds.append(time.perf_counter() - lap_start)
            if callback is not None and callback(state.laps_done - 1, elbo, state.posterior) is True:
                break
            if self.converged(state):
                result.converged = True
                break

    def converged(self, state):
        """The objective changed by at most ``tol`` (relative) over the last lap, and no move was
        accepted in it or has anything left to try (:meth:`~pyro_memo.Move.converged`: a move
        that undid the lap's batch steps, as a reverted birth does, is not converged, since the lap
        left the objective where it was and the next lap redoes them), and every move ran in it (a state resumed
        with moves its last lap did not run has not converged under them)."""
        trace = state.elbo_trace
        last = state.move_log[-1] if state.move_log else {}  # a stochastic fit's state logs no moves
        moved = self.moves and (any(c["accepted"] for c in last.values()) or any(m.name not in last for m in self.moves)
                                or not all(m.converged(state) for m in self.moves))
        return len(trace) >= 2 and not moved and abs(trace[-1] - trace[-2]) <= self.tol * abs(trace[-2])

    @staticmethod
    def count_emptied(before, after):
        """Components a lap's batch steps emptied (collapse): those whose whole-data size fell
        from at least ``EMPTY`` items at the lap's start (``before``; ``None`` in the first
        lap, when every initial component counts as occupied) below it at the end (``after``),
        before the lap's moves. Deletes and merges are moves, not collapse, and are not counted."""
        occupied = torch.ones_like(after, dtype=torch.bool) if before is None else before >= EMPTY
        n = min(len(occupied), len(after))
        return int((occupied[:n] & (after[:n] < EMPTY)).sum())

    def rounds(self, order):
        """This lap's rounds of batch keys: one batch each (``"sequential"``), or ``round_size``
        batches (``"parallel"``; the whole lap when ``None``)."""
        executor = self.executor
        schedule = self.schedule or ("parallel" if self.round_size else
                                     executor.default_schedule if executor is not None else "sequential")
        keys = [int(b) for b in order]
        size = 1 if schedule == "sequential" else (self.round_size or len(keys))
        return [keys[i:i + size] for i in range(0, len(keys), size)]

    def lap(self, source, state, batch_elbos=None):
        """One pass over all batches, round by round (:meth:`rounds`); updates ``state`` in place.

        Moves join through their hooks: ``start_lap`` before the first batch, ``batch_terms``
        (kept in the batch's summary), ``batch_visit`` / ``take_visit`` and ``visit_batch`` after each
        local step, ``end_lap`` after
        the last batch (see ``pyro_memo.engine.moves``).
        """
        order = self.order(state.rng, source.num_batches)
        state.num_items = source.num_items
        state.lap_moves = {m.name: {"proposed": 0, "accepted": 0} for m in self.moves}
        hold = self.hold_first_lap and state.laps_done == 0
        for move in self.moves:
            move.start_lap(state, self)
        self.globals_changed()
        self._relax_elbo = None
        if self.moves:  # the components may have changed or been renumbered since the last step
            state.relax_step = None
        cache = state.cache
        before = cache.total.sizes if len(cache) == source.num_batches else None
        if self.executor is None:  # a lap run outside fit
            self.executor = as_executor(None)
        rounds, done = self.rounds(order), 0
        while done < len(rounds):
            if not self.overrelaxing(state, source, hold):
                self.run_round(source, state, rounds[done], hold, batch_elbos)
                done += 1
                continue
            span = self.overrelax.span(source.num_items, len(rounds))
            self.relaxed_step(source, state, rounds[done:done + span], -(-len(rounds) // span), batch_elbos)
            done += span
        state.emptied.append(self.count_emptied(before, cache.total.sizes))
        for move in self.moves:
            move.end_lap(state, self)
        self.globals_changed()
        if self.moves:
            if self.sort_after_moves:
                sort_components(state)
            state.move_states = {m.name: m.state_dict() for m in self.moves}
        state.move_log.append(state.lap_moves)
        state.laps_done += 1

    def run_round(self, source, state, keys, hold, batch_elbos=None):
        """The batch steps of ``keys`` against the same globals (by the executor, memoized in the
        order of ``keys``), then one global update from the memo (none while ``hold`` keeps the
        first lap's globals and the memo is incomplete). When a move's visit renumbers the
        components, the globals are refitted at once and the round's remaining batches run again
        against them."""
        cache = state.cache
        self._relax_elbo = None
        visiting = self.visiting_moves()
        pending = list(keys)
        while pending:
            K, done = state.posterior.K, 0
            for key, step in self.executor.steps(self, state, source, pending):
                done += 1
                self.check_visit(state, source, key, step.digest)
                summary = step.summary
                if step.iterations:
                    state.local_iterations.extend(step.iterations)
                for move in self.moves:
                    if step.visits and move.name in step.visits:
                        summary = move.take_visit(state, key, step.visits[move.name], summary)
                for move in visiting:
                    summary = move.visit_batch(state, key, step.batch, step.local, summary)
                if visiting:
                    self.globals_changed()
                self.memoize(state, key, step.warm, summary)
                if summary.K != K:
                    break  # a move renumbered the components: refit, then run the rest again
            pending = pending[done:]
            complete = len(cache) == source.num_batches
            if hold and not complete and summary.K == state.posterior.K:
                continue  # held globals, unless a move renumbered the components they describe
            state.posterior = state.posterior.update(cache.total)
            self.globals_changed()
            if batch_elbos is not None and self.record_batch_elbos and complete \
                    and cache.num_items == source.num_items:
                batch_elbos.append(float(state.posterior.elbo(cache.total)))

    # ------------------------------------------------------- over-relaxation
    def overrelaxing(self, state, source, hold):
        """Whether this round may over-relax (:mod:`~pyro_memo.engine.overrelax`): the option is on,
        its warm-up laps are done, the memo is complete (the objective is exact) and no move visits
        batches."""
        cache = state.cache
        return (self.overrelax is not None and not hold and state.laps_done >= self.overrelax.warmup_laps
                and len(cache) == source.num_batches
                and cache.num_items == source.num_items and not self.returns_batch()
                and all(type(m).batch_visit is Move.batch_visit for m in self.moves))

    def relaxed_step(self, source, state, rounds, num_steps, batch_elbos=None):
        """One over-relaxed step over ``rounds`` (:meth:`overrelaxed_round` on all their batches), or,
        when it is not kept, their exact rounds (:meth:`run_round`); records the memo's change as the
        next step's direction. ``num_steps``: the lap's steps of this span."""
        cache = state.cache
        start = cache.total
        if self.overrelaxed_round(source, state, [key for keys in rounds for key in keys], num_steps, batch_elbos):
            return
        for keys in rounds:
            self.run_round(source, state, keys, False, batch_elbos)
        state.relax_step = cache.total - start if start.K == cache.total.K else None

    def overrelaxed_round(self, source, state, keys, num_steps=None, batch_elbos=None):
        """The batch steps of ``keys`` under globals extrapolated along the last step's change
        (:meth:`~pyro_memo.engine.overrelax.Overrelaxation.proposal`), kept with the globals optimal for the new
        memo when the exact objective does not fall (Salakhutdinov & Roweis 2003). Returns whether
        they were kept; if not (also when there is nothing to extrapolate), the caller takes the exact
        steps. Updates the factor ``MemoState.relax`` (capped by ``num_steps``, the lap's steps;
        default: its batches)."""
        relax, cache, exact = self.overrelax, state.cache, state.posterior
        omega, step = state.relax, state.relax_step
        num_steps = source.num_batches if num_steps is None else num_steps
        if omega <= 1.0 or step is None or step.K != cache.total.K:
            state.relax = relax.after(omega, None, num_steps)
            return False
        proposal = relax.proposal(exact, cache.total, step, omega)
        if proposal is None:
            return False
        before = self._relax_elbo if self._relax_elbo is not None else exact.optimal_bound(cache.total)[0]
        self.relax_counts["proposed"] += 1
        state.posterior = proposal
        self.globals_changed()
        try:
            steps = list(self.executor.steps(self, state, source, list(keys)))
        finally:
            state.posterior = exact
            self.globals_changed()
        for key, batch_step in steps:
            self.check_visit(state, source, key, batch_step.digest)
        summaries = {key: batch_step.summary for key, batch_step in steps}
        total = cache.total_with_all(summaries)
        after, candidate = exact.optimal_bound(total)
        accepted = after >= before  # False for NaN
        state.relax = relax.after(omega, accepted, num_steps)
        if not accepted:
            return False
        self.relax_counts["accepted"] += 1
        for key, batch_step in steps:
            if batch_step.iterations:
                state.local_iterations.extend(batch_step.iterations)
            if batch_step.warm is not None:
                state.warm_starts[key] = batch_step.warm
        state.relax_step, self._relax_elbo = total - cache.total, after
        cache.swap(summaries, total)
        state.posterior = candidate
        self.globals_changed()
        if batch_elbos is not None and self.record_batch_elbos:
            batch_elbos.append(float(candidate.elbo(total)))  # as the exact steps record it
        return True
