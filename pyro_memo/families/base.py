"""The interface every conjugate observation family implements.

A family is a likelihood :math:`F(x \\mid \\phi)` with its conjugate prior
:math:`H(\\phi \\mid \\lambda_0)` (Hughes & Sudderth 2013, eq. 2). Everything here is pure torch:
no Pyro, any dtype and device. Families talk to the rest of the package through
*summaries*: responsibility-weighted sufficient statistics with a leading component
dimension ``K`` (Hughes & Sudderth 2013, eq. 7), which are additive over data batches.

Conventions shared by all families:

- ``x`` is an ``(N, D)`` tensor (``D`` = dimension, or vocabulary size for counts).
- ``resp`` is an ``(N, K)`` tensor of responsibilities :math:`\\hat r_{nk}` (or, for
  :meth:`ConjugateFamily.sparse_stats`, a :class:`~pyro_memo.families.SparseResponsibilities`
  keeping ``L`` of them per item).
- ``counts`` is the ``(K,)`` tensor :math:`\\hat N_k = \\sum_n \\hat r_{nk}`.
- ``stats`` is a ``dict`` of ``(K, ...)`` tensors :math:`s_k(x)`.
- ``post`` is a ``dict`` of ``(K, ...)`` tensors holding the parameters of
  :math:`q(\\phi_k)`, which has the prior's form; ``self.prior`` holds the same keys
  without the ``K`` dimension.
"""

import functools
import math
import warnings
from abc import ABC, abstractmethod
from collections.abc import Mapping

import numpy as np
import torch

from ..checks import check_device
from ._products import PRODUCT_CACHE

#: family name -> class: every subclass that sets its own ``name`` registers itself here
#: (``pyro_memo.families.FAMILIES`` is this dict)
REGISTRY = {}


