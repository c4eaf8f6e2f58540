"""Full-dataset coordinate-ascent variational inference (paper 003 §3, paper 000 §2.2)."""

import time

from ..allocation import DPSticks
from ..engine import FitResult
from ..summaries import Summary
from .dp_mixture_posterior import DPMixturePosterior
from .initialization import initial_responsibilities


class FullBatchVB:
    """Coordinate ascent on the exact ELBO over all data at once.

    Each iteration runs three exact coordinate steps, none of which can lower the
    ELBO: local assignments (paper 000 eq. 9), component posteriors and stick
    posteriors (eq. 10).

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
        if int(K) < 1:
            raise ValueError(f"K must be a positive integer; got {K}")
        self.family = family
        self.sticks = DPSticks(alpha, truncation)
        self.K = int(K)
        self.max_iter = int(max_iter)
        self.tol = float(tol)
        self.init = init
        self.seed = seed
        self.record_steps = record_steps

    def initial_posterior(self, x):
        """Globals fitted to initial responsibilities (see :mod:`.initialization`)."""
        resp = initial_responsibilities(x, self.K, self.init, self.seed)
        summary = Summary.from_responsibilities(self.family, x, resp)
        return DPMixturePosterior.from_summary(self.family, self.sticks, summary)

    def fit(self, x, posterior=None, callback=None):
        """Run coordinate ascent on data ``x``.

        :param x: ``(N, D)`` data (validated by the family).
        :param posterior: optional starting :class:`DPMixturePosterior`.
        :param callback: optional ``callback(iteration, elbo, posterior)``; returning ``True`` stops the fit.
        :rtype: FitResult
        """
        start = time.perf_counter()
        x = self.family.check_data(x)
        post = posterior if posterior is not None else self.initial_posterior(x)
        result = FitResult(post, None)
        previous = None
        for it in range(self.max_iter):
            lap_start = time.perf_counter()
            _, summary = post.local_step(x)
            if self.record_steps:
                result.step_elbos.append(float(post.elbo(summary)))
            post.update_components(summary)
            if self.record_steps:
                result.step_elbos.append(float(post.elbo(summary)))
            post.update_sticks(summary)
            elbo = float(post.elbo(summary))
            if self.record_steps:
                result.step_elbos.append(elbo)
            if elbo != elbo:
                raise FloatingPointError(f"the ELBO became NaN at iteration {it}")
            result.elbo_trace.append(elbo)
            result.lap_seconds.append(time.perf_counter() - lap_start)
            result.summary = summary
            if callback is not None and callback(it, elbo, post) is True:
                break
            if previous is not None and abs(elbo - previous) <= self.tol * abs(previous):
                result.converged = True
                break
            previous = elbo
        result.seconds = time.perf_counter() - start
        return result
