"""The variational family of a memoized HDP relational fit, as a Pyro guide whose globals live in
Pyro's param store: ``SVI(model, RelationalGuide(model), ClosedFormOptimizer(), MemoizedELBO())``
over batches of nodes."""

import numpy as np
import pyro
import pyro.distributions as dist
import torch
from torch.distributions import constraints, transform_to

from ..checks import as_seed
from ..data import Graph
from ..inference import SummaryCache
from ..models.hdp_relational import HDPRelationalGuide, sample_pair_roles
from ..posterior.relational_tied import TiedRelationalPosterior, graph_pairs
from ..relational import MemoizedRelational, NodeBatches
from .call_specs import spec_for_call
from .param_store import DataFingerprint, check_shapes, default_prefix, fingerprint, require_params
from .readouts import GlobalSiteReadouts, as_num_samples
from .relational_gap import relational_normaliser_gap
from .structure import batch_key, check_subsample

__all__ = ["RelationalGuide", "observed_graph"]

_CONSTRAINTS = {"theta": constraints.positive, "rho": constraints.unit_interval, "omega": constraints.positive,
                "w_a": constraints.positive, "w_b": constraints.positive}


def observed_graph(src, dst, y, N):
    """The :class:`~pyro_memo.data.Graph` of a relational model's call: links the pairs with
    ``y == 1``; every unordered pair the call does not list is unobserved (``missing``).

    :raises ValueError: if an unordered pair is listed twice.
    """
    lo, hi = torch.minimum(src, dst).cpu(), torch.maximum(src, dst).cpu()
    code = lo * N + hi
    unique, counts = torch.unique(code, return_counts=True)
    if bool((counts > 1).any()):
        twice = int(unique[counts > 1][0])
        raise ValueError(f"pair ({twice // N}, {twice % N}) is listed {int(counts.max())} times; list each unordered "
                         "pair of nodes once")
    missing = None
    if len(code) < N * (N - 1) // 2:
        every = torch.triu_indices(N, N, 1)
        missing = every[:, ~torch.isin(every[0] * N + every[1], unique)].T.numpy()
    links = torch.stack([lo, hi], 1)[y.cpu() == 1].numpy()
    return Graph(links, N, missing=missing)


def _pair_tensor(pairs, device):
    """A graph's ``pairs`` (its edges or missing pairs) as a ``(P, 2)`` long tensor on ``device``."""
    return torch.as_tensor(np.array(pairs), dtype=torch.long, device=device).reshape(-1, 2)


