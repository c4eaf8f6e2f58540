"""The truncated nested variational family of a DP mixture, as a Pyro guide."""

import pyro
import pyro.distributions as dist
import torch
from torch.distributions import constraints, transform_to

from ..allocation import DPSticks
from ..checks import as_positive_int, as_seed
from ..families._wishart import quiet_wishart
from ..inference import DPMixturePosterior, FullBatchVB, SummaryCache
from .call_specs import check_kind
from .param_store import DataFingerprint, check_shapes, default_prefix, require_params
from .readouts import GlobalSiteReadouts, as_num_samples
from .recognition import recognize_model
from .structure import call_signature

#: constraint names a family may declare in ``pyro_constraints`` (others: positive)
CONSTRAINTS = {"real": constraints.real, "positive_definite": constraints.positive_definite,
               "positive": constraints.positive}


class DPMixtureGuide(GlobalSiteReadouts):
    """Variational family :math:`q(v)q(\\phi)q(z)` of a DP-mixture Pyro model (Hughes & Sudderth 2013, §2.1).

    ``q(v_k) = Beta(eta1_k, eta0_k)`` and ``q(phi_k)`` (the family's conjugate form)
    for ``k <= K``; components beyond ``K`` stay at their prior (nested truncation) and
    ``q(z_n)`` puts no mass on them. The global parameters live in Pyro's param store
    under ``"{prefix}.eta1"``, ``"{prefix}.eta0"`` and ``"{prefix}.<name>"``; the
    responsibilities :math:`q(z_n)` are the exact local optimum (Hughes & Sudderth 2013, eq. 9)
    computed from them whenever the guide runs, so they are never stale.

    :param model: the Pyro model (recognised on first call, see ``pyro_memo.bridge.recognition``).
    :param int K: truncation level; defaults to ``T - 1`` (nested). ``K = T`` gives the
        direct truncation of Blei & Jordan 2006.
    :param str init: ``"kmeans++"`` or ``"random"`` initial responsibilities.
    :param int seed: seed of the initialisation.
    :param torch.dtype dtype: dtype of the variational math.
    :param str prefix: param-store name prefix; default ``"memo.<model's qualname>"`` (see
        ``pyro_memo.bridge.param_store``: two models keep their own parameters).

    A model with a latent DP concentration (``alpha = pyro.sample("alpha", dist.Gamma(s1, s2))``, see
    ``pyro_memo.bridge.recognition``) gets its factor :math:`q(\\alpha) = Gamma(w_1, w_2)` (Blei & Jordan 2006, §5):
    the guide samples the alpha site from it, with ``(w1, w2)`` in the param store under
    ``"{prefix}.q_alpha"``, and sticks beyond ``K`` from their conditional prior ``Beta(1, alpha)``.

    Like any Pyro guide it runs on any call of the model: a batch (the data plate's ``subsample``),
    the whole data (``guide(data)``, ``guide(data, None)``, ``guide(data, torch.arange(N))``) or new
    data of another size; the plate's size and subsample are read from each call. So
    ``pyro.infer.Predictive``, ``Trace_ELBO`` / ``TraceEnum_ELBO`` on the full data and
    ``infer_discrete`` work after batch training. :meth:`~pyro_memo.bridge.readouts.GlobalSiteReadouts.median`,
    :meth:`~pyro_memo.bridge.readouts.GlobalSiteReadouts.quantiles` and :meth:`sample_posterior` read out the global
    sites as Pyro's ``AutoGuide`` does.
    """

    def __init__(self, model, K=None, init="kmeans++", seed=0, dtype=torch.float64, prefix=None):
        self.model = model
        self.K = None if K is None else as_positive_int(K, "K")  # 2.5 is not truncated to 2
        self.init = init
        self.seed = as_seed(seed)
        self.dtype = dtype
        self.prefix = default_prefix(model) if prefix is None else str(prefix)
        self.spec = None
        self._specs = {}
        self._fingerprint = DataFingerprint()
        #: per-batch summaries used by :class:`~pyro_memo.MemoizedELBO`
        self.memo = SummaryCache()

    # ----------------------------------------------------------------- setup

    def setup(self, *args, **kwargs):
        """Recognise the model (once per call signature) and initialise the variational parameters
        if the param store has none under ``prefix``; stored ones are checked against the
        shapes the model needs (``ValueError`` on a mismatch) and reused (a warm start)."""
        key = call_signature(args, kwargs)
        if self.spec is not None and self.spec.raw_data_or_none(args, kwargs) is None:
            raise ValueError(self.spec.no_data_message())
        if key in self._specs:
            self.spec = self._specs[key]
        else:
            if self.spec is None or self._specs:
                self.adopt(recognize_model(self.model, *args, dtype=self.dtype, **kwargs))
            self._specs[key] = self.spec
        self._check_shapes()
        if self._missing_params():
            x = self.spec.data(args, kwargs)
            self.set_posterior(self.vb().initial_posterior(x))
            self.memo = SummaryCache()
            self._fingerprint.record(self.prefix, self.spec.raw_data(args, kwargs))
        return self

    def check_data(self, *args, **kwargs):
        """Before training on this call's data: warn (:class:`~pyro_memo.bridge.param_store.WarmStartWarning`)
        if the stored parameters were fitted to other data, then record this data's fingerprint."""
        self._fingerprint.check(self.prefix, self.spec.raw_data(args, kwargs))

    def _check_shapes(self):
        K = self.K
        expected = {k: v.shape for k, v in self.spec.family.prior_posterior(K).items()}
        expected.update(eta1=(K,), eta0=(K,))
        if self.spec.alpha_prior is not None:
            expected.update(q_alpha=(2,))
        check_shapes(self.prefix, self._names(), expected)

    def adopt(self, spec):
        """Take ``spec`` (from :func:`recognize_model`) as this guide's model description and fix ``K``."""
        check_kind(spec, "dp", "DPMixtureGuide")
        T = spec.T
        K = max(T - 1, 1) if self.K is None else int(self.K)
        if not 1 <= K <= T:
            raise ValueError(f"K = {K} must be between 1 and the model's T = {T}")
        self.spec, self.K = spec, K
        return self

    @property
    def sticks(self):
        return DPSticks(self.spec.alpha, "direct" if self.K == self.spec.T else "nested", self.spec.alpha_prior)

    def vb(self, **options):
        """A :class:`~pyro_memo.FullBatchVB` matching this guide's family and truncation."""
        options.setdefault("init", self.init)
        options.setdefault("seed", self.seed)
        return FullBatchVB(self.spec.family, self.K, self.spec.alpha, self.sticks.truncation,
                           alpha_prior=self.spec.alpha_prior, **options)

    def _names(self):
        keys = ["eta1", "eta0"] + list(self.spec.family.prior_names)
        if self.spec.alpha_prior is not None:
            keys.append("q_alpha")
        return {k: f"{self.prefix}.{k}" for k in keys}

    def _missing_params(self):
        store = pyro.get_param_store()
        return any(name not in store for name in self._names().values())

    # -------------------------------------------------------- param store I/O
    @property
    def posterior(self):
        """The current :class:`~pyro_memo.DPMixturePosterior`: a detached copy of the param store's
        values, which later steps do not change."""
        return self._posterior(detach=True)

    def _posterior(self, detach):
        require_params(self)
        names = self._names()
        values = {k: pyro.param(n).to(self.dtype) for k, n in names.items()}
        if detach:
            values = {k: v.detach().clone() for k, v in values.items()}
        component = {k: values[k] for k in self.spec.family.prior_names}
        return DPMixturePosterior(self.spec.family, self.sticks, component, values["eta1"], values["eta0"],
                                  values.get("q_alpha"))

    @staticmethod
    def _values(posterior):
        """The param-store values of ``posterior``: component parameters, sticks and (learnt alpha) ``q_alpha``."""
        values = dict(posterior.component, eta1=posterior.eta1, eta0=posterior.eta0)
        if posterior.sticks.alpha_prior is not None:
            q = posterior.q_alpha
            values["q_alpha"] = posterior.eta1.new_tensor(posterior.sticks.alpha_prior) if q is None else q
        return values

    def _constraint(self, key):
        """The param-store constraint of ``key``, as the family declares it (sticks: positive)."""
        return CONSTRAINTS[self.spec.family.pyro_constraints.get(key, "positive")]

    def set_posterior(self, posterior):
        """Write ``posterior``'s parameters into the param store (replacing old values)."""
        store = pyro.get_param_store()
        names = self._names()
        values = self._values(posterior)
        for key, name in names.items():
            if name in store:
                del store[name]
            pyro.param(name, values[key].detach().clone(), constraint=self._constraint(key))

    def set_update_direction(self, target):
        """Write ``current - target`` (unconstrained) into each parameter's ``.grad``.

        A unit gradient step then lands exactly on ``target``: this is how the closed-form
        update travels through Pyro's ``SVI.step`` (see :class:`ClosedFormOptimizer`).
        """
        values = self._values(target)
        for key, name in self._names().items():
            unconstrained = pyro.param(name).unconstrained()
            constraint = self._constraint(key)
            goal = transform_to(constraint).inv(values[key].to(unconstrained))
            unconstrained.grad = unconstrained.detach() - goal

    # ------------------------------------------------------------- the guide
    def _globals(self, post):
        """Sample the global sites (a latent alpha, the sticks, then the ``T`` components; beyond ``K`` at
        the prior, sticks beyond ``K`` at their conditional prior ``Beta(1, alpha)``)."""
        spec, T, K, fam = self.spec, self.spec.T, self.K, self.spec.family
        like = {"dtype": spec.extra["model_dtype"], "device": spec.extra["model_device"]}
        alpha = spec.alpha
        if spec.alpha_site is not None:
            q = post.q_alpha.to(**like)
            # the model site's shape and event dims (e.g. (1,), or (1,) with .to_event(1))
            q_alpha = dist.Gamma(q[0], q[1]).expand(spec.alpha_shape)
            event_dim = spec.alpha_event_dim
            alpha = pyro.sample(spec.alpha_site, q_alpha.to_event(event_dim) if event_dim else q_alpha)
            if event_dim:  # its event dims (of size 1) dropped: batch dims (particles) stay on their left
                alpha = alpha.reshape(alpha.shape[:alpha.dim() - event_dim])
        if T > 1:
            n = min(K, T - 1)
            eta1 = torch.cat([post.eta1[:n], post.eta1.new_ones(T - 1 - n)]).to(**like)
            eta0 = torch.cat([post.eta0[:n], post.eta0.new_ones(T - 1 - n)]).to(**like)
            if n < T - 1:
                tail = torch.arange(T - 1, device=eta0.device) >= n
                eta0 = torch.where(tail, torch.as_tensor(alpha, **like), eta0)
            with pyro.plate(spec.stick_plate, T - 1, dim=spec.dim("sticks")):
                pyro.sample(spec.stick_site, dist.Beta(eta1, eta0))
        prior = fam.prior_posterior(T - K)
        hyper = {k: torch.cat([v, prior[k]]).to(**like) for k, v in post.component.items()}
        with pyro.plate(spec.component_plate, T, dim=spec.dim("components")), quiet_wishart():
            spec.sites.sample(hyper)  # torch's Wishart sampler warns falsely on every draw (quiet_wishart)
        return like

    def __call__(self, *args, **kwargs):
        self.setup(*args, **kwargs)
        # not detached: gradient-based SVI (e.g. TraceEnum_ELBO + Adam) differentiates through it
        spec, post = self.spec, self._posterior(detach=False)
        like = self._globals(post)
        size, batch, subsample_size = spec.plate_args(args, kwargs)
        dim = spec.dim("data")
        plate = pyro.plate(spec.data_plate, size, subsample_size=subsample_size, subsample=batch, dim=dim)
        with plate as idx:
            resp = post.responsibilities(spec.data(args, kwargs, idx))
            resp = torch.cat([resp, resp.new_zeros(resp.shape[0], spec.T - self.K)], -1)
            resp = resp.reshape((resp.shape[0],) + (1,) * (-dim - 1) + (spec.T,))  # the plate's batch dim
            pyro.sample(spec.assignment_site, dist.Categorical(probs=resp.to(**like)))

    # -------------------------------------------------- AutoGuide-style read-outs
    def _require_spec(self):
        if self.spec is None:
            raise RuntimeError("the guide has not seen the model yet: call guide.setup(*args) (or fit it) first")

    def sample_posterior(self, num_samples=1):
        """``num_samples`` joint draws of the global latent sites from the guide (sticks and the ``T``
        component sites): dict site name -> tensor ``(num_samples, *site shape)``. The local
        assignment site depends on the data: run the guide (or ``Predictive``) for it."""
        self._require_spec()
        num_samples = as_num_samples(num_samples)
        post = self.posterior
        draws = {}
        with torch.no_grad(), pyro.poutine.block():
            for _ in range(int(num_samples)):
                trace = pyro.poutine.trace(self._globals).get_trace(post)
                for name, site in trace.nodes.items():
                    if site["type"] == "sample" and not site["is_observed"] and name in self._global_names():
                        draws.setdefault(name, []).append(site["value"])
        return {k: torch.stack(v) for k, v in draws.items()}

    def _global_names(self):
        names = set(self.spec.param_sites.values())
        if self.spec.stick_site is not None:
            names.add(self.spec.stick_site)
        if self.spec.alpha_site is not None:
            names.add(self.spec.alpha_site)
        return names