class ConjugateFamily(ABC):
    """Base class of conjugate exponential families.

    :param dict prior: prior hyperparameters, keyed as :attr:`prior_names`.
    :param torch.dtype dtype: floating dtype of the variational math (float64 default).
    :param device: torch device of the hyperparameters.
    """

    #: short name used by the CLI and in error messages
    name = None
    #: keys of the prior / posterior parameter dicts
    prior_names = ()
    #: keys of the sufficient statistics dict
    stat_names = ()
    #: the prior key that sets how spread out a component is expected to be (a covariance scale),
    #: multiplied by :meth:`~pyro_memo.ConjugateFamily.with_prior`'s ``scale``; ``None`` for families without one
    spread_key = None
    #: the highest power of the data in the sufficient statistics (2 for a Gaussian's scatter),
    #: which bounds the data's magnitude (``check_magnitude()``)
    stat_degree = 1

    # ------------------------------------------------------------- Pyro form
    # How the family is written as Pyro sites, declared as data and as functions that are
    # handed ``pyro.distributions`` (families import no Pyro). The Pyro bridge reads these:
    # the model/guide site writer (pyro_memo.models.component_sites), recognition
    # (pyro_memo.bridge.recognition) and the guide's param-store constraints.

    #: distribution class names the observed site may have, e.g. ``("Poisson",)``
    pyro_observation = ()
    #: of those, the ones whose values are integer ids, one-hot encoded into the family's rows
    pyro_one_hot = ()
    #: role -> (distribution class name of the component site, event dims of its value), in
    #: sampling order; the role is also the site's default name and the key of ``params``
    pyro_components = {}
    #: prior / posterior key -> constraint name (``"real"``, ``"positive_definite"``); others ``"positive"``
    pyro_constraints = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("name"):
            REGISTRY[cls.name] = cls

    @staticmethod
    def pyro_prior(dist, hyper, sample):
        """Sample the component parameters: ``sample(role, fn)`` is ``pyro.sample`` under the
        role's site name, ``dist`` is ``pyro.distributions``, ``hyper`` the prior (or posterior)
        dict with a leading component dimension. Returns ``{role: value}``."""
        raise NotImplementedError

    @staticmethod
    def pyro_likelihood(dist, theta, x=None):
        """The observation distribution given per-item parameters ``theta`` (``{role: value}``)."""
        raise NotImplementedError

    @staticmethod
    def prior_from_pyro(sites, read):
        """Recognition rule: the prior hyperparameters read off traced component sites.

        :param dict sites: role -> ``(fn, value)``, ``fn`` the site's distribution stripped of
            Independent / Expanded wrappers.
        :param read: ``read.constant(t, event_dim, role, what)`` returns the common value of ``t``
            over the components (raising a named error if they differ); ``read.first(t, event_dim)``
            the first component's.
        :returns: the prior dict (keys :attr:`~pyro_memo.ConjugateFamily.prior_names`).
        """
        raise NotImplementedError

    @staticmethod
    def pyro_observation_constants(obs, constant):
        """Recognition rule for hyperparameters fixed in the observed site itself (e.g. a known
        noise covariance): ``obs`` is the observation's distribution stripped of wrappers and
        ``constant(t, event_dim, what)`` the common value of ``t`` over the items (raising a named
        error if they differ). Returns prior entries that complete :meth:`prior_from_pyro`'s;
        none by default."""
        return {}

    def __init__(self, prior, dtype=torch.float64, device=None):
        if not isinstance(prior, Mapping):
            name = type(self).__name__
            raise TypeError(f"{name}(prior): the prior is a dict with keys {sorted(self.prior_names)}, not "
                            f"{type(prior).__name__} {prior!r:.40}; {name}.from_data(x) gives a default scaled to "
                            "data x")
        check_dtype_device(dtype, device)
        missing = set(self.prior_names) - set(prior)
        unknown = set(prior) - set(self.prior_names)
        if missing or unknown:
            raise ValueError(
                f"{type(self).__name__} prior needs keys {sorted(self.prior_names)}; "
                f"missing {sorted(missing)}, unknown {sorted(unknown)}"
            )
        self.prior = {
            k: torch.as_tensor(v, dtype=dtype, device=device) for k, v in prior.items()
        }
        for key, value in self.prior.items():
            if not bool(torch.isfinite(value).all()):
                raise ValueError(f"{type(self).__name__} prior '{key}' has NaN or inf entries")
        self._check_prior()

    def state_dict(self):
        """Name, prior, dtype and :meth:`state_extras` as plain tensors and strings (checkpoints); see
        :func:`~pyro_memo.families.family_from_state`."""
        return {"family": self.name, "prior": {k: v.cpu() for k, v in self.prior.items()},
                "dtype": str(self.dtype).replace("torch.", ""),
                **{k: v.cpu() for k, v in self.state_extras().items()}}

    def state_extras(self):
        """Constructor arguments beyond the prior, dtype and device that define how this family's
        statistics read (tensors by name; none by default): :meth:`to`, :meth:`with_prior` and
        :meth:`~pyro_memo.ConjugateFamily.state_dict` keep them, so summaries made by this family stay valid
        for the copies."""
        return {}

    @classmethod
    def extras_from_state(cls, d):
        """The :meth:`state_extras` of the family a :meth:`~pyro_memo.ConjugateFamily.state_dict` ``d`` describes (for
        :func:`~pyro_memo.families.family_from_state`; none by default)."""
        return {}

    # ------------------------------------------------------------------ setup
    @property
    def dtype(self):
        return next(iter(self.prior.values())).dtype

    @property
    def device(self):
        return next(iter(self.prior.values())).device

    @property
    @abstractmethod
    def dim(self):
        """Dimension ``D`` of one observation."""

    def to(self, dtype=None, device=None):
        """A copy of this family with hyperparameters moved to ``dtype`` / ``device``."""
        check_dtype_device(dtype, device)
        prior = {k: v.to(dtype=dtype or self.dtype, device=device) for k, v in self.prior.items()}
        return type(self)(prior, dtype=dtype or self.dtype, device=device or self.device, **self.state_extras())

    def with_prior(self, scale=1.0, *, scale_name="scale", **values):
        """A copy of this family with some prior hyperparameters replaced.

        :param float scale: multiplies the spread hyperparameter :attr:`spread_key` (bnpy's ``sF``):
            above 1 the prior expects broader components, below 1 narrower ones (how many
            components the data then support is measured in the user guide's "Choosing K, alpha
            and the priors").
        :param values: ``key=value`` for keys of :attr:`~pyro_memo.ConjugateFamily.prior_names`: a number
            fills the key's shape (a scalar, or every entry of a vector); a tensor must have the key's shape.
        :raises ValueError: naming the key for an unknown key, a number for a matrix, a wrong
            shape, a scale that is not positive and finite or given to a family without
            :attr:`spread_key`, or a value outside the prior's domain.
        :param str scale_name: what the caller calls ``scale`` in these messages (the CLI's ``--prior-scale``,
            the estimator's ``prior_scale=``).
        """
        prior = dict(self.prior)
        for key, value in values.items():
            if key not in prior:
                raise ValueError(f"the {self.name} family has no prior '{key}'; its priors are "
                                 f"{', '.join(self.prior_names)}")
            value = self._prior_tensor(key, value)
            if value.dim() == 0 and prior[key].dim() >= 2:
                raise ValueError(f"{self.name} prior '{key}' is a matrix; give the whole "
                                 f"{tuple(prior[key].shape)} matrix, or scale the default one with {scale_name} "
                                 "instead of one number")
            if value.dim() == 0:
                value = value.expand_as(prior[key]).clone()
            if value.shape != prior[key].shape:
                raise ValueError(f"{self.name} prior '{key}' has shape {tuple(prior[key].shape)}; "
                                 f"got {tuple(value.shape)}")
            prior[key] = value
        scale = float(scale)
        if scale != 1.0:
            if not (scale > 0 and scale < float("inf")):
                raise ValueError(f"the prior scale {scale_name} must be a positive finite number; got {scale}")
            if self.spread_key is None:
                raise ValueError(f"the {self.name} family has no spread hyperparameter to scale; set its priors "
                                 f"({', '.join(self.prior_names)}) instead")
            prior[self.spread_key] = prior[self.spread_key] * scale
        return type(self)(prior, dtype=self.dtype, device=self.device, **self.state_extras())

    def _prior_tensor(self, key, value):
        """``value`` for prior ``key`` as a tensor of this family's dtype and device."""
        boolean = isinstance(value, bool) or getattr(value, "dtype", None) in (torch.bool, bool)
        try:
            if not boolean:
                return torch.as_tensor(value, dtype=self.dtype, device=self.device)
        except (TypeError, ValueError, RuntimeError):
            pass
        raise ValueError(f"{self.name} prior '{key}' must be a real number or an array of them; got {value!r}")

    def _check_prior(self):
        """Raise :class:`ValueError` if hyperparameters are outside their domain."""

    @classmethod
    @abstractmethod
    def from_data(cls, x, dtype=torch.float64, device=None, **overrides):
        """Default prior scaled to the data ``x``; keyword overrides replace defaults."""

    def check_data(self, x, values_checked=False):
        """Validate ``x`` and return it as an ``(N, D)`` tensor of this family's dtype.

        Data that are part of an autograd graph (``requires_grad``) are detached: they are observations,
        not parameters, and no fit differentiates through them. Booleans are read as 0 / 1.

        :param bool values_checked: ``x``'s values passed this check before (a fixed batch read again
            on a later lap): its shape is checked, its values are not scanned again.

        :raises ValueError: naming the problem (not real numbers, rank, width, NaN/inf, magnitude for the
            dtype, support).
        """
        given = as_data_tensor(x, self.name)
        if given.shape[1] != self.dim:
            raise ValueError(
                f"{self.name} data has {given.shape[1]} columns but the prior has dimension {self.dim}"
            )
        x = given.to(dtype=self.dtype, device=self.device)
        if values_checked:
            return x
        check_finite(x, self.name, given)
        check_magnitude(x, self.name, self.stat_degree, small=False)  # the data's scale: initial_summary
        self._check_support(x)
        return x

    def _check_support(self, x):
        """Raise :class:`ValueError` if ``x`` is outside the likelihood's support."""

    def check_resolution(self, x, dtype=None, fix=None):
        """Raise :class:`ValueError` if ``dtype`` (this family's by default) cannot resolve the spread of the
        ``(N, D)`` data ``x`` (data that stand for all of it, as ``check_magnitude``'s): nothing for
        families whose parameters are not in the data's units; ``CentredFamily`` checks its columns."""

    # -------------------------------------------------------------- summaries
    @abstractmethod
    def stats(self, x, resp):
        """Responsibility-weighted sufficient statistics :math:`s_k(x)` (Hughes & Sudderth 2013, eq. 7)."""

    def local_step_numbers(self, K):
        """Numbers a local step of ``K`` components holds at once per item, which bounds its chunks
        (:meth:`~pyro_memo.DPMixturePosterior.chunk_rows`): by default :math:`KD + D^2`, room
        for a ``(K, D)`` temporary per item and a ``D x D`` one."""
        return K * self.dim + self.dim * self.dim

    def item_products(self, x, keep=False):
        """Per-item products that a chunk's expected log-likelihood and its statistics both need,
        built once per chunk of a local step and passed to both (``products`` of the
        :meth:`log_lik_function`'s function and of :meth:`chunk_stats`); ``None`` (the default) for
        families that need none. ``keep``: ``x`` is a whole batch, whose products a fit may keep for
        its later reads of the same items (:data:`~pyro_memo.families.PRODUCT_CACHE`)."""
        return None

    def chunk_stats(self, x, resp, products=None):
        """:meth:`stats` of one chunk of a local step, in a form that adds across chunks and that
        :meth:`finish_stats` turns into :meth:`stats` once their sum is formed: ``finish_stats`` of the
        sum over chunks equals ``stats`` of all the items. By default the statistics themselves; a
        family whose statistics are unpacked from a cheaper form (:class:`ZeroMeanGaussian`'s packed
        second moments) sums that form and unpacks once per local step. ``products``: the chunk's
        :meth:`item_products`, for the families that have them."""
        return self.stats(x, resp)

    def finish_stats(self, total):
        """:meth:`stats` from the sum over chunks of :meth:`chunk_stats` (by default that sum itself)."""
        return total

    def sparse_stats(self, x, resp):
        """:meth:`stats` of a :class:`~pyro_memo.families.SparseResponsibilities` ``resp``, equal to
        ``stats(x, resp.dense())`` at :math:`O(NL)` instead of :math:`O(NK)` family terms (Hughes &
        Sudderth 2016). The statistics are linear in each component's column of responsibilities,
        so component ``k``'s are :meth:`stats` of the items that keep ``k``, with their weights as a
        single column; components no item keeps get the statistics of no data."""
        empty = self.stats(x[:0], x.new_zeros((0, 1)))
        parts = [empty] * resp.K
        for k, items, weights in resp.groups():
            parts[k] = self.stats(x[items], weights.unsqueeze(-1))
        return {name: torch.cat([part[name] for part in parts]) for name in empty}

    @abstractmethod
    def posterior(self, counts, stats):
        """Conjugate update :math:`\\hat\\lambda_k = \\lambda_0 + s_k(x)` (Hughes & Sudderth 2013, eq. 10)."""

    #: posterior parameters that may take any real value (the others are positive, or positive
    #: definite for square matrices); see :meth:`valid`
    real_parameters = ("m",)

    def valid(self, post):
        """``(K,)`` booleans: components whose posterior parameters ``post`` are a valid
        distribution: positive definite for scale matrices (a Cholesky factorisation succeeds, which
        LAPACK refuses for NaN), positive for the other parameters (``False`` for NaN), finite for
        :attr:`real_parameters`."""
        ok = None
        for name, value in post.items():
            if value.dim() == 3 and value.shape[-1] == value.shape[-2]:
                good = torch.linalg.cholesky_ex(value)[1] == 0
            else:
                rows = value.reshape(value.shape[0], -1)
                good = (torch.isfinite(rows) if name in self.real_parameters else rows > 0).all(-1)
            ok = good if ok is None else ok & good
        return ok

    def prior_posterior(self, K):
        """The prior written as a posterior dict with ``K`` identical components."""
        return {k: v.expand((K,) + v.shape).clone() for k, v in self.prior.items()}

    # ------------------------------------------------------------- ELBO terms
    @abstractmethod
    def expected_log_lik(self, x, post):
        """:math:`E_q[\\log p(x_n \\mid \\phi_k)]` for all ``n, k``: an ``(N, K)`` tensor."""

    def log_lik_function(self, post, dtype=None):
        """``x ->`` :meth:`expected_log_lik` ``(x, post)``. Families whose expected log-likelihood needs
        costly terms of ``post`` alone (Cholesky factors) compute them once here, for the many chunks
        of a local step; the default computes everything per call.

        ``dtype`` (e.g. float32, for the mixed-precision local step): the precision of the result and
        of the :math:`O(NK)` products with the data; the terms of ``post`` alone stay in its own
        precision, where an ill-conditioned scale matrix still factorises. The default computes in
        the family's precision and converts the result (exact, no faster)."""
        if dtype is None or dtype == self.dtype:
            return lambda x: self.expected_log_lik(x, post)
        return lambda x: self.expected_log_lik(x.to(self.dtype), post).to(dtype)

    def column_log_lik_function(self, post, dtype=None):
        """``(x, columns, products=None) ->`` the expected log-likelihoods of items ``x`` under the
        components ``columns`` only: ``(N, len(columns))``, column ``j`` that of component
        ``columns[j]`` (the restricted candidates of a sparse local step,
        ``candidate_groups()``). ``products``: the items' :meth:`item_products`.
        The default computes all ``K`` columns and keeps those asked for (no saving); families whose
        cost is per component override it."""
        log_lik = self.log_lik_function(post, dtype)

        def column_log_lik(x, columns, products=None):
            full = log_lik(x) if products is None else log_lik(x, products)
            return full[:, columns]

        return column_log_lik

    @abstractmethod
    def expected_log_lik_from_stats(self, counts, stats, post):
        """:math:`\\sum_n \\hat r_{nk} E_q[\\log p(x_n \\mid \\phi_k)]` from summaries: ``(K,)``.

        This is the data term of Hughes & Sudderth 2013, eq. 8, linear in the summaries.
        """

    @abstractmethod
    def kl_to_prior(self, post):
        """:math:`KL(q(\\phi_k) \\| H(\\phi_k \\mid \\lambda_0))` for each component: ``(K,)``."""

    @abstractmethod
    def log_marginal(self, counts, stats, post=None):
        """:math:`\\log \\int \\prod_n F(x_n \\mid \\phi) H(\\phi)\\, d\\phi` of a summary: ``(K,)``.

        Exact for hard assignments; for soft summaries it is the quantity Hughes & Sudderth 2013
        eq. 12 ranks merge candidates with. ``post``: :meth:`posterior` ``(counts, stats)`` when the
        caller has it already.
        """

    def log_predictive(self, x, counts, stats):
        """Posterior predictive :math:`\\log p(x_n \\mid S_k)` of items ``x`` ``(n, D)`` (checked, this
        family's dtype) under the components with summaries ``counts`` ``(K,)``, ``stats``: ``(n, K)``.

        The conjugate predictive as a ratio of marginal likelihoods (Blei & Jordan 2006, §4),
        :math:`\\log p(S_k + s(x_n)) - \\log p(S_k)` with :meth:`log_marginal`, which equals
        :math:`\\log E_{q(\\phi_k)}[F(x_n \\mid \\phi_k)]` when :math:`q(\\phi_k)` is the posterior of
        :math:`S_k`. Forms ``n K`` joined summaries; families with a closed form override it."""
        n, K = x.shape[0], counts.shape[0]
        ones, items = item_summaries(self, x)
        joined_counts = (counts.unsqueeze(0) + ones.unsqueeze(1)).reshape(n * K)
        joined = {key: (stats[key].unsqueeze(0) + items[key].unsqueeze(1)).reshape(n * K, *items[key].shape[1:])
                  for key in stats}
        return self.log_marginal(joined_counts, joined).reshape(n, K) - self.log_marginal(counts, stats)

    @abstractmethod
    def point_estimates(self, post):
        """Readable posterior summaries per component (e.g. ``means``, ``covariances``): a dict
        of ``(K, ...)`` tensors."""

    # ------------------------------------------------ explicit parameter values
    @abstractmethod
    def log_density(self, x, params):
        """:math:`\\log F(x_n \\mid \\phi_n)` at explicit parameters, ``params`` batched like ``x``."""

    @abstractmethod
    def log_prior_density(self, params):
        """:math:`\\log H(\\phi_k \\mid \\lambda_0)` at explicit parameters: ``(K,)``."""

    def sample_posterior(self, post):
        """One draw :math:`\\phi_k \\sim q(\\phi_k)` per component, as the ``params`` dict of
        :meth:`log_density` (``(K, ...)`` tensors). Uses torch's global random generator
        (seed it, or wrap the caller in ``torch.random.fork_rng``)."""
        raise NotImplementedError(f"{type(self).__name__} has no posterior sampler")

    @staticmethod
    def example_data(labels, clusters, D, generator):
        """``(len(labels), D)`` items in ``clusters`` well-separated groups in the likelihood's
        support, item ``n`` in group ``labels[n]`` (test fixtures and demos)."""
        raise NotImplementedError

    def __repr__(self):
        return f"{type(self).__name__}(dim={self.dim}, dtype={self.dtype})"