class RelationalGuide(GlobalSiteReadouts):
    """``q(u_k) = Beta(rho_k omega_k, (1 - rho_k) omega_k)``, ``q(pi_i) = Dir(theta_i)``,
    ``q(w_k) = Beta(a_k, b_k)`` and per pair a joint ``q(s, r)`` over the explicit communities for a
    recognised HDP relational model (see ``pyro_memo.bridge.relational_recognition``): the tied family of
    ``pyro_memo.posterior.relational_tied`` (a linked pair's roles at their optimum under the
    globals, eq. R1; a non-linked pair's roles following the sampled memberships, eq. T1), the
    family :class:`~pyro_memo.relational.MemoizedRelational` fits by default.

    The globals are in Pyro's param store under ``"{prefix}.theta"``, ``"{prefix}.rho"``,
    ``"{prefix}.omega"``, ``"{prefix}.w_a"`` and ``"{prefix}.w_b"``. A batch's local step holds no
    state (the linked pairs' roles are a function of the globals), so the guide is a deterministic
    function of the param store. It runs on any call of the model: a batch of pairs (the pair
    plate's ``subsample``), every pair, or other pairs of the same nodes; without links
    (``y=None``, e.g. ``pyro.infer.Predictive``) every pair's roles follow the memberships. Pyro's
    ``Trace_ELBO`` of the guide on every pair estimates :meth:`elbo` plus :meth:`normaliser_gap`.

    The pairs a call lists are the observed ones: the non-linked pairs enter the bound through the
    graph they make (``observed_graph()``), which the guide rebuilds when the call's pairs change.

    :param model: the Pyro relational model (recognised on first call).
    :param str prefix: param-store name prefix; default ``"memo.<model's qualname>"`` (see
        ``pyro_memo.bridge.param_store``).
    :param int seed: seeds the initial memberships.
    :param str init: initial memberships, ``"spectral"`` (default) or ``"random"``, as
        :class:`~pyro_memo.relational.MemoizedRelational`.
    """

    def __init__(self, model, prefix=None, seed=0, init="spectral"):
        self.model, self.seed, self.init = model, as_seed(seed), init
        self.prefix = default_prefix(model) if prefix is None else str(prefix)
        self.spec = None
        self._specs = {}
        self._graph = None  # (the call's pairs, Graph, GraphPairs)
        self._raw = None  # (the call's pairs, raw_data)
        self._trained_on = None  # the raw_data check_data last saw
        self._fingerprint = DataFingerprint()
        #: per-batch summaries used by :class:`~pyro_memo.MemoizedELBO`
        self.memo = SummaryCache()
        #: the number of pairs of each memoized batch
        self.memo_pairs = {}

    # ----------------------------------------------------------------- setup
    def setup(self, *args, **kwargs):
        """Recognise the model (once per call signature: a call that adds the batch's pairs is read
        again) and initialise the globals if missing (idempotent)."""
        self.spec = spec_for_call(self, "relational", args, kwargs)
        N, K = self.spec.N, self.spec.K
        check_shapes(self.prefix, self._names(), {"theta": (N, K + 1), "rho": (K,), "omega": (K,), "w_a": (K,),
                                                  "w_b": (K,)})
        if any(name not in pyro.get_param_store() for name in self._names().values()):
            self.set_posterior(self.initial_posterior(*args, **kwargs))
            self.memo, self.memo_pairs = SummaryCache(), {}
            self._fingerprint.record(self.prefix, self.raw_data(args, kwargs))
        return self

    def raw_data(self, args, kwargs):
        """The call's pairs as one ``(P, 3)`` float64 tensor of (src, dst, y) rows (the same object while
        the call's pairs are, so the data fingerprint is taken once)."""
        pairs = self.spec.pairs(args, kwargs)
        if self._raw is None or self._raw[0] is not pairs:
            src, dst, y = pairs
            self._raw = (pairs, torch.stack([src.double(), dst.double(), y], 1))
        return self._raw[1]

    def _device(self, args, kwargs):
        """The device of the call's pairs, where the guide keeps its globals and computes."""
        return self.spec.pairs(args, kwargs)[0].device

    def graph(self, args, kwargs):
        """``(Graph, GraphPairs)`` of the call's pairs (``observed_graph()``; the ``GraphPairs`` on their
        device), rebuilt only when they change."""
        pairs = self.spec.pairs(args, kwargs)
        seen = self._graph[0] if self._graph is not None else None
        if seen is not pairs and (seen is None or not all(torch.equal(a, b) for a, b in zip(seen, pairs, strict=True))):
            graph = observed_graph(*pairs, self.spec.N)
            device = self._device(args, kwargs)
            edges, missing = _pair_tensor(graph.edges, device), _pair_tensor(graph.missing, device)
            self._graph = (pairs, graph, graph_pairs(edges, missing, graph.num_nodes))
        return self._graph[1], self._graph[2]

    def check_data(self, *args, **kwargs):
        """Before training on this call's pairs: warn (:class:`~pyro_memo.bridge.param_store.WarmStartWarning`)
        if the stored globals were fitted to other pairs, then record these; the memo of other pairs is dropped."""
        raw = self.raw_data(args, kwargs)
        if raw is not self._trained_on:
            store = pyro.get_param_store()
            name = f"{self.prefix}.fingerprint"
            if name in store and not torch.equal(store[name].detach(), fingerprint(raw)):
                self.memo, self.memo_pairs = SummaryCache(), {}
            self._trained_on = raw
        self._fingerprint.check(self.prefix, raw)

    def initial_posterior(self, *args, **kwargs):
        """The globals :class:`~pyro_memo.relational.MemoizedRelational` starts from on the call's graph, on
        its pairs' device."""
        s = self.spec
        graph, _ = self.graph(args, kwargs)
        device = self._device(args, kwargs)
        driver = MemoizedRelational(K=s.K, alpha=s.alpha, gamma=s.gamma, tau=s.tau, eps=s.eps, seed=self.seed,
                                    init=self.init, device=device)
        return driver.initial_posterior(NodeBatches(graph, [np.arange(graph.num_nodes)], device))

    def _names(self):
        return {k: f"{self.prefix}.{k}" for k in _CONSTRAINTS}

    # -------------------------------------------------------- param store I/O
    def posterior_for(self, *args, **kwargs):
        """The current :class:`~pyro_memo.posterior.relational_tied.TiedRelationalPosterior` on this call's
        graph (a detached copy of the param store's values)."""
        require_params(self)
        _, pairs = self.graph(args, kwargs)
        return self._posterior(pairs)

    def _posterior(self, pairs):
        v = {k: pyro.param(n).detach().double().clone() for k, n in self._names().items()}
        s = self.spec
        return TiedRelationalPosterior(v["theta"], v["rho"], v["omega"], v["w_a"], v["w_b"], s.alpha, s.gamma, s.tau,
                                       s.eps, pairs)

    def set_posterior(self, posterior):
        """Write ``posterior``'s globals into the param store (replacing old values)."""
        store = pyro.get_param_store()
        for key, name in self._names().items():
            if name in store:
                del store[name]
            pyro.param(name, getattr(posterior, key).detach().clone(), constraint=_CONSTRAINTS[key])

    def set_update_direction(self, target):
        """Write ``current - target`` (unconstrained) into each global's ``.grad``, so that a unit
        gradient step (:class:`~pyro_memo.ClosedFormOptimizer`) lands on ``target``."""
        for key, name in self._names().items():
            unconstrained = pyro.param(name).unconstrained()
            goal = transform_to(_CONSTRAINTS[key]).inv(getattr(target, key).to(unconstrained))
            unconstrained.grad = unconstrained.detach() - goal

    # ------------------------------------------------------------ local step
    def batch_step(self, posterior, *args, **kwargs):
        """The call's batch: ``(key, summary, number of pairs)``, its links' roles at their optimum
        under ``posterior`` (eq. R1)."""
        src, dst, y = self.spec.pairs(args, kwargs)
        rows = self.spec.batch_indices(args, kwargs)
        if rows is not None:
            rows = check_subsample(rows, len(src), f"the subsample of plate '{self.spec.pair_plate}'")
            src, dst, y = src[rows], dst[rows], y[rows]
        lo, hi = torch.minimum(src, dst), torch.maximum(src, dst)
        sources = torch.zeros(self.spec.N, dtype=torch.bool, device=lo.device)
        sources[lo] = True
        links = torch.stack([lo, hi], 1)[y == 1]
        _, summary = posterior.local_step(links, sources)
        return batch_key(rows), summary, len(src)

    # ------------------------------------------------------------- the guide
    def __call__(self, *args, **kwargs):
        self.setup(*args, **kwargs)
        spec = self.spec
        like = {"dtype": spec.extra["model_dtype"], "device": spec.extra["model_device"]}
        src = torch.as_tensor(spec._get(spec.src_arg, args, kwargs)).long()
        dst = torch.as_tensor(spec._get(spec.dst_arg, args, kwargs)).long()
        y = spec._get(spec.y_arg, args, kwargs, None)
        if y is None:  # no links to score: the graph does not matter, every pair's roles follow the memberships
            post = self._posterior(graph_pairs(torch.zeros(0, 2, dtype=torch.long, device=src.device), None, spec.N))
        else:
            post = self.posterior_for(*args, **kwargs)
        links = dist.Beta(post.w_a.to(**like), post.w_b.to(**like))
        shared = spec.link_plate == spec.stick_plate  # one plate of size K may hold both
        with pyro.plate(spec.stick_plate, spec.K):
            pyro.sample(spec.stick_site, dist.Beta((post.rho * post.omega).to(**like),
                                                   ((1 - post.rho) * post.omega).to(**like)))
            if shared:
                pyro.sample(spec.link_site, links)
        with pyro.plate(spec.node_plate, spec.N):
            pi = pyro.sample(spec.membership_site, dist.Dirichlet(post.theta.to(**like)))
        if not shared:
            with pyro.plate(spec.link_plate, spec.K):
                pyro.sample(spec.link_site, links)
        y = torch.zeros(len(src), dtype=torch.float64, device=src.device) if y is None else torch.as_tensor(y).double()
        rows = spec.batch_indices(args, kwargs)
        idx = torch.arange(len(src), device=src.device) if rows is None else rows
        table = HDPRelationalGuide(post).pair_table(src[idx], dst[idx], y[idx], pi.double())
        with pyro.plate(spec.pair_plate, len(src), subsample=rows):
            sample_pair_roles(table.to(**like), spec.source_site, spec.receiver_site)

    # ------------------------------------------------------------ the bound
    def elbo(self, *args, **kwargs):
        """The exact relational bound of the guide on this call's graph (every pair it lists) under the
        current globals. Pyro's ``Trace_ELBO`` of the guide estimates ``elbo + normaliser_gap``."""
        self.setup(*args, **kwargs)
        post = self.posterior_for(*args, **kwargs)
        graph, _ = self.graph(args, kwargs)
        device = self._device(args, kwargs)
        edges = _pair_tensor(graph.edges, device)
        _, summary = post.local_step(edges, torch.ones(self.spec.N, dtype=torch.bool, device=device))
        return float(post.elbo(summary))

    def normaliser_gap(self, *args, **kwargs):
        """The true ELBO of the guide's distribution minus :meth:`elbo` (closed form,
        :func:`~pyro_memo.bridge.relational_normaliser_gap`)."""
        self.setup(*args, **kwargs)
        return relational_normaliser_gap(self.posterior_for(*args, **kwargs))

    # -------------------------------------------------- AutoGuide-style read-outs
    def sample_posterior(self, num_samples=1):
        """``num_samples`` draws of the global sites: sticks ``(num_samples, K)``, memberships
        ``(num_samples, N, K + 1)`` and link probabilities ``(num_samples, K)``: dict site -> tensor."""
        require_params(self)
        spec, n = self.spec, as_num_samples(num_samples)
        v = {k: pyro.param(name).detach().double() for k, name in self._names().items()}
        like = {"dtype": spec.extra["model_dtype"], "device": spec.extra["model_device"]}
        sticks = dist.Beta(v["rho"] * v["omega"], (1 - v["rho"]) * v["omega"])
        with torch.no_grad():
            return {spec.stick_site: sticks.sample((n,)).to(**like),
                    spec.membership_site: dist.Dirichlet(v["theta"]).sample((n,)).to(**like),
                    spec.link_site: dist.Beta(v["w_a"], v["w_b"]).sample((n,)).to(**like)}
