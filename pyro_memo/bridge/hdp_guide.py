"""The variational family of a memoized HDP topic-model fit, as a Pyro guide whose global
parameters live in Pyro's param store."""

import pyro
import pyro.distributions as dist
import torch
from torch.distributions import constraints, transform_to

from ..allocation import stick_breaking_weights
from ..allocation.concentration import GammaConcentration, learnable
from ..checks import as_non_negative_float, as_positive_int, as_seed
from ..inference import SummaryCache
from ..topics import HDPPosterior
from .call_specs import spec_for_call
from .hdp_gap import expected_normaliser_gap
from .param_store import DataFingerprint, check_shapes, default_prefix, require_params
from .readouts import GlobalSiteReadouts, as_num_samples
from .structure import call_signature

_CONSTRAINTS = {"rho": constraints.unit_interval, "omega": constraints.positive, "lam": constraints.positive,
                "q_alpha": constraints.positive, "q_gamma": constraints.positive}


def picked_counts(doc, word, pick, V):
    """``(len(pick), V)`` word counts of documents ``pick`` (repeats allowed), from the tokens of those
    documents alone: no ``(documents, V)`` table of the whole corpus."""
    keep = torch.isin(doc, pick)
    rows, tokens = torch.nonzero(pick[:, None] == doc[keep][None, :], as_tuple=True)
    return torch.zeros(len(pick), V, dtype=torch.float64).index_put_(
        (rows, word[keep][tokens]), torch.ones(len(rows), dtype=torch.float64), accumulate=True)