class CentredFamily(ConjugateFamily):
    """A family with an unknown mean (prior key ``m``) whose statistics are moments of
    :math:`x_n - c` about a fixed centre :math:`c` (``centre``, ``(D,)``): by default the prior mean
    :math:`m_0`, which :meth:`~pyro_memo.ConjugateFamily.from_data` sets to the data mean. The centre is fixed when the
    family is made, so the statistics stay additive over batches, and it keeps them free of the data's offset:
    raw moments :math:`\\sum_n r_{nk} x_n^2` of data shifted by :math:`10^8` carry rounding errors of
    order :math:`10^{16}\\epsilon N` (several units per item) once the mean is taken off, more than the
    spread of a unit-variance component.

    ``centre=0`` gives raw moments: a :meth:`~pyro_memo.ConjugateFamily.state_dict` without a centre (written before the
    statistics were centred) is read with it, so the summaries saved with it keep their meaning.
    """

    def __init__(self, prior, dtype=torch.float64, device=None, centre=None):
        super().__init__(prior, dtype=dtype, device=device)
        m = self.prior["m"]
        centre = m if centre is None else torch.as_tensor(centre, dtype=m.dtype, device=m.device)
        if centre.shape not in ((), (1,), m.shape):
            raise ValueError(f"{self.name} centre must be a number or a {tuple(m.shape)} vector; got shape "
                             f"{tuple(centre.shape)}")
        if not bool(torch.isfinite(centre).all()):
            raise ValueError(f"{self.name} centre has NaN or inf entries")
        self.centre = centre.expand_as(m).clone()

    @property
    def dim(self):
        return self.prior["m"].shape[-1]

    def _check_prior(self):
        """The mean ``m`` is a ``(D,)`` vector; subclasses check their other keys after calling this."""
        m = self.prior["m"]
        if m.dim() != 1:
            raise ValueError(f"{self.name} prior 'm' must be a (D,) vector; got {tuple(m.shape)}")

    def check_resolution(self, x, dtype=None, fix=None):
        """Raise :class:`ValueError` if a column of the ``(N, D)`` data ``x`` spreads over fewer than
        ``RESOLUTION_STEPS`` steps of ``dtype`` (this family's by default) at its largest magnitude
        (``check_resolution``): the component means are numbers of that dtype in the data's units, so
        they are rounded to those steps, and so are the data themselves. ``fix``: what the message suggests
        besides centring (default: fitting in float64, for float32)."""
        check_resolution(x, self.name, self.dtype if dtype is None else dtype, fix)

    def state_extras(self):
        """The centre of the statistics."""
        return {"centre": self.centre}

    @classmethod
    def extras_from_state(cls, d):
        """The saved centre; 0 (raw moments) for a state saved before the statistics were centred."""
        return {"centre": d.get("centre", 0.0)}


