"""Relational-model methods behind one signature, scored alike: memoized inference at fixed K
(``memo``), from K = 1 with births, deletes and merges (``memo-moves``), and at fixed K with its
hyperparameters learnt in the second half of its budget (``memo-eb``), the stochastic HDP
relational algorithm of Kim, Gopalan, Blei & Sudderth 2013 (``svi-hdp``), fixed-K stochastic a-MMSB
of Gopalan et al. 2012 (``svi-ammsb``), and two reference community detectors where installed:
networkx's Louvain communities (``louvain``, Blondel et al. 2008) and graph-tool's stochastic block
model (``sbm``, Peixoto 2014; :func:`run_sbm`).

A runner takes the training :class:`~pyro_memo.data.Graph` (held-out pairs marked ``missing``), a
:class:`~pyro_memo.comparison.Budget`, the shared :class:`RelationalSettings` and a seed, and returns
a :class:`RelationalRun` whose ``posterior`` has ``link_probability(pairs)`` and ``memberships()``, so
the task scores every method by the same held-out metrics.
"""

from dataclasses import dataclass, field

import numpy as np
import torch

from ..allocation.concentration import gamma_prior_pair
from ..checks import as_bool
from ..engine.driver import as_float_dtype
from ..posterior.relational import check_hyperparameters
from ..relational import MemoizedRelational
from ..relational.stochastic import StochasticAMMSB, StochasticRelational
from . import clock
from .harness import Budget, check_settings


@dataclass
class RelationalSettings:
    """What every method shares: truncation ``K``, ``batches`` of nodes per pass, the model's
    ``alpha``, ``gamma``, ``eps``, and the dtype."""

    K: int = 10
    batches: int = 1
    alpha: float = 1.0
    gamma: float = 5.0
    eps: float = 1e-4
    #: the memoized methods learn eps from ``eps`` by empirical Bayes (the stochastic ones keep it fixed)
    learn_eps: bool = False
    #: ``(s1, s2)``: the memoized methods learn alpha with a Gamma(s1, s2) prior (the stochastic ones keep ``alpha``)
    alpha_prior: tuple = None
    dtype: torch.dtype = torch.float64

    def __post_init__(self):
        """Check every setting, so that a bad one is refused before any method runs (``eps=2`` failed at
        ``memo``'s start, after the methods listed before it had run)."""
        check_settings(self)
        check_hyperparameters(self.alpha, self.gamma, (1.0, 1.0), self.eps)
        as_bool(self.learn_eps, "learn_eps")
        if self.alpha_prior is not None:
            gamma_prior_pair(self.alpha_prior, "alpha_prior")
        as_float_dtype(self.dtype)


@dataclass
class RelationalRun:
    """One run: passes, own seconds (scoring excluded), the bound (NaN for methods without it) and
    communities (dominant for at least one node) at each trace point; the final fit."""

    laps: list = field(default_factory=list)
    seconds: list = field(default_factory=list)
    bound: list = field(default_factory=list)
    K: list = field(default_factory=list)
    posterior: object = None


def _communities(posterior):
    return int(np.unique(posterior.memberships().argmax(1).cpu().numpy()).size)


def _run_ours(model, graph, budget, settings, posterior=None):
    """Fit ``model`` (from ``posterior`` when given) until the budget is spent; its seconds are its
    own lap times (a stochastic method's scoring pass is left out)."""
    run = RelationalRun()
    state = model.new_state()

    def callback(lap, elbo, posterior):
        run.laps.append(lap + 1)
        run.seconds.append(float(sum(state.lap_seconds)))
        run.bound.append(float("nan") if elbo is None else elbo)
        run.K.append(_communities(posterior))
        return budget.spent(lap + 1, run.seconds[-1])

    model.laps = int(np.ceil(budget.passes))
    start = {} if posterior is None else {"posterior": posterior}
    run.posterior = model.fit(graph, settings.batches, state=state, callback=callback, **start).posterior
    return run


def run_memo(graph, budget, settings, seed, moves=(), K=None):
    """:class:`~pyro_memo.relational.MemoizedRelational` (``tol=0``: runs its whole budget)."""
    model = MemoizedRelational(K=settings.K if K is None else K, alpha=settings.alpha, gamma=settings.gamma,
                               eps=settings.eps, tol=0, seed=seed, dtype=settings.dtype, moves=moves,
                               learn_eps=settings.learn_eps, alpha_prior=settings.alpha_prior)
    return _run_ours(model, graph, budget, settings)


