"""Full-dataset coordinate-ascent variational inference (Blei & Jordan 2006 §3; Hughes &
Sudderth 2013 §2.2): the memoized driver with one batch holding all the data."""

from ..checks import as_positive_int
from .memoized_vb import FitResult, MemoizedVB  # noqa: F401  (FitResult re-exported)


class FullBatchVB(MemoizedVB):
    """Coordinate ascent on the exact ELBO over all data at once.

    Each iteration runs three exact coordinate steps, none of which can lower the
    ELBO: local assignments (Hughes & Sudderth 2013, eq. 9), component posteriors and stick
    posteriors (eq. 10). It is :class:`~pyro_memo.MemoizedVB` with a single batch
    (the one driver, :class:`~pyro_memo.engine.MemoizedDriver`), started where memoized and
    stochastic VB with the same seed start.

    :param family: a :class:`~pyro_memo.ConjugateFamily` (its prior included).
    :param int K: truncation level.
    :param float alpha: DP concentration.
    :param str truncation: ``"nested"`` or ``"direct"``.
    :param int max_iter: iteration limit.
    :param float tol: stop when the ELBO's relative change is below this.
    :param str init: ``"kmeans++"`` or ``"random"`` initial responsibilities.
    :param int init_items: initialise from at most this many items, chosen by ``seed``
        (``initial_items()``; the start
        :class:`~pyro_memo.MemoizedVB` and :class:`~pyro_memo.StochasticVB`
        take with the same seed).
    :param int seed: seed of the initialisation.
    :param bool record_steps: keep the ELBO after every coordinate step.
    :param alpha_prior: ``(s1, s2)``: learn the concentration, :math:`\\alpha \\sim Gamma(s_1, s_2)`
        (see :class:`~pyro_memo.MemoizedVB`).
    :param int threads: the most intra-op threads of the local steps; each fit times one against this many
        and keeps the faster (:class:`~pyro_memo.engine.ThreadPolicy`). ``None``: torch's setting.
    :param local_dtype: ``"float32"``: the local step in float32, the globals and ELBO in the
        family's dtype (see :class:`~pyro_memo.MemoizedVB`).
    :param int sparse_L: keep each item's ``sparse_L`` largest responsibilities (Hughes & Sudderth
        2016; see :class:`~pyro_memo.MemoizedVB`); ``None``: all.
    :param int sparse_candidates: search them among each item's candidates (see
        :class:`~pyro_memo.MemoizedVB`); ``None``: among all components.
    """

    #: plain coordinate ascent, the baseline memoized VB is measured against (no over-relaxed steps)
    overrelax_default = False

    def __init__(self, family, K, alpha=1.0, truncation="nested", max_iter=200, tol=1e-8,
                 init="kmeans++", seed=0, record_steps=False, init_items=10_000, alpha_prior=None,
                 local_dtype=None, threads=None, sparse_L=None, sparse_candidates=None):
        max_iter = as_positive_int(max_iter, "max_iter")  # named as the caller knows it, not as laps
        super().__init__(family, K, alpha, truncation, laps=max_iter, tol=tol, init=init, init_items=init_items,
                         seed=seed, shuffle=False, alpha_prior=alpha_prior, local_dtype=local_dtype, threads=threads,
                         sparse_L=sparse_L, sparse_candidates=sparse_candidates)
        self.max_iter = self.laps
        self.record_steps = record_steps
        self._step_elbos = []

    def local_step(self, state, key, batch):
        """The local step; with ``record_steps`` also the two global blocks one at a time, keeping
        the ELBO after each of the three coordinate steps."""
        resp, summary = super().local_step(state, key, batch)
        summary = self.memo_summary(state, summary)
        if self.record_steps:
            post = state.posterior
            self._step_elbos.append(float(post.elbo(summary)))
            post.update_components(summary)
            self._step_elbos.append(float(post.elbo(summary)))
            post.update_sticks(summary)
            self._step_elbos.append(float(post.elbo(summary)))
        return resp, summary

    def fit(self, x, posterior=None, callback=None, state=None):
        """Run coordinate ascent on data ``x``.

        :param x: ``(N, D)`` data (validated by the family).
        :param posterior: optional starting :class:`DPMixturePosterior`.
        :param state: optional :class:`~pyro_memo.MemoState` to run in (or resume from);
            its traces (``elbo_trace``, ``emptied``) grow as the fit goes.
        :param callback: optional ``callback(iteration, elbo, posterior)``; returning ``True`` stops the fit.
        :rtype: FitResult
        """
        x = self.family.check_data(x)
        self._step_elbos = []
        result = super().fit(x, 1, posterior=posterior, state=state, callback=callback)
        result.step_elbos = self._step_elbos
        return result