def item_summaries(family, x, rows=512):
    """Each item's own sufficient statistics: counts ``(n,)`` of ones and stats ``(n, ...)``,
    computed ``rows`` items at a time (each chunk's statistics are taken with an identity
    responsibility matrix, so the cost stays linear in ``n``)."""
    parts = []
    for lo in range(0, x.shape[0], rows):
        chunk = x[lo:lo + rows]
        parts.append(family.stats(chunk, torch.eye(chunk.shape[0], dtype=x.dtype, device=x.device)))
    stats = {key: torch.cat([p[key] for p in parts]) for key in parts[0]}
    return torch.ones(x.shape[0], dtype=x.dtype, device=x.device), stats


def as_data_tensor(x, name):
    """``x`` as a non-empty 2-D ``(N, D)`` tensor of real numbers (any real dtype; booleans kept, read as
    0 / 1 when converted), detached from any autograd graph: data are observations, not parameters
    (a tensor with ``requires_grad`` broke the fits' in-place products with a raw autograd error).

    :raises ValueError: naming ``name`` for strings, objects or other non-numbers, complex numbers (their
        imaginary part would be dropped), another rank, no rows or no columns.
    """
    try:
        with warnings.catch_warnings():  # a read-only array (np.load(mmap_mode="r")) is wrapped as it is: no fit
            # writes to its data, so torch's warning that writing to it is undefined says nothing to the user
            warnings.filterwarnings("ignore", "The given NumPy array is not writable", UserWarning)
            x = torch.as_tensor(_wrappable(x))
    except (TypeError, ValueError, RuntimeError):
        kind = getattr(x, "dtype", type(x).__name__)
        raise ValueError(f"{name} data must be a numeric (N, D) array or tensor; got {kind}") from None
    if x.is_complex():
        raise ValueError(f"{name} data must be real numbers; got complex dtype {str(x.dtype).removeprefix('torch.')} "
                         f"(take x.real, x.imag or abs(x) as the data meant)")
    if x.dim() != 2:
        raise ValueError(f"{name} data must be a 2-D (N, D) array; got shape {tuple(x.shape)}")
    if x.shape[0] == 0:
        raise ValueError(f"{name} data is empty (N = 0)")
    if x.shape[1] == 0:
        raise ValueError(f"{name} data has no columns (D = 0); got shape {tuple(x.shape)}")
    return x.detach() if x.requires_grad else x  # the same object otherwise: PRODUCT_CACHE finds it by it


