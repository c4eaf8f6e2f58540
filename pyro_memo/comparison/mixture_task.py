"""The DP-mixture comparison task: every method scored on the exact DP-mixture ELBO
(Hughes & Sudderth 2013, eq. 8), the held-out log predictive density, NMI, Hungarian
accuracy and effective K."""

import numbers

import numpy as np
import torch

from ..checks import as_rng
from ..families import ConjugateFamily, get_family
from ..metrics import _labels, effective_k, hungarian_accuracy, nmi
from .harness import (
    Budget,
    Table,
    Task,
    check_batches,
    check_instance,
    merge_task_outputs,
    read_task_outputs,
    run_comparison,
)
from .methods import METHODS, Run, Settings

#: columns of the per-run table
COLUMNS = ("method", "seed", "passes", "seconds", "elbo_per_item", "heldout_per_item", "nmi", "accuracy",
           "effective_k")

#: what the mixture task writes
MIXTURE_TABLE = Table(columns=COLUMNS, integers=("seed", "effective_k"),
                      trace=(("passes", "passes"), ("seconds", "seconds"), ("elbo_per_item", "elbo"), ("K", "K")),
                      run_type=Run, progress="passes", objective="elbo_per_item",
                      objective_label="exact ELBO per item", final="elbo_per_item",
                      final_label="final exact ELBO per item", k_label="components > 1% of items")


class MixtureTask(Task):
    """``(N, D)`` training data, its scoring family and optional labels and held-out items;
    methods from :data:`~pyro_memo.comparison.METHODS`, runners
    ``(x, family, budget, settings, seed) -> Run``.

    :param x: ``(N, D)`` training data (tensor or array).
    :param family: scoring family: a name (default priors from ``x``) or a
        :class:`~pyro_memo.ConjugateFamily`.
    :param labels: optional ``(N,)`` true labels for NMI and accuracy.
    :param heldout: optional ``(M, D)`` held-out items for the log predictive density.
    :param Budget budget: passes / seconds per run.
    :param Settings settings: K, batches per pass, alpha shared by all methods.
    """

    table = MIXTURE_TABLE
    methods = METHODS

    def __init__(self, x, family, labels, heldout, budget, settings):
        if isinstance(family, str):
            family = get_family(family).from_data(x)
        if not isinstance(family, ConjugateFamily):
            raise TypeError(f"family must be a family name or a ConjugateFamily; got {type(family).__name__}")
        check_instance(budget, Budget, "budget")
        check_instance(settings, Settings, "settings")
        self.family, self.budget, self.settings = family, budget, settings
        self.x = family.check_data(x)
        check_batches(settings, self.x.shape[0], "items")
        self.heldout = family.check_data(heldout) if heldout is not None else None
        labels = None if labels is None else _labels(labels, "labels")  # before any run, not at its scoring
        if labels is not None and len(labels) != self.x.shape[0]:
            raise ValueError(f"labels must have one entry per item ({self.x.shape[0]}); got {len(labels)}")
        self.labels = labels
        self.trace_scale = {"elbo": 1.0 / self.x.shape[0]}

    def run(self, method, seed):
        return self.methods[method](self.x, self.family, self.budget, self.settings, seed)

    def score(self, run):
        labelled = self.labels is not None
        return {"passes": run.passes[-1], "seconds": run.seconds[-1], "elbo_per_item": run.elbo[-1] / self.x.shape[0],
                "heldout_per_item": (float(run.log_predictive(self.heldout).mean()) if self.heldout is not None
                                     else float("nan")),
                "nmi": nmi(self.labels, run.labels) if labelled else float("nan"),
                "accuracy": hungarian_accuracy(self.labels, run.labels) if labelled else float("nan"),
                "effective_k": effective_k(run.labels)}

    def describe(self, row):
        return f"ELBO/item {row['elbo_per_item']:.4f}, K {row['effective_k']}"


def compare(x, methods, seeds=(0, 1, 2), family="gauss", labels=None, heldout=None, budget=None, settings=None,
            out_dir=None, progress=None):
    """Run every DP-mixture method with every seed on ``x`` and score them alike
    (:class:`MixtureTask` through :func:`~pyro_memo.comparison.run_comparison`).

    :param x: ``(N, D)`` training data (tensor or array).
    :param methods: names from :data:`~pyro_memo.comparison.METHODS`.
    :param seeds: seeds; each method runs once per seed.
    :param family: scoring family: a name (default priors from ``x``) or a
        :class:`~pyro_memo.ConjugateFamily`.
    :param labels: optional ``(N,)`` true labels for NMI and accuracy.
    :param heldout: optional ``(M, D)`` held-out items for the log predictive density.
    :param Budget budget: passes / seconds per run (default 20 passes).
    :param Settings settings: K, batches per pass, alpha shared by all methods.
    :param str out_dir: if given, write ``runs.csv``, ``runs.md``, ``summary.md``,
        ``traces.csv`` there after every run, and the plots at the end.
    :param progress: optional ``progress(message)`` called as runs finish; returning ``True`` ends the
        comparison after that run.
    :returns: ``(rows, runs)``: one dict per run (:data:`COLUMNS`) and the
        :class:`~pyro_memo.comparison.methods.Run` objects keyed by ``(method, seed)``.
    """
    MixtureTask.check_methods(methods)
    task = MixtureTask(x, family, labels, heldout, Budget() if budget is None else budget,
                       Settings() if settings is None else settings)
    return run_comparison(task, methods, seeds, out_dir, progress)


def load_array_split(x, labels=None, heldout_fraction=0.0, seed=0):
    """Split ``x`` (and ``labels``) into training and held-out parts by a seeded permutation.

    :raises ValueError: for a ``heldout_fraction`` that is not a number in ``[0, 1)`` or a bad ``seed``.
    """
    x = torch.as_tensor(np.asarray(x) if not torch.is_tensor(x) else x)
    n = x.shape[0]
    if isinstance(heldout_fraction, bool) or not isinstance(heldout_fraction, numbers.Real) \
            or not 0 <= heldout_fraction < 1:
        raise ValueError(f"the held-out fraction must be a number in [0, 1); got {heldout_fraction!r}")
    rng = as_rng(seed)
    if labels is not None and len(labels) != n:
        raise ValueError(f"labels has {len(labels)} entries for the {n} rows of x")
    perm = torch.as_tensor(rng.permutation(n))
    cut = n - int(round(heldout_fraction * n))
    if cut < 1:
        raise ValueError(f"holding out {heldout_fraction} of the {n} rows leaves none to train on")
    train, test = perm[:cut], perm[cut:]
    y = None if labels is None else np.asarray(labels)[train.numpy()]
    return x[train], y, (x[test] if len(test) else None)


def read_outputs(out_dir, table=None):
    """``(rows, runs)`` read back from a comparison folder (``table`` defaults to the mixture task's;
    see ``read_task_outputs()``)."""
    return read_task_outputs(out_dir, table or MIXTURE_TABLE)


def merge_outputs(out_dir, in_dirs, table=None):
    """Combine comparison folders of one task (``table`` defaults to the mixture task's; see
    ``merge_task_outputs()``)."""
    return merge_task_outputs(out_dir, in_dirs, table or MIXTURE_TABLE)
