"""Pyro's own stochastic-gradient SVI on the DP-mixture model: the baseline memoized VB replaces."""

import time
from contextlib import contextmanager

import pyro
import pyro.util
import torch
from pyro.infer import SVI, Trace_ELBO, TraceEnum_ELBO, config_enumerate

from ..checks import as_positive_float, as_positive_int, as_seed
from ..data_sources import make_batches
from ..inference.full_batch_vb import FitResult
from ..inference.stochastic_vb import full_data_elbo
from ..models import DPMixtureModel
from .guide import DPMixtureGuide
from .recognition import tracing_draws_from_the_caller_rng

LOSSES = ("TraceEnum_ELBO", "Trace_ELBO")
#: the param-store prefix of PyroSVI's guide: a fit replaces the parameters under it, and only those
PREFIX = "pyro_memo.PyroSVI"


@contextmanager
def seeded_rngs(seed):
    """Run under ``pyro.set_rng_seed(seed)``, then put the caller's torch (CPU and any CUDA generator in
    use), ``random`` and numpy generators back as they were."""
    state = pyro.util.get_rng_state()
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []
    with torch.random.fork_rng(devices=devices):
        try:
            pyro.set_rng_seed(seed)
            yield
        finally:
            pyro.util.set_rng_state(state)


def clear_prefix(prefix):
    """Remove the param store's parameters named ``prefix.*`` (the others stay)."""
    store = pyro.get_param_store()
    for name in [n for n in store.keys() if n.startswith(prefix + ".")]:
        del store[name]


class PyroSVI:
    """``pyro.infer.SVI`` with Adam on :class:`~pyro_memo.DPMixtureModel` and
    :class:`DPMixtureGuide`, minibatches through the data plate's subsampling.

    The variational family is pyro-memo's (so every method is scored on the same exact
    ELBO): Beta sticks and conjugate component posteriors whose parameters Adam moves,
    with :math:`q(z_n)` the exact local optimum given them. ``TraceEnum_ELBO`` sums the
    assignments out; ``Trace_ELBO`` samples them (score-function gradients). After each
    epoch the globals are scored by :func:`~pyro_memo.full_data_elbo`
    (outside ``lap_seconds``).

    :param family: a :class:`~pyro_memo.ConjugateFamily`.
    :param int K: truncation level (the model is ``DPMixtureModel(T=K + 1)``: ``K`` sticks and ``K + 1``
        components).
    :param float alpha: DP concentration.
    :param str loss: ``"TraceEnum_ELBO"`` or ``"Trace_ELBO"``.
    :param float lr: Adam learning rate.
    :param int laps: epochs (passes through the data).
    :param int num_particles: particles per ELBO estimate (vectorised).
    :param str init: ``"kmeans++"`` or ``"random"`` initial responsibilities.
    :param int seed: seeds Pyro and the initialisation (the fit runs under ``pyro.set_rng_seed(seed)`` and
        then restores the caller's torch, numpy and ``random`` generators).
    :param bool score: compute the exact ELBO after every epoch.

    The guide's parameters live in Pyro's param store under ``"pyro_memo.PyroSVI.*"``; a fit replaces
    those and leaves every other parameter alone.
    """

    def __init__(self, family, K, alpha=1.0, loss="TraceEnum_ELBO", lr=0.01, laps=20, num_particles=1,
                 init="kmeans++", seed=0, score=True):
        if loss not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES}; got '{loss}'")
        self.family = family
        self.K = as_positive_int(K, "K")
        self.alpha = as_positive_float(alpha, "alpha")
        DPMixtureModel(family, T=self.K + 1, alpha=self.alpha)  # a family object (a TypeError for 'gauss')
        self.loss = loss
        self.lr = as_positive_float(lr, "lr")
        self.laps = as_positive_int(laps, "laps")
        self.num_particles = as_positive_int(num_particles, "num_particles")
        self.init = init
        self.seed = as_seed(seed)
        self.score = score

    def _svi(self, model, guide):
        if self.loss == "TraceEnum_ELBO":
            guide = config_enumerate(guide, "parallel", expand=False)
            loss = TraceEnum_ELBO(max_plate_nesting=1, num_particles=self.num_particles,
                                  vectorize_particles=self.num_particles > 1)
        else:
            loss = Trace_ELBO(max_plate_nesting=1, num_particles=self.num_particles,
                              vectorize_particles=self.num_particles > 1)
        return SVI(model, guide, pyro.optim.Adam({"lr": self.lr}), loss)

    def fit(self, data, num_batches=1, callback=None):
        """Run SVI from a fresh start: the param store's ``"pyro_memo.PyroSVI.*"`` parameters (an earlier
        fit's) are removed first; other parameters and the caller's random generators are left alone.

        :param torch.Tensor data: ``(N, D)`` data (in memory: Pyro subsamples it by index).
        :param int num_batches: minibatches per epoch (subsample size ``N // num_batches``).
        :param callback: optional ``callback(epoch, elbo, posterior)`` after every epoch (``elbo``
            is ``None`` when not scoring); returning ``True`` stops the fit.
        :rtype: FitResult (the fitted guide in ``result.guide``)
        """
        x = self.family.check_data(data)
        n = x.shape[0]
        if not 1 <= as_positive_int(num_batches, "num_batches") <= n:
            raise ValueError(f"the number of batches must be between 1 and N = {n}; got {num_batches}")
        size = n // int(num_batches)
        clear_prefix(PREFIX)
        # the model's recognition draws from the seeded stream, as it did when these seeded results were made
        with seeded_rngs(self.seed), tracing_draws_from_the_caller_rng():
            return self._run(x, n, int(num_batches), size, callback)

    def _run(self, x, n, num_batches, size, callback):
        model = DPMixtureModel(self.family, T=self.K + 1, alpha=self.alpha)
        guide = DPMixtureGuide(model, K=self.K, init=self.init, seed=self.seed, dtype=self.family.dtype,
                               prefix=PREFIX)
        guide.setup(x, subsample_size=size)
        svi = self._svi(model, guide)
        source = make_batches(x, 10) if n >= 10 else make_batches(x, 1)
        result = FitResult(guide.posterior, None)
        start, scoring = time.perf_counter(), 0.0
        for epoch in range(self.laps):
            lap_start = time.perf_counter()
            for _ in range(num_batches):
                loss = svi.step(x, subsample_size=size)
                if loss != loss:
                    raise FloatingPointError(f"Pyro SVI's loss became NaN in epoch {epoch}; lower lr (now {self.lr})")
            result.lap_seconds.append(time.perf_counter() - lap_start)
            elbo = None
            if self.score:
                score_start = time.perf_counter()
                with torch.no_grad():
                    elbo, result.summary = full_data_elbo(guide.posterior, source, self.family)
                result.elbo_trace.append(elbo)
                scoring += time.perf_counter() - score_start
            if callback is not None and callback(epoch, elbo, guide.posterior) is True:
                break
        result.posterior = guide.posterior
        result.seconds = time.perf_counter() - start - scoring
        result.guide = guide
        return result