def _wrappable(x):
    """``x``, or its copy when it is a numpy array torch cannot wrap: a view with a negative stride
    (``x[::-1]``, ``np.flip(x)``), or numbers in the other byte order (a big-endian ``.npy`` file), which
    ``torch.as_tensor`` refuses (copied in this machine's byte order)."""
    if isinstance(x, np.ndarray) and not x.dtype.isnative:
        return x.astype(x.dtype.newbyteorder("="))
    if isinstance(x, np.ndarray) and any(step < 0 for step in x.strides):
        return x.copy()
    return x


def _as_float(x, dtype, device, name):
    """``x`` as a float tensor of ``dtype`` on ``device``, checked to hold no NaN or inf (nor values its
    conversion to ``dtype`` made infinite: :func:`check_finite`)."""
    given = as_data_tensor(x, name)
    x = (given if given.is_floating_point() else given.to(dtype)).to(dtype=dtype, device=device)
    check_finite(x, name, given)
    return x


def check_dtype_device(dtype, device):
    """Raise :class:`ValueError` for a ``dtype`` other than float32 / float64 (``None``: kept) or a ``device``
    the fits do not run on (:func:`~pyro_memo.checks.check_device`), before torch meets them (its raw
    RuntimeError for ``"gpu"``, a Cholesky not implemented for float16, ``finfo`` of an integer)."""
    if dtype is not None and dtype not in (torch.float32, torch.float64):
        raise ValueError(f"dtype must be torch.float32 or torch.float64; got {dtype!r}")
    check_device(device)


