"""The stochastic driver: stochastic online variational inference written once for every model
(Hoffman, Blei, Wang & Paisley 2013; Hughes & Sudderth 2013 §2.3), the baseline memoized
inference is measured against.

Each step draws a batch (every batch once per lap, in a random order), runs its local step
afresh (nothing is memoized) and moves the globals a step :math:`\\rho_t = (t + d)^{-\\kappa}`,
``t = 1, 2, ...``, toward the optimum for the batch's summary scaled to the whole data. A
model fills in the step (:meth:`StochasticDriver.step`) and its batches and start, as for the
memoized driver.
"""

import time

from ..checks import as_non_negative_float, as_positive_float
from ..families import PRODUCT_CACHE
from .driver import Driver, FitResult


class StochasticDriver(Driver):
    """Stochastic online VI over fixed batches visited in a new random order each lap.

    The objective reported after each lap (when ``score``) is exact: the current globals with
    every batch's local step recomputed, one extra pass whose time is kept out of
    ``lap_seconds`` and ``seconds``.

    :param int laps: passes through the data.
    :param float kappa: forgetting rate :math:`\\kappa \\in [0.5, 1]`.
    :param float delay: delay :math:`d \\ge 0`.
    :param int seed: seeds the initialisation and the batch order.
    :param bool score: compute the exact objective after every lap.
    :param int threads: the most intra-op threads (see :class:`~pyro_memo.engine.driver.Driver`).
    """

    def __init__(self, laps=50, kappa=0.5, delay=10.0, seed=0, score=True, threads=None):
        super().__init__(laps=laps, seed=seed, threads=threads)
        if not 0.5 <= as_positive_float(kappa, "kappa") <= 1.0:  # a string or None named, not float()'s error
            raise ValueError(f"kappa must lie in [0.5, 1]; got {kappa}")
        delay = as_non_negative_float(delay, "delay")  # an infinite delay makes every step size 0
        self.kappa, self.delay, self.score = float(kappa), delay, bool(score)

    def rate(self, t):
        """Learning rate of step ``t`` (counted from 1): :math:`(t + d)^{-\\kappa}`."""
        return (t + self.delay) ** -self.kappa

    def fresh_local_step(self, posterior, batch):
        """A batch's local step from scratch under ``posterior``: ``(local, summary)``."""
        return posterior.local_step(batch)

    def start(self, state, source):
        """Set ``state.posterior`` to the initial globals (as the memoized driver starts)."""
        state.posterior = self.initial_posterior(source, self.first_order(source.num_batches))

    def step(self, state, summary, scale, rate):
        """Move ``state.posterior`` a step ``rate`` toward the optimum for ``summary`` scaled by
        ``scale`` (the batch blown up to the data)."""
        raise NotImplementedError

    def exact_objective(self, posterior, source):
        """``(objective, summary)``: the exact objective of ``posterior``'s globals with every
        batch's local step recomputed."""
        total = None
        for b in range(source.num_batches):
            _, part = self.fresh_local_step(posterior, self.read_batch(source, b))
            total = part if total is None else total + part
        return float(posterior.elbo(total)), total

    def resumed(self, state, source):
        """Bring the fit's own random streams to where a resumed ``state`` left them, so that it goes on as
        an uninterrupted fit would (default: nothing; the batch order's stream travels in ``state.rng``)."""

    def check_resume(self, state, source):
        """Refuse to go on from ``state`` with ``source`` when its posterior is another model's, was fitted
        to data of another shape (:meth:`~pyro_memo.engine.driver.Driver.resume_mismatch`) or in another precision
        (:meth:`~pyro_memo.engine.driver.Driver.dtype_mismatch`).

        :raises ValueError: naming the mismatch.
        """
        problem = self.resume_mismatch(state.posterior, source) or self.dtype_mismatch(state.posterior)
        if problem is not None:
            raise ValueError(f"cannot resume this state on these data: {problem} (resume a state with the model and "
                             f"data it was fitted with)")

    def fit(self, data, num_batches=None, state=None, callback=None):
        """Run stochastic VI.

        :param data: what :meth:`~pyro_memo.engine.driver.Driver.make_source` accepts.
        :param int num_batches: ``B`` for data that are not yet batched.
        :param state: resume from a previous fit's :class:`~pyro_memo.MemoState`.
        :param callback: optional ``callback(lap, objective, posterior)`` after every lap
            (``objective`` is ``None`` when not scoring); returning ``True`` stops the fit.
        :rtype: FitResult (``elbo_trace``: the exact objective after each lap when ``score``)
        """
        with self.thread_policy, PRODUCT_CACHE.scope():
            return self._fit(data, num_batches, state, callback)

    def _fit(self, data, num_batches, state, callback):
        source = self.make_source(data, num_batches)
        self.check_start(source, state)
        state = state or self.new_state()
        if state.posterior is None:
            self.start(state, source)
        else:
            self.check_resume(state, source)
            self.resumed(state, source)
        result = FitResult(state.posterior, state=state)
        start, scoring = time.perf_counter(), 0.0
        for _ in range(self.laps - state.laps_done):
            lap_start = time.perf_counter()
            for b in state.rng.permutation(source.num_batches):
                batch = self.read_batch(source, int(b))
                with self.thread_policy.step():
                    _, summary = self.fresh_local_step(state.posterior, batch)
                state.steps += 1
                self.step(state, summary, source.num_items / max(summary.item_count, 1), self.rate(state.steps))
            state.laps_done += 1
            state.lap_seconds.append(time.perf_counter() - lap_start)
            elbo = None
            if self.score:
                score_start = time.perf_counter()
                elbo, result.summary = self.exact_objective(state.posterior, source)
                if elbo != elbo:
                    raise FloatingPointError(f"the objective became NaN in lap {state.laps_done - 1}")
                state.elbo_trace.append(elbo)
                scoring += time.perf_counter() - score_start
            if callback is not None and callback(state.laps_done - 1, elbo, state.posterior) is True:
                break
        result.posterior = state.posterior
        result.elbo_trace, result.lap_seconds = list(state.elbo_trace), list(state.lap_seconds)
        result.seconds = time.perf_counter() - start - scoring
        return result