class HDPGuide(GlobalSiteReadouts):
    """``q(u_k) = Beta(rho_k omega_k, (1 - rho_k) omega_k)``, ``q(phi_k) = Dir(lam_k)`` (the
    tail topic at its prior), ``q(pi_d) = Dir(theta_d)`` and ``q(z_n) = Cat(r_n)`` (no mass on
    the tail) for a recognised HDP topic model (see ``pyro_memo.bridge.hdp_recognition``).

    The globals are in Pyro's param store under ``"{prefix}.rho"``, ``"{prefix}.omega"`` and
    ``"{prefix}.lam"``; a latent concentration (``alpha ~ Gamma(s1, s2)`` / ``gamma ~ Gamma(s1, s2)``
    outside every plate, see ``pyro_memo.bridge.hdp_recognition``) adds its factor ``q = Gamma(w1, w2)`` as
    ``"{prefix}.q_alpha"`` / ``"{prefix}.q_gamma"`` (``(w1, w2)``, written by the closed-form step like
    the other globals), and the guide samples it at the model's site. The document-level
    parameters are the local step's:
    ``doc_topic_counts`` holds every document's expected topic counts (``(D, K)``, written by
    :class:`~pyro_memo.MemoizedELBO` and :func:`~pyro_memo.fit_memoized`), and
    whenever the guide runs, ``r`` and ``theta`` are one exact local sweep from them under the
    current globals (:meth:`local_params`), so the guide is a deterministic function of the
    param store and those counts. Documents without counts get a full local step from scratch.

    Like any Pyro guide it runs on any call of the model: a batch of documents (the document
    plate's ``subsample``, uneven last batches included), the whole corpus, or new documents (a
    corpus of another number of documents over the same vocabulary); the document plate's size
    and subsample are read from each call (:meth:`~pyro_memo.bridge.HDPSpec.plate_size`). The
    stored counts belong to one corpus (checked by a checksum of its tokens); on any other
    corpus every document gets a full local step from scratch. So ``pyro.infer.Predictive`` on
    new documents and ``Trace_ELBO`` on the full corpus work after batch training; the latter
    estimates :meth:`elbo` plus :meth:`normaliser_gap` (the HDP bound is not the ELBO of the
    guide's own distribution, see ``pyro_memo.bridge.hdp_gap``).
    :meth:`~pyro_memo.bridge.readouts.GlobalSiteReadouts.median`,
    :meth:`~pyro_memo.bridge.readouts.GlobalSiteReadouts.quantiles` and :meth:`sample_posterior` read out the global
    sites (sticks and topics) as Pyro's ``AutoGuide`` does.

    :param model: the Pyro HDP topic model.
    :param str prefix: param-store name prefix; default ``"memo.<model's qualname>"`` (see
        ``pyro_memo.bridge.param_store``); stored globals of other shapes raise ``ValueError``.
    :param int seed: seeds the initial topics (``K`` random documents).
    :param int local_iters: cap on document-level iterations of a batch step.
    :param float local_tol: document-level convergence threshold.
    """

    def __init__(self, model, prefix=None, seed=0, local_iters=100, local_tol=1e-3):
        self.model, self.seed = model, as_seed(seed)
        self.prefix = default_prefix(model) if prefix is None else str(prefix)
        self.local_iters = as_positive_int(local_iters, "local_iters")
        self.local_tol = as_non_negative_float(local_tol, "local_tol")
        self.spec = None
        self._specs = {}
        self.doc_topic_counts = None
        #: the corpus key (:meth:`~pyro_memo.bridge.HDPSpec.corpus_key`) of ``doc_topic_counts``
        self.counts_corpus = None
        self._fingerprint = DataFingerprint()
        #: per-batch summaries used by :class:`~pyro_memo.MemoizedELBO`
        self.memo = SummaryCache()

    # ----------------------------------------------------------------- setup
    def setup(self, *args, **kwargs):
        """Recognise the model (once per call signature: a call that adds the batch's indices is read
        again) and initialise the globals if missing (idempotent)."""
        self.spec = spec_for_call(self, "hdp", args, kwargs)
        K, V = self.spec.K, self.spec.V
        check_shapes(self.prefix, self._names(), {"rho": (K,), "omega": (K,), "lam": (K, V), "q_alpha": (2,),
                                                  "q_gamma": (2,)})
        if self._missing_params():
            self.set_posterior(self.initial_posterior(*args, **kwargs))
            self.doc_topic_counts, self.counts_corpus, self.memo = None, None, SummaryCache()
            self._fingerprint.record(self.prefix, self.spec.raw_data(args, kwargs))
        return self

    def adopt(self, spec, *args, **kwargs):
        """Take ``spec``, the model as recognised on a call with these arguments, as the guide's reading of
        such calls (a fit that recognised the model itself; a later call without the words then reuses it)."""
        self.spec = self._specs.setdefault(call_signature(args, kwargs), spec)
        return self

    def check_data(self, *args, **kwargs):
        """Before training on this call's corpus: warn (:class:`~pyro_memo.bridge.param_store.WarmStartWarning`)
        if the stored globals were fitted to other documents, then record this corpus' fingerprint. The
        memo and the stored document counts of another corpus are dropped (the globals are kept)."""
        self._fingerprint.check(self.prefix, self.spec.raw_data(args, kwargs))
        if self.counts_corpus is not None and self.counts_corpus != self.spec.corpus_key(args, kwargs):
            self.doc_topic_counts, self.counts_corpus, self.memo = None, None, SummaryCache()

    def record_data(self, *args, **kwargs):
        """Record this call's corpus as the one the stored globals are fitted to (no warning)."""
        self._fingerprint.record(self.prefix, self.spec.raw_data(args, kwargs))

    def initial_posterior(self, *args, **kwargs):
        """Sticks at their prior; topic ``k`` is ``lam0`` plus the word counts of a random document. Drawn on
        the CPU (one seed, one start on every device), then on the tokens' device."""
        spec = self.spec
        doc, word = spec.tokens(args, kwargs)
        size = spec.plate_size(args, kwargs)
        g = torch.Generator().manual_seed(self.seed)
        pick = torch.randint(size, (spec.K,), generator=g)
        noise = 0.01 * torch.rand(spec.K, spec.V, generator=g, dtype=torch.float64)
        lam = (spec.lam0 + picked_counts(doc.cpu(), word.cpu(), pick, spec.V) + noise).to(word.device)
        rho = torch.full((spec.K,), 1.0 / (1.0 + spec.gamma), dtype=torch.float64, device=word.device)
        omega = torch.full((spec.K,), 1.0 + spec.gamma, dtype=torch.float64, device=word.device)
        return HDPPosterior(lam, rho, omega, learnable(spec.alpha, spec.alpha_prior),
                            learnable(spec.gamma, spec.gamma_prior), spec.lam0)

    def _keys(self):
        keys = ["rho", "omega", "lam"]
        if self.spec is not None:
            keys += [f"q_{c}" for c in self.spec.concentration_sites]
        return keys

    def _names(self):
        return {k: f"{self.prefix}.{k}" for k in self._keys()}

    def _missing_params(self):
        store = pyro.get_param_store()
        return any(name not in store for name in self._names().values())

    # -------------------------------------------------------- param store I/O
    @property
    def posterior(self):
        """The current :class:`~pyro_memo.topics.HDPPosterior`: a detached copy of the param store's values,
        which later steps do not change."""
        require_params(self)
        v = {k: pyro.param(n).detach().double().clone() for k, n in self._names().items()}
        s = self.spec
        alpha = s.alpha if "q_alpha" not in v else GammaConcentration(s.alpha_prior, v["q_alpha"].tolist())
        gamma = s.gamma if "q_gamma" not in v else GammaConcentration(s.gamma_prior, v["q_gamma"].tolist())
        return HDPPosterior(v["lam"], v["rho"], v["omega"], alpha, gamma, s.lam0)

    def _values(self, posterior):
        values = {"rho": posterior.rho, "omega": posterior.omega, "lam": posterior.lam}
        for c in self.spec.concentration_sites:
            conc = getattr(posterior, c)
            if not isinstance(conc, GammaConcentration):
                raise ValueError(f"the model's {c} is latent (site '{self.spec.concentration_sites[c]}'); the "
                                 f"posterior to store needs a Gamma factor for it (fit with {c}_prior)")
            values[f"q_{c}"] = posterior.rho.new_tensor(conc.q)
        return values

    def set_posterior(self, posterior):
        """Write ``posterior``'s globals into the param store (replacing old values)."""
        store = pyro.get_param_store()
        for key, name in self._names().items():
            if name in store:
                del store[name]
            pyro.param(name, self._values(posterior)[key].detach().clone(), constraint=_CONSTRAINTS[key])

    def set_update_direction(self, target):
        """Write ``current - target`` (unconstrained) into each global's ``.grad``, so that a unit
        gradient step (:class:`~pyro_memo.ClosedFormOptimizer`) lands on ``target``."""
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
        warm = self._stored(batch)
        resp, counts, summary, _ = posterior.local_step(batch.pair_doc, batch.pair_word, batch.pair_count,
                                                        batch.num_docs, init_counts=warm, max_iter=self.local_iters,
                                                        tol=self.local_tol)
        self.store_counts(batch.docs, counts, batch)
        return resp, summary

    def _stored(self, batch):
        """The batch documents' stored counts, if every one of them has counts of this corpus."""
        if self.doc_topic_counts is None or (batch.corpus and batch.corpus != self.counts_corpus):
            return None
        stored = self.doc_topic_counts[batch.docs]
        return None if bool(torch.isnan(stored[:, 0]).any()) else stored

    def store_counts(self, docs, counts, batch=None):
        """Record documents ``docs``' expected topic counts (the local parameters' state) of the corpus
        of ``batch`` (default: the recognised one); counts of another corpus are dropped."""
        size = self.spec.num_docs if batch is None else batch.size
        corpus = None if batch is None else batch.corpus
        if (self.doc_topic_counts is None or self.doc_topic_counts.shape != (size, counts.shape[1])
                or corpus != self.counts_corpus):
            self.doc_topic_counts = torch.full((size, counts.shape[1]), float("nan"),
                                               dtype=counts.dtype, device=counts.device)
            self.counts_corpus = corpus
        self.doc_topic_counts[docs] = counts

    def local_params(self, posterior, batch):
        """The guide's ``(resp per pair, theta, summary)`` for ``batch``: one exact sweep
        (``max_iter = 1``) from the stored counts, or a full local step where there are none."""
        stored = self._stored(batch)
        options = {"max_iter": self.local_iters, "tol": self.local_tol} if stored is None else {"max_iter": 1}
        resp, counts, summary, _ = posterior.local_step(batch.pair_doc, batch.pair_word, batch.pair_count,
                                                        batch.num_docs, init_counts=stored, **options)
        return resp, self._theta(posterior, counts), summary

    def unobserved_params(self, posterior, batch):
        """The guide's ``(resp per pair, theta)`` for documents whose words the call leaves out
        (``Predictive`` generating them): without word evidence a token's topic follows its document's
        weights alone, so this is the local step under topics that give every word the same likelihood
        (``q(z)`` alike for a document's tokens, ``theta = alpha E[beta] + N_d q(z)``)."""
        flat = posterior.with_globals(posterior.rho, posterior.omega, torch.ones_like(posterior.lam))
        resp, counts, _, _ = flat.local_step(batch.pair_doc, batch.pair_word, batch.pair_count, batch.num_docs,
                                             max_iter=self.local_iters, tol=self.local_tol)
        return resp, self._theta(posterior, counts)

    @staticmethod
    def _theta(posterior, counts):
        """``theta_d = alpha E[beta] + N_d`` over the ``K`` topics and the tail."""
        prior = posterior.alpha * stick_breaking_weights(posterior.rho)
        return torch.cat([counts + prior[:-1], prior[-1:].expand(len(counts), 1)], 1)

    # ------------------------------------------------------------- the guide
    def __call__(self, *args, **kwargs):
        self.setup(*args, **kwargs)
        spec, post = self.spec, self.posterior
        like = {"dtype": spec.extra["model_dtype"], "device": spec.extra["model_device"]}
        words = spec.has_words(args, kwargs)
        batch = spec.batch(args, kwargs, words=words)
        resp, theta = self.local_params(post, batch)[:2] if words else self.unobserved_params(post, batch)
        for c, site in spec.concentration_sites.items():  # outside every plate, before the sticks, as the model
            w1, w2 = getattr(post, c).q
            pyro.sample(site, dist.Gamma(torch.tensor(w1, **like), torch.tensor(w2, **like)))
        with pyro.plate(spec.stick_plate, spec.K):
            pyro.sample(spec.stick_site, dist.Beta((post.rho * post.omega).to(**like),
                                                   ((1 - post.rho) * post.omega).to(**like)))
        lam = torch.cat([post.lam, torch.full_like(post.lam[:1], post.lam0)])
        with pyro.plate(spec.topic_plate, spec.K + 1):
            pyro.sample(spec.topic_site, dist.Dirichlet(lam.to(**like)))
        with pyro.plate(spec.doc_plate, batch.size, subsample=spec.batch_indices(args, kwargs)):
            pyro.sample(spec.doc_site, dist.Dirichlet(theta.to(**like)))
        probs = torch.cat([resp, resp.new_zeros(len(resp), 1)], 1)[batch.token_pair]
        if spec.token_subsampled:
            plate = pyro.plate(spec.token_plate, len(spec.tokens(args, kwargs, words)[0]), subsample=batch.tokens)
        else:
            plate = pyro.plate(spec.token_plate, len(batch.tokens))
        with plate:
            pyro.sample(spec.assignment_site, dist.Categorical(probs=probs.to(**like)))

    # ------------------------------------------------------------ the bound
    def elbo(self, *args, **kwargs):
        """The exact HDP bound of the guide on this call's documents (the batch the call passes,
        else the whole corpus) under the current globals: the bound of the very local parameters
        the guide samples from. Pyro's ``Trace_ELBO`` of the guide estimates ``elbo + normaliser_gap``."""
        self.setup(*args, **kwargs)
        post = self.posterior
        batch = self.spec.batch(args, kwargs)
        _, _, summary = self.local_params(post, batch)
        return float(post.elbo(summary))

    def normaliser_gap(self, *args, **kwargs):
        """The true ELBO of the guide's distribution minus :meth:`elbo` for a corpus of this call's
        number of documents (closed form, :func:`~pyro_memo.bridge.normaliser_gap`; with a latent
        alpha its expectation under ``q(alpha)``, ``expected_normaliser_gap()``)."""
        self.setup(*args, **kwargs)
        post = self.posterior
        docs = self.spec.batch_indices(args, kwargs)
        size = self.spec.plate_size(args, kwargs) if docs is None else len(docs)
        return expected_normaliser_gap(post.rho, post.omega, post.alpha, size)

    # -------------------------------------------------- AutoGuide-style read-outs
    def _require_spec(self):
        if self.spec is None:
            raise RuntimeError("the guide has not seen the model yet: call guide.setup(*args) (or fit it) first")

    def sample_posterior(self, num_samples=1):
        """``num_samples`` draws of the global latent sites from the guide: the top-level sticks
        ``(num_samples, K)`` and the ``K + 1`` topics ``(num_samples, K + 1, V)`` (the last at its
        prior), and the latent concentrations ``(num_samples,)``: dict site name -> tensor. The
        document-level sites depend on the documents: run the guide (or ``Predictive``) for them."""
        self._require_spec()
        spec, post, n = self.spec, self.posterior, as_num_samples(num_samples)
        like = {"dtype": spec.extra["model_dtype"], "device": spec.extra["model_device"]}
        lam = torch.cat([post.lam, torch.full_like(post.lam[:1], post.lam0)])
        with torch.no_grad():
            sticks = dist.Beta(post.rho * post.omega, (1 - post.rho) * post.omega).sample((n,))
            topics = dist.Dirichlet(lam).sample((n,))
            out = {spec.stick_site: sticks.to(**like), spec.topic_site: topics.to(**like)}
            for c, site in spec.concentration_sites.items():
                w1, w2 = getattr(post, c).q
                out[site] = dist.Gamma(torch.tensor(w1, dtype=torch.float64), w2).sample((n,)).to(**like)
        return out