def data_for_defaults(x, dtype, device, family):
    """``x`` as a float tensor for computing the data-scaled default priors of the class ``family``."""
    check_dtype_device(dtype, device)
    x = _as_float(x, dtype, device, family.name)
    check_magnitude(x, family.name, family.stat_degree)
    return x


#: rows per chunk of :func:`data_moments` (8 MB of float64 at D = 16)
MOMENT_ROWS = 65_536


def data_moments(x, centred=True, full=True, rows=MOMENT_ROWS):
    """The moments the default priors are scaled to, accumulated in float64 whatever ``x``'s dtype:
    ``(mean, second, mean_square)`` for the ``(N, D)`` data ``x``, with ``mean`` the ``(D,)`` column means,
    ``second`` :math:`\\frac1N \\sum_n (x_n - \\bar x)(x_n - \\bar x)^T` (``(D, D)``; about 0 with
    ``centred=False``; only its diagonal, ``(D,)``, with ``full=False``) and ``mean_square`` the scalar
    :math:`\\overline{x^2}`. Two passes over chunks of ``rows`` rows, so no float64 copy of the data is formed.

    In float32 itself the mean of data far from the origin is rounded, and the spread about it is then of the
    order of that rounding: unit-spread data shifted by 4e6, a few of float32's steps apart, had a variance
    below :func:`spread_scale`'s round-off bound, so the default prior fell back to their mean square (1.6e13)
    and the fit merged every cluster into one. About a float64 mean, float32 data that are all the same have
    no spread at all, and any two distinct values keep theirs."""
    n = x.shape[0]
    total = torch.zeros(x.shape[1], dtype=torch.float64, device=x.device)
    for chunk in x.split(rows):
        total += chunk.to(torch.float64).sum(0)
    mean = total / n
    shift = mean if centred else torch.zeros_like(mean)
    second = 0.0
    square = torch.zeros((), dtype=torch.float64, device=x.device)
    for chunk in x.split(rows):
        wide = chunk.to(torch.float64)
        y = wide - shift
        second = second + (y.T @ y if full else (y * y).sum(0))
        square += (wide * wide).sum()
    return mean, second / n, square / x.numel()


#: a data-derived variance at most ``(ROUND_OFF_ULPS * eps)**2`` times the data's mean square is round-off
#: of the mean, not spread: the variance of identical points, computed about their rounded mean, is measured
#: at up to 17 eps**2 times their mean square (N up to 1e6, float64 and float32), so this leaves a margin of 15
ROUND_OFF_ULPS = 16


def spread_scale(variance, magnitude):
    """The scale of a data-derived default spread: ``variance`` (a scalar, the mean variance of the
    data's columns about their mean) unless it is round-off, else ``magnitude`` (the data's raw mean
    square), or 1 for all-zero data.

    The variance is round-off when :math:`v \\le (16\\,\\epsilon)^2 \\overline{x^2}`: identical points
    have a variance of order :math:`\\epsilon^2 \\overline{x^2}` about their rounded mean, while data whose
    spread :math:`\\sigma` is resolved at all has :math:`\\sigma / |x| \\gg \\epsilon`. So a translation
    keeps the scale as long as the spread stays above :math:`16\\epsilon` of the offset (float64: offsets
    up to about 3e14 spreads). A threshold far above :math:`\\epsilon^2` made the default prior depend on
    the data's offset: with :math:`10^{-10}`, unit-spread data shifted by 3e5 fell back to their mean
    square, 1e11."""
    variance = torch.as_tensor(variance)
    magnitude = torch.as_tensor(magnitude, dtype=variance.dtype, device=variance.device)
    eps = torch.finfo(variance.dtype).eps
    if bool(variance > (ROUND_OFF_ULPS * eps) ** 2 * magnitude):
        return variance
    return magnitude if bool(magnitude > 0) else torch.ones_like(magnitude)


def checked_group(family, x, index):
    """``family.check_data(x)`` for group ``index`` of grouped data (an HDP's groups of items), its error naming
    the group and its row in it: the rows of several groups checked together named a row of their
    concatenation, which no user indexes."""
    try:
        return family.check_data(x)
    except NonFiniteDataError as err:
        raise err.within(f"group {index}", 0) from None
    except ValueError as err:
        raise ValueError(f"group {index}: {err}") from None


def check_finite(x, name, given=None):
    """Raise :class:`NonFiniteDataError` if the ``(N, D)`` data ``x`` has NaN or inf entries; with ``given``, the
    data ``x`` was converted from (to a narrower dtype), a :class:`ValueError` about their magnitude if some of
    its finite values became infinite (float64 data beyond float32's range, which were reported as NaN or inf)."""
    if bool(torch.isfinite(x).all()):
        return
    bad = ~torch.isfinite(x)
    if given is not None:
        over = (bad & torch.isfinite(given.to(x.device))).any(1).nonzero().flatten()
        if len(over):
            largest = float(given[torch.isfinite(given)].abs().amax())
            dtype_name, limit = str(x.dtype).removeprefix("torch."), torch.finfo(x.dtype).max
            raise ValueError(f"{name} data has values beyond {dtype_name}'s range (largest {limit:.3g}) in {len(over)} "
                             f"of its {x.shape[0]} rows, up to {largest:.3g} in magnitude; the first is row "
                             f"{int(over[0])}: rescale the data (e.g. standardise its columns) or fit in float64")
    rows = bad.any(1).nonzero().flatten()
    raise NonFiniteDataError(name, len(rows), x.shape[0], int(rows[0]))


#: the fewest steps of a dtype, at a column's largest magnitude, that the column's standard deviation must
#: span (:func:`check_resolution`). Measured on three unit-spread clusters 4 apart, fitted in float32 and
#: shifted by an offset: the same ARI as unshifted (0.90) down to 17 steps (offset 2e6), 0.71 at 8.5 (4e6),
#: one cluster at 0.25 (1e8)
RESOLUTION_STEPS = 16


