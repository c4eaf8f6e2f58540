"""Stochastic online natural-gradient variational inference for DP mixtures (Hughes & Sudderth 2013, §2.3)."""

__all__ = ["PAPER_SCHEDULES", "StochasticVB", "full_data_elbo"]

from ..engine import StochasticDriver
from .dp_mixture_posterior import DPMixturePosterior
from .dp_steps import DPMixtureSteps
from .scoring import full_data_elbo

#: the three learning-rate schedules of Hughes & Sudderth 2013, §4: ``(kappa, delay)``
PAPER_SCHEDULES = ((0.5, 10.0), (0.5, 100.0), (0.9, 10.0))


class StochasticVB(DPMixtureSteps, StochasticDriver):
    """Stochastic variational inference (Hoffman et al. 2013; Hughes & Sudderth 2013, §2.3, eq. 6–7).

    After the local step on batch ``b`` the global natural parameters move a step
    :math:`\\rho_t = (t + d)^{-\\kappa}` towards the optimum for the batch scaled to the
    data, :math:`\\lambda_0 + \\frac{N}{|b|} s^b(x)`. Every conjugate posterior here (and the
    stick posteriors) has natural parameters affine in the summary, so the step is taken on
    an *effective summary* :math:`\\bar S \\leftarrow (1-\\rho_t)\\bar S + \\rho_t \\frac{N}{|b|}S^b`
    whose optimal globals are exactly the stepped natural parameters.

    The ELBO trace is exact: after each lap :func:`full_data_elbo` scores the current
    globals with a full pass (its time is kept out of ``lap_seconds``).

    :param family: a :class:`~pyro_memo.ConjugateFamily`.
    :param int K: truncation level.
    :param float alpha: DP concentration.
    :param str truncation: ``"nested"`` or ``"direct"``.
    :param int laps: passes through the data.
    :param float kappa: forgetting rate :math:`\\kappa \\in [0.5, 1]`.
    :param float delay: delay :math:`d \\ge 0`.
    :param str init: ``"kmeans++"`` or ``"random"`` initial responsibilities.
    :param int init_items: initialise from at most this many items, chosen by ``seed`` whatever
        the batching (``initial_items()``), so
        :class:`~pyro_memo.MemoizedVB` with the same seed starts from the same globals.
    :param int seed: seeds the initialisation and the batch order.
    :param bool score: compute the exact ELBO after every lap (one extra pass each).
    :param int threads: the most intra-op threads of the local steps; each fit times one against this many
        and keeps the faster (:class:`~pyro_memo.engine.ThreadPolicy`). ``None``: torch's setting.
    """

    def __init__(self, family, K, alpha=1.0, truncation="nested", laps=50, kappa=0.5, delay=10.0,
                 init="kmeans++", init_items=10_000, seed=0, score=True, threads=None):
        self.set_model(family, K, alpha, truncation, init, init_items)
        super().__init__(laps=laps, kappa=kappa, delay=delay, seed=seed, score=score, threads=threads)

    def start(self, state, source):
        """Globals optimal for the initial summary (the one memoized and full-batch VB start
        from) scaled to the data, which starts the running summary."""
        initial, items = self.initial_summary(source)
        state.running = initial.scaled(source.num_items / items)  # the start as if it were the data
        state.posterior = DPMixturePosterior.from_summary(self.family, self.sticks, state.running)

    def step(self, state, summary, scale, rate):
        """The natural-gradient step on the running summary,
        :math:`\\bar S \\leftarrow (1-\\rho_t)\\bar S + \\rho_t \\frac{N}{|b|}S^b`, then its optimal globals."""
        if state.running is None:  # a state with globals but no running summary: not a stochastic fit's
            raise ValueError("cannot resume this state with StochasticVB: it holds no running summary (a memoized "
                             "fit's state, or a checkpoint written before pyro-memo saved the running summary)")
        state.running = state.running.scaled(1.0 - rate) + summary.scaled(scale).scaled(rate)
        state.posterior.update(state.running)

    def exact_objective(self, posterior, source):
        return full_data_elbo(posterior, source, self.family)
