"""The relational comparison task: every method fitted to a graph with 10% of its pairs held out
(:func:`~pyro_memo.data.split_pairs`) and scored alike by held-out link AUC and
log-likelihood per pair (:func:`~pyro_memo.relational.link_prediction`), NMI of the dominant
memberships against the graph's labels when it has them, and its communities."""

import math

from ..data.graphs import Graph, split_pairs
from ..metrics import effective_k, nmi
from ..relational import link_prediction
from .harness import Budget, Table, Task, check_batches, check_instance, run_comparison
from .relational_methods import RELATIONAL_METHODS, RelationalRun, RelationalSettings, check_optional_methods

#: columns of the per-run table
RELATIONAL_COLUMNS = ("method", "seed", "laps", "seconds", "bound", "heldout_auc", "heldout_log_lik", "nmi",
                      "effective_communities")

#: what the relational task writes
RELATIONAL_TABLE = Table(columns=RELATIONAL_COLUMNS, integers=("seed", "effective_communities"),
                         trace=(("laps", "laps"), ("seconds", "seconds"), ("bound", "bound"), ("K", "K")),
                         run_type=RelationalRun, progress="laps", objective="bound", objective_label="bound (nats)",
                         final="heldout_auc", final_label="held-out link AUC",
                         k_label="communities (dominant for some node)")


class RelationalTask(Task):
    """A graph split into training pairs and held-out pairs; methods from
    :data:`~pyro_memo.comparison.RELATIONAL_METHODS`, runners
    ``(train graph, budget, settings, seed) -> RelationalRun``.

    :param Graph graph: the whole graph (its ``labels``, when present, give the NMI column).
    :param Budget budget: passes and/or ``seconds`` per run.
    :param RelationalSettings settings: truncation, batches, hyperparameters shared by all methods.
    :param float heldout: fraction of the links held out, with as many non-links (seed ``split_seed``).
    """

    table = RELATIONAL_TABLE
    methods = RELATIONAL_METHODS
    noun = "relational methods"

    def __init__(self, graph, budget, settings, heldout=0.1, split_seed=0):
        if not isinstance(graph, Graph):
            raise TypeError(f"graph must be a pyro_memo.data.Graph; got {type(graph).__name__}")
        check_instance(budget, Budget, "budget")
        check_instance(settings, RelationalSettings, "settings")
        check_batches(settings, graph.num_nodes, "nodes")
        self.graph, self.budget, self.settings = graph, budget, settings
        self.train, self.pairs, self.labels = split_pairs(graph, heldout, split_seed)

    @classmethod
    def check_methods(cls, methods):
        """:meth:`Task.check_methods`, and an ImportError naming what to install for a reference detector whose
        library is missing (networkx, graph-tool), before any method runs."""
        super().check_methods(methods)
        check_optional_methods(methods)

    def run(self, method, seed):
        return self.methods[method](self.train, self.budget, self.settings, seed)

    def score(self, run):
        scores = link_prediction(run.posterior, self.pairs, self.labels)
        dominant = run.posterior.memberships().argmax(1).cpu().numpy()
        truth = self.graph.labels
        return {"laps": run.laps[-1], "seconds": run.seconds[-1], "bound": run.bound[-1], "heldout_auc": scores["auc"],
                "heldout_log_lik": scores["log_lik"], "nmi": math.nan if truth is None else nmi(truth, dominant),
                "effective_communities": effective_k(dominant)}

    def describe(self, row):
        return (f"held-out AUC {row['heldout_auc']:.4f}, log-lik {row['heldout_log_lik']:.4f} per pair, "
                f"{row['effective_communities']} communities")


def compare_relational(graph, methods, seeds=(0,), budget=None, settings=None, out_dir=None, progress=None,
                       heldout=0.1):
    """Run every relational method with every seed on ``graph`` less its held-out pairs and score each
    alike (:class:`RelationalTask` through :func:`~pyro_memo.comparison.run_comparison`).

    :param Graph graph: the whole graph.
    :param methods: names from :data:`~pyro_memo.comparison.RELATIONAL_METHODS`.
    :param seeds: seeds; each method runs once per seed.
    :param Budget budget: passes and/or seconds per run (default 20 passes).
    :param RelationalSettings settings: shared truncation, batches and hyperparameters.
    :param str out_dir: if given, ``runs.csv``, ``runs.md``, ``summary.md``, ``traces.csv`` and the plots.
    :param progress: optional ``progress(message)`` called as runs finish; returning ``True`` ends the
        comparison after that run.
    :param float heldout: fraction of the links held out (with as many non-links), split with seed 0.
    :returns: ``(rows, runs)``: one dict per run (:data:`RELATIONAL_COLUMNS`) and the runs by ``(method, seed)``.
    """
    RelationalTask.check_methods(methods)
    task = RelationalTask(graph, Budget() if budget is None else budget,
                          RelationalSettings() if settings is None else settings, heldout)
    return run_comparison(task, methods, seeds, out_dir, progress)
