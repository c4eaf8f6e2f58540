"""Full-dataset coordinate-ascent variational inference (Blei & Jordan 2006 §3; Hughes &
Sudderth 2013 §2.2): the memoized driver with one batch holding all the data."""

from ..summaries import Summary
from .dp_mixture_posterior import DPMixturePosterior
from .initialization import initial_responsibilities
from .memoized_vb import FitResult, MemoizedVB  # noqa: F401  (FitResult re-exported)


class FullBatchVB(MemoizedVB):
    """Coordinate ascent on the exact ELBO over all data at once.

    Each iteration runs three exact coordinate steps, none of which can lower the
    ELBO: local assignments (Hughes & Sudderth 2013, eq. 9), component posteriors and stick
    posteriors (eq. 10). It is :class:`~pyro_memo.inference.MemoizedVB` with a single batch
    (the one driver, :class:`~pyro_memo.engine.MemoizedDriver`), started from responsibilities
    of all the data.

    :param family: a :class:`~pyro_memo.families.ConjugateFamily` (its prior included).
    :param int K: truncation level.
    :param float alpha: DP concentration.
    :param str truncation: ``"nested"`` or ``"direct"``.
    :param int max_iter: iteration limit.
    :param float tol: stop when the ELBO's relative change is below this.
    :param str init: ``"kmeans++"`` or ``"random"`` initial responsibilities.
    :param int seed: seed of the initialisation.
    :param bool record_steps: keep the ELBO after every coordinate step.
    """

    def __init__(self, family, K, alpha=1.0, truncation="nested", max_iter=200, tol=1e-8,
                 init="kmeans++", seed=0, record_steps=False):
        super().__init__(family, K, alpha, truncation, laps=max_iter, tol=tol, init=init, seed=seed, shuffle=False)
        self.max_iter = self.laps
        self.record_steps = record_steps
        self._step_elbos = []

    def initial_posterior(self, x, order=None):
        """Globals fitted to initial responsibilities of all of ``x`` (see :mod:`.initialization`)."""
        resp = initial_responsibilities(x, self.K, self.init, self.seed)
        summary = Summary.from_responsibilities(self.family, x, resp)
        return DPMixturePosterior.from_summary(self.family, self.sticks, summary)

    def local_step(self, state, key, batch):
        """The local step; with ``record_steps`` also the two global blocks one at a time, keeping
        the ELBO after each of the three coordinate steps."""
        resp, summary = state.posterior.local_step(batch)
        if self.record_steps:
            post = state.posterior
            self._step_elbos.append(float(post.elbo(summary)))
            post.update_components(summary)
            self._step_elbos.append(float(post.elbo(summary)))
            post.update_sticks(summary)
            self._step_elbos.append(float(post.elbo(summary)))
        return resp, summary

    def fit(self, x, posterior=None, callback=None):
        """Run coordinate ascent on data ``x``.

        :param x: ``(N, D)`` data (validated by the family).
        :param posterior: optional starting :class:`DPMixturePosterior`.
        :param callback: optional ``callback(iteration, elbo, posterior)``; returning ``True`` stops the fit.
        :rtype: FitResult
        """
        x = self.family.check_data(x)
        self._step_elbos = []
        result = super().fit(x, 1, posterior=posterior if posterior is not None else self.initial_posterior(x),
                             callback=callback)
        result.step_elbos = self._step_elbos
        return result