def check_resolution(x, name, dtype, fix=None):
    """Raise :class:`ValueError` if a column of the ``(N, D)`` data ``x`` has a standard deviation (computed in
    float64, :func:`data_moments`) that is positive but spans fewer than :data:`RESOLUTION_STEPS` steps of
    ``dtype`` at the column's largest magnitude: data far from the origin compared with their spread, such as
    unit-spread data shifted by 1e8 in float32 (steps of 8), which a fit silently merged into one cluster.
    Centring the data keeps their spread in any dtype. Constant columns pass: they have no spread to lose
    (a standard deviation within :data:`ROUND_OFF_ULPS` of float64's precision at the column's magnitude is
    the rounding of its mean, :func:`spread_scale`)."""
    if x.numel() == 0:
        return
    _, var, _ = data_moments(x, full=False)
    std = var.sqrt()
    largest = x.detach().abs().amax(0).to(torch.float64)
    step = torch.ldexp(torch.full_like(largest, torch.finfo(dtype).eps), torch.frexp(largest).exponent - 1)
    steps = std / step.clamp_min(torch.finfo(dtype).tiny)
    spread = std > ROUND_OFF_ULPS * torch.finfo(torch.float64).eps * largest  # else the float64 mean's round-off
    coarse = (spread & (steps < RESOLUTION_STEPS)).nonzero().flatten()
    if len(coarse) == 0:
        return
    j = int(coarse[0])
    dtype_name = str(dtype).removeprefix("torch.")
    wider = ("" if dtype == torch.float64 else ", or fit in float64") if fix is None else f", or {fix}"
    raise ValueError(f"{name} data column {j} has values up to {float(largest[j]):.6g} in magnitude but a standard "
                     f"deviation of only {float(std[j]):.3g}, {float(steps[j]):.2g} of {dtype_name}'s steps there "
                     f"(fewer than {RESOLUTION_STEPS}; {len(coarse)} of the {x.shape[1]} columns are so): the data "
                     f"and the component means are rounded to those steps and the clusters merge; centre the data "
                     f"(subtract each column's mean){wider}")


def check_magnitude(x, name, degree, dtype=None, small=True, fix=None):
    """Raise :class:`ValueError` if the ``(N, D)`` data ``x``'s entries to the power ``degree`` (the
    sufficient statistics' highest, :attr:`ConjugateFamily.stat_degree`) leave the range of ``dtype``
    (``x``'s own by default), compared in logs with the largest magnitude :math:`m` of the data:

    - overflow: sums over the rows, :math:`N D m^{degree}`, above its largest finite number;
    - underflow (``small``): :math:`m^{degree}` below its smallest normal number over its machine epsilon,
      where the finest detail a sum of such terms resolves (:math:`\\epsilon m^{degree}`) is no longer a
      normal number: squares of data at 1e-20 in float32 fall to subnormal numbers, at 1e-30 to zero, so the
      default prior came out singular ("B is not positive definite") or every cluster merged as if the data
      were zeros. This is a property of the whole data's scale, checked on data that stand for all of it
      (the data a default prior is scaled to, the items a fit initialises from), not on each batch: a
      batch of near-zero items among larger ones only adds terms too small to count.

    All-zero data have no scale and pass. ``fix``: what the message suggests besides rescaling (default:
    fitting in float64, for a narrower dtype)."""
    dtype = x.dtype if dtype is None else dtype
    largest = float(x.detach().abs().amax()) if x.numel() else 0.0
    info = torch.finfo(dtype)
    dtype_name = str(dtype).removeprefix("torch.")
    wider = ("" if dtype == torch.float64 else " or fit in float64") if fix is None else f" or {fix}"
    sums = "squares" if degree == 2 else "values" if degree == 1 else f"powers {degree}"
    if largest == 0:
        return
    if degree * math.log(largest) + math.log(x.numel()) > math.log(info.max):
        raise ValueError(f"{name} data has values up to {largest:.3g} in magnitude: sums of their {sums} over "
                         f"its {x.shape[0]} rows can overflow {dtype_name} (largest "
                         f"{info.max:.3g}); rescale the data (e.g. standardise its columns){wider}")
    if small and degree * math.log(largest) < math.log(info.tiny / info.eps):
        raise ValueError(f"{name} data has values only up to {largest:.3g} in magnitude: their {sums} fall below "
                         f"{dtype_name}'s range (smallest normal number {info.tiny:.3g}, resolved to its "
                         f"precision {info.eps:.3g} from {info.tiny / info.eps:.3g} up) and underflow; rescale "
                         f"the data (e.g. standardise its columns){wider}")


class NonFiniteDataError(ValueError):
    """Data with NaN or inf entries: ``count`` of its ``total`` rows, the first of them row ``first``."""

    def __init__(self, name, count=None, total=None, first=None, where=None, offset=0):
        self.name, self.count, self.total, self.first = name, count, total, first
        self._where = (where, offset)
        if count is None:  # rebuilt from its message alone: Pyro's trace re-raises an error as type(message)
            self.name = None
            super().__init__(name)
            return
        if where is None:
            rows, first_text = f"its {total} rows", f"row {first}"
        else:
            rows = f"the {total} rows of {where}"
            first_text = f"the batch's row {first}" if offset is None else f"row {first + offset}"
        super().__init__(f"{name} data has NaN or inf values in {count} of {rows}; the first is {first_text}")

    def __reduce__(self):
        """Pickled whole (an error raised on a Dask worker reaches the client as itself)."""
        if self.count is None:
            return type(self), self.args
        return type(self), (self.name, self.count, self.total, self.first, *self._where)

    def within(self, where, offset):
        """The same error for these rows as a part (``where``, e.g. a batch) of larger data, whose row
        ``offset`` is their first (``None``: not a contiguous part)."""
        return NonFiniteDataError(self.name, self.count, self.total, self.first, where, offset)


