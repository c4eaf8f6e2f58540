"""Every method of a comparison behind one signature, scored on one objective.

A runner takes the training data, the scoring family, a :class:`Budget` and the shared
settings, and returns a :class:`Run`: a trace of (passes, seconds, exact ELBO, K) points,
final hard labels and a held-out log predictive density. The exact ELBO is Hughes & Sudderth 2013, eq. 8:
for the variational methods that of their own globals (with optimal local factors, one
extra pass for the stochastic ones); methods that end in hard assignments or point
estimates (SGA, Gibbs, scikit-learn) are scored by
:func:`~pyro_memo.inference.scoring.labels_elbo`, the exact ELBO of their clustering with
the optimal globals for it. Scoring time is kept out of ``seconds``.
"""

import math
import warnings
from dataclasses import dataclass, field

import torch

from ..bridge.pyro_svi import PyroSVI
from ..data_sources import make_batches
from ..inference import BlockedGibbs, CollapsedGibbs, FullBatchVB, MemoizedVB, StochasticVB
from ..inference.predictive import vb_log_predictive
from ..inference.scoring import full_data_elbo, labels_elbo, labels_posterior
from ..inference.sga import SGA
from ..metrics import effective_k
from . import clock
from .harness import Budget, check_settings

__all__ = ["METHODS", "Budget", "Run", "Settings", "labels_elbo"]


@dataclass
class Settings:
    """What every method of one comparison shares: truncation ``K``, ``batches`` per pass
    for the online methods, DP concentration ``alpha``."""

    K: int = 25
    batches: int = 20
    alpha: float = 1.0

    def __post_init__(self):
        check_settings(self)


@dataclass
class Run:
    """One method's run.

    :ivar list passes: passes through the data at each trace point.
    :ivar list seconds: the method's cumulative wall time at each point (scoring excluded).
    :ivar list elbo: exact ELBO (total nats) at each point.
    :ivar list K: components holding at least 1% of the items at each point.
    :ivar labels: ``(N,)`` final hard assignments.
    :ivar log_predictive: ``x -> (n,)`` held-out log densities of the final state.
    """

    passes: list = field(default_factory=list)
    seconds: list = field(default_factory=list)
    elbo: list = field(default_factory=list)
    K: list = field(default_factory=list)
    labels: torch.Tensor = None
    log_predictive: object = None

    def add(self, passes, seconds, elbo, labels):
        self.passes.append(float(passes))
        self.seconds.append(float(seconds))
        self.elbo.append(float(elbo))
        self.K.append(effective_k(labels))


def posterior_labels(posterior, x, chunk=20_000):
    return torch.cat([posterior.responsibilities(x[lo:lo + chunk]).argmax(-1) for lo in range(0, len(x), chunk)])


def labels_predictive(family, x, labels, alpha):
    """Held-out predictive of a hard clustering: the VB predictive of its optimal globals."""
    posterior, summary = labels_posterior(family, x, labels, alpha, by_size=False)
    return lambda x_new: vb_log_predictive(posterior, summary, x_new)


class _Clock:
    """A method's own time: wall time since start minus the scoring done in callbacks."""

    def __init__(self):
        self.start, self.scoring = clock.now(), 0.0

    def seconds(self):
        return clock.now() - self.start - self.scoring

    def score(self, fn, *args):
        start = clock.now()
        try:
            return fn(*args)
        finally:
            self.scoring += clock.now() - start


def _laps(budget):
    return max(1, math.ceil(budget.passes))


# ------------------------------------------------------------ variational
def _run_variational(method, x, family, budget, **fit_kwargs):
    run, clock, last = Run(), _Clock(), {}

    def score(lap, seconds, elbo, posterior):
        if elbo is None:
            elbo, last["summary"] = full_data_elbo(posterior, make_batches(x, 10), family)
        run.add(lap + 1, seconds, elbo, posterior_labels(posterior, x))

    def callback(lap, elbo, posterior):
        seconds = clock.seconds()
        clock.score(score, lap, seconds, elbo, posterior)
        return budget.spent(lap + 1, seconds)

    result = method.fit(x, callback=callback, **fit_kwargs)
    posterior, summary = result.posterior, last.get("summary", result.summary)
    run.labels = posterior_labels(posterior, x)
    run.log_predictive = lambda x_new: vb_log_predictive(posterior, summary, x_new)
    return run


def run_memo(x, family, budget, settings, seed, moves=False, incremental_first_lap=False, overrelax=None):
    method = MemoizedVB(family, 1 if moves else settings.K, settings.alpha, laps=_laps(budget), tol=1e-9, seed=seed,
                        moves="birth,merge,delete" if moves else (), incremental_first_lap=incremental_first_lap,
                        overrelax=overrelax)
    return _run_variational(method, x, family, budget, num_batches=settings.batches)


def run_vb(x, family, budget, settings, seed):
    method = FullBatchVB(family, settings.K, settings.alpha, max_iter=_laps(budget), tol=1e-9, seed=seed)
    return _run_variational(method, x, family, budget)


def run_stochastic(x, family, budget, settings, seed, kappa, delay):
    method = StochasticVB(family, settings.K, settings.alpha, laps=_laps(budget), kappa=kappa, delay=delay,
                          seed=seed, score=False)
    return _run_variational(method, x, family, budget, num_batches=settings.batches)


