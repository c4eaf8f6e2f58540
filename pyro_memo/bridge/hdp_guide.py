"""The variational family of a memoized HDP topic-model fit, as a Pyro guide whose global
parameters live in Pyro's param store."""

import pyro
import pyro.distributions as dist
import torch
from torch.distributions import constraints, transform_to

from ..allocation import stick_breaking_weights
from ..inference import SummaryCache
from ..topics import HDPPosterior
from .param_store import check_shapes, default_prefix
from .recognition import ModelStructureError, recognize_model

_CONSTRAINTS = {"rho": constraints.unit_interval, "omega": constraints.positive, "lam": constraints.positive}


class HDPGuide:
    """``q(u_k) = Beta(rho_k omega_k, (1 - rho_k) omega_k)``, ``q(phi_k) = Dir(lam_k)`` (the
    tail topic at its prior), ``q(pi_d) = Dir(theta_d)`` and ``q(z_n) = Cat(r_n)`` (no mass on
    the tail) for a recognised HDP topic model (see :mod:`.hdp_recognition`).

    The globals are in Pyro's param store under ``"{prefix}.rho"``, ``"{prefix}.omega"`` and
    ``"{prefix}.lam"``. The document-level parameters are the local step's:
    :attr:`doc_topic_counts` holds every document's expected topic counts (``(D, K)``, written by
    :class:`~pyro_memo.bridge.MemoizedELBO` and :func:`~pyro_memo.bridge.fit_memoized`), and
    whenever the guide runs, ``r`` and ``theta`` are one exact local sweep from them under the
    current globals (:meth:`local_params`), so the guide is a deterministic function of the
    param store and those counts. Documents without counts get a full local step from scratch.

    :param model: the Pyro HDP topic model.
    :param str prefix: param-store name prefix; default ``"memo.<model's qualname>"`` (see
        :mod:`pyro_memo.bridge.param_store`); stored globals of other shapes raise ``ValueError``.
    :param int seed: seeds the initial topics (``K`` random documents).
    :param int local_iters: cap on document-level iterations of a batch step.
    :param float local_tol: document-level convergence threshold.
    """

    def __init__(self, model, prefix=None, seed=0, local_iters=100, local_tol=1e-3):
        self.model, self.seed = model, seed
        self.prefix = default_prefix(model) if prefix is None else str(prefix)
        self.local_iters, self.local_tol = int(local_iters), float(local_tol)
        self.spec = None
        self.doc_topic_counts = None
        #: per-batch summaries used by :class:`~pyro_memo.bridge.MemoizedELBO`
        self.memo = SummaryCache()

    # ----------------------------------------------------------------- setup
    def setup(self, *args, **kwargs):
        """Recognise the model and initialise the globals if missing (idempotent)."""
        if self.spec is None:
            spec = recognize_model(self.model, *args, **kwargs)
            if spec.kind != "hdp":
                raise ModelStructureError("HDPGuide needs an HDP topic model; this model is a DP mixture: use "
                                          "pyro_memo.DPMixtureGuide")
            self.spec = spec
        K, V = self.spec.K, self.spec.V
        check_shapes(self.prefix, self._names(), {"rho": (K,), "omega": (K,), "lam": (K, V)})
        if self._missing_params():
            self.set_posterior(self.initial_posterior(*args, **kwargs))
            self.doc_topic_counts, self.memo = None, SummaryCache()
        return self

    def initial_posterior(self, *args, **kwargs):
        """Sticks at their prior; topic ``k`` is ``lam0`` plus the word counts of a random document."""
        spec = self.spec
        doc, word = spec.tokens(args, kwargs)
        counts = torch.zeros(spec.num_docs, spec.V, dtype=torch.float64).index_put_(
            (doc.cpu(), word.cpu()), torch.ones(len(doc), dtype=torch.float64), accumulate=True)
        g = torch.Generator().manual_seed(self.seed)
        pick = torch.randint(spec.num_docs, (spec.K,), generator=g)
        lam = spec.lam0 + counts[pick] + 0.01 * torch.rand(spec.K, spec.V, generator=g, dtype=torch.float64)
        rho = torch.full((spec.K,), 1.0 / (1.0 + spec.gamma), dtype=torch.float64)
        omega = torch.full((spec.K,), 1.0 + spec.gamma, dtype=torch.float64)
        return HDPPosterior(lam, rho, omega, spec.alpha, spec.gamma, spec.lam0)

    def _names(self):
        return {k: f"{self.prefix}.{k}" for k in _CONSTRAINTS}

    def _missing_params(self):
        store = pyro.get_param_store()
        return any(name not in store for name in self._names().values())

    # -------------------------------------------------------- param store I/O
    @property
    def posterior(self):
        """The current :class:`~pyro_memo.topics.HDPPosterior`: a detached copy of the param store's values,
        which later steps do not change."""
        v = {k: pyro.param(n).detach().double().clone() for k, n in self._names().items()}
        s = self.spec
        return HDPPosterior(v["lam"], v["rho"], v["omega"], s.alpha, s.gamma, s.lam0)

    @staticmethod
    def _values(posterior):
        return {"rho": posterior.rho, "omega": posterior.omega, "lam": posterior.lam}

    def set_posterior(self, posterior):
        """Write ``posterior``'s globals into the param store (replacing old values)."""
        store = pyro.get_param_store()
        for key, name in self._names().items():
            if name in store:
                del store[name]
            pyro.param(name, self._values(posterior)[key].detach().clone(), constraint=_CONSTRAINTS[key])

    def set_update_direction(self, target):
        """Write ``current - target`` (unconstrained) into each global's ``.grad``, so that a unit
        gradient step (:class:`~pyro_memo.bridge.ClosedFormOptimizer`) lands on ``target``."""
        values = self._values(target)
        for key, name in self._names().items():
            unconstrained = pyro.param(name).unconstrained()
            goal = transform_to(_CONSTRAINTS[key]).inv(values[key].to(unconstrained))
            unconstrained.grad = unconstrained.detach() - goal

    # ------------------------------------------------------------ local step
    def local_step(self, posterior, batch):
        """A batch visit's local step: warm-started from the batch documents' stored counts
        (never lowering the bound of those local parameters under ``posterior``), or from
        scratch. Stores the new counts; returns ``(resp, summary)``."""
        warm = None if self.doc_topic_counts is None else self.doc_topic_counts[batch.docs]
        if warm is not None and bool(torch.isnan(warm[:, 0]).any()):
            warm = None
        resp, counts, summary, _ = posterior.local_step(batch.pair_doc, batch.pair_word, batch.pair_count,
                                                        batch.num_docs, init_counts=warm, max_iter=self.local_iters,
                                                        tol=self.local_tol)
        self.store_counts(batch.docs, counts)
        return resp, summary

    def store_counts(self, docs, counts):
        """Record documents ``docs``' expected topic counts (the local parameters' state)."""
        if self.doc_topic_counts is None or self.doc_topic_counts.shape[1] != counts.shape[1]:
            self.doc_topic_counts = torch.full((self.spec.num_docs, counts.shape[1]), float("nan"),
                                               dtype=counts.dtype, device=counts.device)
        self.doc_topic_counts[docs] = counts

    def local_params(self, posterior, batch):
        """The guide's ``(resp per pair, theta, summary)`` for ``batch``: one exact sweep
        (``max_iter = 1``) from the stored counts, or a full local step where there are none."""
        stored = None if self.doc_topic_counts is None else self.doc_topic_counts[batch.docs]
        if stored is not None and bool(torch.isnan(stored[:, 0]).any()):
            stored = None
        options = {"max_iter": self.local_iters, "tol": self.local_tol} if stored is None else {"max_iter": 1}
        resp, counts, summary, _ = posterior.local_step(batch.pair_doc, batch.pair_word, batch.pair_count,
                                                        batch.num_docs, init_counts=stored, **options)
        prior = posterior.alpha * stick_breaking_weights(posterior.rho)
        theta = torch.cat([counts + prior[:-1], prior[-1:].expand(len(counts), 1)], 1)
        return resp, theta, summary

    # ------------------------------------------------------------- the guide
    def __call__(self, *args, **kwargs):
        self.setup(*args, **kwargs)
        spec, post = self.spec, self.posterior
        like = {"dtype": spec.extra["model_dtype"], "device": spec.extra["model_device"]}
        batch = spec.batch(args, kwargs)
        resp, theta, _ = self.local_params(post, batch)
        with pyro.plate(spec.stick_plate, spec.K):
            pyro.sample(spec.stick_site, dist.Beta((post.rho * post.omega).to(**like),
                                                   ((1 - post.rho) * post.omega).to(**like)))
        lam = torch.cat([post.lam, torch.full_like(post.lam[:1], post.lam0)])
        with pyro.plate(spec.topic_plate, spec.K + 1):
            pyro.sample(spec.topic_site, dist.Dirichlet(lam.to(**like)))
        subsample = None if spec.subsample_arg is None else batch.docs
        with pyro.plate(spec.doc_plate, spec.num_docs, subsample=subsample):
            pyro.sample(spec.doc_site, dist.Dirichlet(theta.to(**like)))
        probs = torch.cat([resp, resp.new_zeros(len(resp), 1)], 1)[batch.token_pair]
        if spec.token_subsampled:
            plate = pyro.plate(spec.token_plate, spec.num_tokens, subsample=batch.tokens)
        else:
            plate = pyro.plate(spec.token_plate, len(batch.tokens))
        with plate:
            pyro.sample(spec.assignment_site, dist.Categorical(probs=probs.to(**like)))