def run_memo_eb(graph, budget, settings, seed):
    """Memoized inference at the given ``alpha`` and ``eps`` for half the budget, then empirical Bayes
    from there for the other half: :math:`\\alpha \\sim Gamma` (``settings.alpha_prior``, else
    ``(1, 1)``) and eps learnt, each global step raising the bound
    (:meth:`~pyro_memo.relational.RelationalPosterior.learning`). Learnt from the first lap instead,
    they settle in poorer optima on polblogs (at K = 20 bounds of -65,000 to -72,000 nats against this
    method's -53,500 to -59,500; ``benchmarks/results/bench_relational_networks_learn_alpha.txt``,
    ``bench_relational_networks_memo_eb.txt``).

    It runs ``ceil(budget.passes)`` laps, as every method does: ``floor`` of half of them at the given values,
    the rest (the odd lap too) learning, so a one-pass budget runs one learning lap; ``budget.seconds`` is
    halved."""
    laps = int(np.ceil(budget.passes))
    fixed_laps, seconds = laps // 2, None if budget.seconds is None else budget.seconds / 2
    prior = settings.alpha_prior or (1.0, 1.0)
    learning = Budget(laps - fixed_laps, seconds)
    if fixed_laps == 0:
        return run_memo(graph, learning, RelationalSettings(**{**settings.__dict__, "learn_eps": True,
                                                                "alpha_prior": prior}), seed)
    fixed = RelationalSettings(**{**settings.__dict__, "learn_eps": False, "alpha_prior": None})
    first = run_memo(graph, Budget(fixed_laps, seconds), fixed, seed)
    model = MemoizedRelational(K=first.posterior.K, alpha_prior=prior, gamma=settings.gamma, eps=settings.eps,
                               tol=0, seed=seed, dtype=settings.dtype, learn_eps=True)
    second = _run_ours(model, graph, learning, settings, first.posterior.learning(prior, learn_eps=True))
    return RelationalRun(laps=first.laps + [first.laps[-1] + lap for lap in second.laps],
                         seconds=first.seconds + [first.seconds[-1] + t for t in second.seconds],
                         bound=first.bound + second.bound, K=first.K + second.K, posterior=second.posterior)


def run_svi(graph, budget, settings, seed, ammsb=False, kappa=0.6, delay=10.0):
    """:class:`~pyro_memo.relational.stochastic.StochasticRelational` (or ``StochasticAMMSB`` with
    ``ammsb``): ``settings.batches`` steps per pass (at least 10, so one pass is several steps)."""
    common = {"K": settings.K, "kappa": kappa, "delay": delay, "eps": settings.eps, "seed": seed,
              "dtype": settings.dtype}
    model = StochasticAMMSB(**common) if ammsb else \
        StochasticRelational(alpha=settings.alpha, gamma=settings.gamma, **common)
    steps = min(max(settings.batches, 10), graph.num_nodes)
    return _run_ours(model, graph, budget, RelationalSettings(**{**settings.__dict__, "batches": steps}))


class BlockDensity:
    """Hard communities scored as a stochastic block model: ``link_probability`` of a pair is the
    fraction of observed pairs between (or within) their two blocks that are linked, with add-one
    smoothing, ``(links + 1) / (pairs + 2)``; held-out (``missing``) pairs count in neither. This gives
    hard community detectors (Louvain) a link score comparable by AUC and log-likelihood."""

    def __init__(self, graph, labels):
        self.labels = np.unique(np.asarray(labels), return_inverse=True)[1]
        B = int(self.labels.max()) + 1
        sizes = np.bincount(self.labels, minlength=B).astype(float)
        pairs = np.outer(sizes, sizes)
        pairs[np.diag_indices(B)] = sizes * (sizes - 1) / 2
        links = np.zeros((B, B))
        for table, sign in ((graph.edges, 1.0), (graph.missing, -1.0)):
            a, b = self.labels[table[:, 0]], self.labels[table[:, 1]]
            if sign > 0:
                np.add.at(links, (a, b), 1.0)
            else:
                np.add.at(pairs, (a, b), -1.0)
                np.add.at(pairs, (b, a), -1.0 * (a != b))
        links = links + links.T - np.diag(np.diag(links))
        self.density = (links + 1.0) / (np.maximum(pairs, 0.0) + 2.0)

    def link_probability(self, pairs):
        pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
        return torch.as_tensor(self.density[self.labels[pairs[:, 0]], self.labels[pairs[:, 1]]])

    def memberships(self):
        return torch.nn.functional.one_hot(torch.as_tensor(self.labels), int(self.labels.max()) + 1).double()