#: the most numbers a chunked computation forms at once on the CPU (16 MB in float64): bounded
#: temporaries stay in cache and keep a long lap from fragmenting the heap
CPU_ELEMENTS = 2**21
#: the same on an accelerator (256 MB in float64), where every chunk costs kernel launches and the
#: temporaries live in the device's own memory
DEVICE_ELEMENTS = 2**25


def chunk_elements(device):
    """The most numbers a chunked computation (:func:`outer_product_stats`, a local step's chunks)
    forms at once on ``device``: :data:`CPU_ELEMENTS` on the CPU, :data:`DEVICE_ELEMENTS` elsewhere."""
    return CPU_ELEMENTS if torch.device(device).type == "cpu" else DEVICE_ELEMENTS


def weighted_sums(resp, values):
    """:math:`\\sum_n r_{nk} v_n` for all ``k``: ``(K, F)`` from responsibilities ``(N, K)`` and values
    ``(N, F)``, i.e. ``resp.T @ values``, formed as ``(values.T @ resp).T`` when ``F < K``: the matrix
    product then streams the long item axis of both operands in order (measured on one CPU thread: 0.29 s
    -> 0.11 s at N = 420,000, K = 50, F = 3; slower the other way round when F is much larger than K)."""
    if values.shape[-1] < resp.shape[-1]:
        return (values.T @ resp).T
    return resp.T @ values


def outer_product_stats(x, resp):
    """:math:`\\sum_n r_{nk} x_n x_n^T` for all ``k``: ``(K, D, D)``, as matrix products of the
    responsibilities with the packed outer products, formed for at most :func:`chunk_elements`
    numbers at a time (a 100,000-item batch in D = 64 would need 1.7 GB at once); a batch of one chunk
    reads its products from :data:`~pyro_memo.families.PRODUCT_CACHE`. For one component
    (the per-component calls of :meth:`ConjugateFamily.sparse_stats`) it is the weighted Gram matrix
    :math:`(r \\odot X)^T X`, which skips forming the outer products."""
    if resp.shape[1] == 1:
        return ((x * resp).T @ x).unsqueeze(0)
    n, d = x.shape
    step = max(1, chunk_elements(x.device) // (d * (d + 1) // 2))
    if n <= step:  # one chunk: the items' products may be kept from their local step (:data:`PRODUCT_CACHE`)
        return unpack_symmetric(weighted_sums(resp, PRODUCT_CACHE.get(x, packed_outer, keep=False)), d)
    total = weighted_sums(resp[:step], packed_outer(x[:step]))
    for lo in range(step, n, step):
        total = total + weighted_sums(resp[lo:lo + step], packed_outer(x[lo:lo + step]))
    return unpack_symmetric(total, d)


@functools.lru_cache(maxsize=32)
def _triangle_indices(d, device):
    """:func:`torch.triu_indices` of a ``d x d`` matrix on ``device``, made once per size and device."""
    return torch.triu_indices(d, d, device=device)


@functools.lru_cache(maxsize=32)
def _triangle_positions(d, device):
    """For each entry of a ``d x d`` symmetric matrix, flattened, its index in :func:`packed_outer`'s
    order (made once per size and device: every chunk of a local step unpacks with it)."""
    i, j = _triangle_indices(d, device)
    position = torch.empty((d, d), dtype=torch.long, device=device)
    position[i, j] = position[j, i] = torch.arange(i.shape[0], device=device)
    return position.reshape(-1)


def unpack_symmetric(packed, d):
    """``(K, D(D+1)/2)`` upper triangles in :func:`packed_outer`'s order as ``(K, D, D)`` symmetric
    matrices (one gather: every entry reads its triangle position)."""
    return packed.index_select(1, _triangle_positions(d, packed.device)).reshape(packed.shape[0], d, d)


def packed_outer(x):
    """The upper triangle of every :math:`x_n x_n^T`, ``x_{ni} x_{nj}`` for ``i <= j`` in
    :func:`torch.triu_indices` order: ``(N, D(D+1)/2)``. On the CPU it is written one row ``i`` of
    the triangle at a time (a quarter of the time of gathering both factors by index); on an
    accelerator, where each of those ``D`` products would be a kernel launch, both factors are
    gathered by index in one product."""
    n, d = x.shape
    if x.device.type != "cpu":
        i, j = _triangle_indices(d, x.device)
        return x.index_select(1, i) * x.index_select(1, j)
    out = x.new_empty((n, d * (d + 1) // 2))
    start = 0
    for i in range(d):
        torch.mul(x[:, i:i + 1], x[:, i:], out=out[:, start:start + d - i])
        start += d - i
    return out


def packed_quadratic_weights(W):
    """Weights that turn :func:`packed_outer` rows into quadratic forms: for symmetric ``(K, D, D)``
    ``W``, ``packed_outer(x) @ packed_quadratic_weights(W)`` is :math:`x_n^T W_k x_n` for all ``n, k``
    (the off-diagonal entries counted twice): ``(D(D+1)/2, K)``. One matrix product of about
    :math:`NKD^2/2` multiply-adds, half those of :math:`\\|L_k^{-1} x_n\\|^2` for every ``k``; its
    rounding error is relative to :math:`\\sum_{ij}|x_i W_{ij} x_j|`, so it suits float64 (the
    Cholesky form has no such cancellation)."""
    d = W.shape[-1]
    i, j = torch.triu_indices(d, d, device=W.device)
    return (W[:, i, j] * torch.where(i == j, 1.0, 2.0).to(W)).T