def run_pyro_svi(x, family, budget, settings, seed, loss="TraceEnum_ELBO", lr=0.01):
    method = PyroSVI(family, settings.K, settings.alpha, loss=loss, lr=lr, laps=_laps(budget), seed=seed,
                     score=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return _run_variational(method, x, family, budget, num_batches=settings.batches)


# ------------------------------------------------------------ hard-label methods
def _finish_labels(run, family, x, labels, alpha):
    run.labels = torch.as_tensor(labels).long()
    run.log_predictive = labels_predictive(family, x, run.labels, alpha)
    return run


def run_sga(x, family, budget, settings, seed, variant="sga+f", step=None):
    n = x.shape[0]
    batch_size = max(1, n // settings.batches)
    step = step if step is not None else (0.1 if variant == "sga+f" else 0.01)
    sga = SGA(K=settings.K, variant=variant, step=step, alpha=settings.alpha, batch_size=batch_size,
              iterations=max(1, math.ceil(budget.passes * n / batch_size)), seed=seed)
    run, clock = Run(), _Clock()

    def callback(it, means, v):
        passes, seconds = (it + 1) * batch_size / n, clock.seconds()
        whole = int(passes + 1e-9) > int(it * batch_size / n + 1e-9)
        if whole or budget.spent(passes, seconds):
            def score():
                labels = sga.assign(x, means, v, sga.variance_)
                run.add(passes, seconds, labels_elbo(family, x, labels, settings.alpha), labels)

            clock.score(score)
        return budget.spent(passes, seconds)

    result = sga.fit(x, callback=callback)
    return _finish_labels(run, family, x, result.labels, settings.alpha)


def run_gibbs(x, family, budget, settings, seed, kind="collapsed"):
    sweeps = _laps(budget)
    if kind == "collapsed":
        sampler = CollapsedGibbs(family, settings.alpha, sweeps=sweeps, burn_in=sweeps // 2,
                                 init_K=min(settings.K, x.shape[0]), seed=seed)
    else:
        sampler = BlockedGibbs(family, T=settings.K, alpha=settings.alpha, sweeps=sweeps, burn_in=sweeps // 2,
                               init_K=min(settings.K, x.shape[0]), seed=seed)
    run, clock = Run(), _Clock()

    def callback(sweep, labels):
        seconds = clock.seconds()
        clock.score(lambda: run.add(sweep + 1, seconds, labels_elbo(family, x, labels, settings.alpha), labels))
        # stop on time only once samples are being kept
        return budget.spent(sweep + 1, seconds) and sweep >= sampler.burn_in

    result = sampler.fit(x, callback=callback)
    run.labels = torch.as_tensor(result.labels).long()
    run.log_predictive = result.log_predictive
    return run


def run_sklearn(x, family, budget, settings, seed):
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.mixture import BayesianGaussianMixture

    covariance = "diag" if family.name == "diag-gauss" else "full"
    bgm = BayesianGaussianMixture(n_components=settings.K, covariance_type=covariance,
                                  weight_concentration_prior_type="dirichlet_process",
                                  weight_concentration_prior=settings.alpha, max_iter=1, warm_start=True,
                                  init_params="k-means++", random_state=seed)
    xn, run, spent, it = x.cpu().numpy(), Run(), 0.0, 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        while True:
            start = clock.now()
            bgm.fit(xn)
            spent += clock.now() - start
            it += 1
            labels = torch.as_tensor(bgm.predict(xn))
            run.add(it, spent, labels_elbo(family, x, labels, settings.alpha), labels)
            if budget.spent(it, spent):
                break
    return _finish_labels(run, family, x, labels, settings.alpha)


def _stochastic(kappa, delay):
    return lambda x, f, b, s, seed: run_stochastic(x, f, b, s, seed, kappa, delay)


#: method name -> runner ``(x, family, budget, settings, seed) -> Run``
METHODS = {
    "memo": run_memo,
    "memo-moves": lambda x, f, b, s, seed: run_memo(x, f, b, s, seed, moves=True),
    "memo-incremental": lambda x, f, b, s, seed: run_memo(x, f, b, s, seed, incremental_first_lap=True),
    "memo-exact": lambda x, f, b, s, seed: run_memo(x, f, b, s, seed, overrelax=False),
    "vb": run_vb,
    "svi-k0.5-d10": _stochastic(0.5, 10.0),
    "svi-k0.5-d100": _stochastic(0.5, 100.0),
    "svi-k0.9-d10": _stochastic(0.9, 10.0),
    "pyro-svi": run_pyro_svi,
    "pyro-svi-trace": lambda x, f, b, s, seed: run_pyro_svi(x, f, b, s, seed, loss="Trace_ELBO", lr=0.003),
    "sga": lambda x, f, b, s, seed: run_sga(x, f, b, s, seed, "sga"),
    "sga+m": lambda x, f, b, s, seed: run_sga(x, f, b, s, seed, "sga+m"),
    "sga+f": lambda x, f, b, s, seed: run_sga(x, f, b, s, seed, "sga+f"),
    "gibbs-collapsed": run_gibbs,
    "gibbs-blocked": lambda x, f, b, s, seed: run_gibbs(x, f, b, s, seed, "blocked"),
    "sklearn-bgm": run_sklearn,
}