def run_louvain(graph, budget, settings, seed):
    """networkx's ``louvain_communities`` (one run, no budget to spend), scored by :class:`BlockDensity`."""
    try:
        import networkx as nx
    except ImportError as err:
        raise ImportError("method louvain needs networkx (pip install networkx)") from err
    run = RelationalRun()
    start = clock.now()
    nxg = nx.Graph()
    nxg.add_nodes_from(range(graph.num_nodes))
    nxg.add_edges_from(graph.edges.tolist())
    labels = np.zeros(graph.num_nodes, dtype=np.int64)
    for k, members in enumerate(nx.community.louvain_communities(nxg, seed=seed)):
        labels[list(members)] = k
    run.posterior = BlockDensity(graph, labels)
    run.laps.append(1)
    run.seconds.append(clock.now() - start)
    run.bound.append(float("nan"))
    run.K.append(_communities(run.posterior))
    return run


#: what the graph-tool subprocess runs: edges ``(E, 2)`` and the node count in, block labels out (JSON)
_SBM_SCRIPT = """
import json, sys
import numpy as np
import graph_tool.all as gt
task = json.load(sys.stdin)
gt.openmp_set_num_threads(1)  # with several threads its runs differ under one seed
np.random.seed(task["seed"] + 1)
gt.seed_rng(task["seed"] + 1)  # graph-tool draws a random seed for 0
g = gt.Graph(directed=False)
g.add_vertex(task["nodes"])
g.add_edge_list(np.asarray(task["edges"], dtype=np.int64).reshape(-1, 2))
state = gt.minimize_blockmodel_dl(g)
json.dump([int(b) for b in state.get_blocks().a], sys.stdout)
"""


def check_optional_methods(methods):
    """Raise an ImportError saying how to install what the reference detectors among ``methods`` need
    (``louvain``: networkx; ``sbm``: graph-tool), before any method runs."""
    if "louvain" in methods:
        try:
            import networkx  # noqa: F401
        except ImportError as err:
            raise ImportError("method louvain needs networkx (pip install networkx)") from err
    if "sbm" in methods:
        _graph_tool_python()


def _graph_tool_python():
    """An interpreter that imports graph-tool: ``$PYRO_MEMO_GRAPH_TOOL_PYTHON``, this one, or the system's
    ``python3`` (Debian's python3-graph-tool installs there, built for the system's numpy)."""
    import os
    import shutil
    import subprocess
    import sys

    given = os.environ.get("PYRO_MEMO_GRAPH_TOOL_PYTHON")
    candidates = [given] if given else [sys.executable, "/usr/bin/python3", shutil.which("python3")]
    for python in dict.fromkeys(c for c in candidates if c):
        probe = subprocess.run([python, "-c", "import graph_tool.all"], capture_output=True, timeout=120)
        if probe.returncode == 0:
            return python
    raise ImportError("method sbm needs graph-tool (not on PyPI): install Debian's python3-graph-tool "
                      "(apt-get install python3-graph-tool) or conda-forge's graph-tool, or point "
                      "PYRO_MEMO_GRAPH_TOOL_PYTHON at an interpreter that imports graph_tool")


def run_sbm(graph, budget, settings, seed):
    """graph-tool's stochastic block model (``minimize_blockmodel_dl``, Peixoto 2014: the partition of
    minimum description length; one run, no budget to spend) on the training links, in a subprocess
    with an interpreter that has graph-tool; scored by :class:`BlockDensity`. Its seconds include
    that interpreter's start and imports."""
    import json
    import subprocess

    python = _graph_tool_python()
    run = RelationalRun()
    start = clock.now()
    task = {"nodes": graph.num_nodes, "edges": np.asarray(graph.edges).tolist(), "seed": int(seed)}
    done = subprocess.run([python, "-c", _SBM_SCRIPT], input=json.dumps(task), capture_output=True, text=True,
                          timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"graph-tool's minimize_blockmodel_dl failed: {done.stderr.strip()[-500:]}")
    run.posterior = BlockDensity(graph, np.asarray(json.loads(done.stdout), dtype=np.int64))
    run.laps.append(1)
    run.seconds.append(clock.now() - start)
    run.bound.append(float("nan"))
    run.K.append(_communities(run.posterior))
    return run


#: relational methods by name
RELATIONAL_METHODS = {
    "memo": run_memo,
    "memo-moves": lambda g, b, s, seed: run_memo(g, b, s, seed, moves="birth,delete,merge", K=1),
    "memo-eb": run_memo_eb,
    "svi-hdp": run_svi,
    "svi-ammsb": lambda g, b, s, seed: run_svi(g, b, s, seed, ammsb=True),
    "louvain": run_louvain,
    "sbm": run_sbm,
}
