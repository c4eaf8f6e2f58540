"""Stochastic online natural-gradient variational inference for DP mixtures (paper 000 §2.3)."""

__all__ = ["PAPER_SCHEDULES", "StochasticVB", "full_data_elbo"]

import time

import numpy as np

from ..allocation import DPSticks
from ..data_sources import make_batches
from .dp_mixture_posterior import DPMixturePosterior
from .full_batch_vb import FitResult
from .initialization import initial_summary
from .scoring import full_data_elbo

#: the three learning-rate schedules of paper 000 §4: ``(kappa, delay)``
PAPER_SCHEDULES = ((0.5, 10.0), (0.5, 100.0), (0.9, 10.0))


class StochasticVB:
    """Stochastic variational inference (Hoffman et al. 2013; paper 000 §2.3, eq. 6–7).

    After the local step on batch ``b`` the global natural parameters move a step
    :math:`\\rho_t = (t + d)^{-\\kappa}` towards the optimum for the batch scaled to the
    data, :math:`\\lambda_0 + \\frac{N}{|b|} s^b(x)`. Every conjugate posterior here (and the
    stick posteriors) has natural parameters affine in the summary, so the step is taken on
    an *effective summary* :math:`\\bar S \\leftarrow (1-\\rho_t)\\bar S + \\rho_t \\frac{N}{|b|}S^b`
    whose optimal globals are exactly the stepped natural parameters.

    The ELBO trace is exact: after each lap :func:`full_data_elbo` scores the current
    globals with a full pass (its time is kept out of ``lap_seconds``).

    :param family: a :class:`~pyro_memo.families.ConjugateFamily`.
    :param int K: truncation level.
    :param float alpha: DP concentration.
    :param str truncation: ``"nested"`` or ``"direct"``.
    :param int laps: passes through the data.
    :param float kappa: forgetting rate :math:`\\kappa \\in (0.5, 1]` (0.5 allowed, as in the paper).
    :param float delay: delay :math:`d \\ge 0`.
    :param str init: ``"kmeans++"`` or ``"random"`` initial responsibilities.
    :param int init_items: initialise from the first batches holding at least this many items.
    :param int seed: seeds the initialisation and the batch order.
    :param bool score: compute the exact ELBO after every lap (one extra pass each).
    """

    def __init__(self, family, K, alpha=1.0, truncation="nested", laps=50, kappa=0.5, delay=10.0,
                 init="kmeans++", init_items=10_000, seed=0, score=True):
        if int(K) < 1:
            raise ValueError(f"K must be a positive integer; got {K}")
        if int(laps) < 1:
            raise ValueError(f"laps must be a positive integer; got {laps}")
        if not 0.5 <= float(kappa) <= 1.0:
            raise ValueError(f"kappa must lie in [0.5, 1]; got {kappa}")
        if float(delay) < 0:
            raise ValueError(f"delay must be non-negative; got {delay}")
        self.family = family
        self.sticks = DPSticks(alpha, truncation)
        self.K = int(K)
        self.laps = int(laps)
        self.kappa = float(kappa)
        self.delay = float(delay)
        self.init = init
        self.init_items = int(init_items)
        self.seed = seed
        self.score = score

    def rate(self, t):
        """Learning rate of update ``t`` (counted from 1): :math:`(t + d)^{-\\kappa}`."""
        return (t + self.delay) ** -self.kappa

    def fit(self, data, num_batches=None, callback=None):
        """Run stochastic VI.

        :param data: anything :func:`~pyro_memo.data_sources.make_batches` accepts.
        :param int num_batches: ``B`` for array and file data.
        :param callback: optional ``callback(lap, elbo, posterior)`` after every lap (``elbo`` is
            ``None`` when not scoring); returning ``True`` stops the fit.
        :rtype: FitResult (``elbo_trace`` holds the exact ELBO after each lap when ``score``)
        """
        source = make_batches(data, num_batches or 1)
        rng = np.random.default_rng(self.seed)
        initial, items = initial_summary(self.family, source, rng.permutation(source.num_batches), self.K,
                                         self.init, self.init_items, self.seed)
        effective = initial.scaled(source.num_items / items)  # the start as if it were the data
        posterior = DPMixturePosterior.from_summary(self.family, self.sticks, effective)
        result = FitResult(posterior, effective)
        t = 0
        start = time.perf_counter()
        scoring = 0.0
        for lap in range(self.laps):
            lap_start = time.perf_counter()
            for b in rng.permutation(source.num_batches):
                x = self.family.check_data(source.batch(int(b)))
                _, summary = posterior.local_step(x)
                t += 1
                rho = self.rate(t)
                target = summary.scaled(source.num_items / x.shape[0])
                effective = effective.scaled(1.0 - rho) + target.scaled(rho)
                posterior.update(effective)
            result.lap_seconds.append(time.perf_counter() - lap_start)
            elbo = None
            if self.score:
                score_start = time.perf_counter()
                elbo, result.summary = full_data_elbo(posterior, source, self.family)
                if elbo != elbo:
                    raise FloatingPointError(f"the ELBO became NaN in lap {lap}")
                result.elbo_trace.append(elbo)
                scoring += time.perf_counter() - score_start
            if callback is not None and callback(lap, elbo, posterior) is True:
                break
        result.posterior = posterior
        result.seconds = time.perf_counter() - start - scoring
        return result
