"""Recognise a user's Pyro DP-mixture model by tracing it, and verify the wiring numerically.

Conventions a model must follow (the ones :class:`~pyro_memo.DPMixtureModel`
and Pyro's DP-mixture tutorial follow):

1. Sticks: one latent ``Beta(1, alpha)`` site in a plate of size ``T - 1``; the
   weights are :math:`w_k = v_k \\prod_{\\ell<k}(1 - v_\\ell)` with :math:`v_T = 1`.
2. Component parameters: latent sites in a plate of size ``T`` with a supported
   conjugate prior (see :func:`supported_forms`), the same prior for every component.
3. Assignment: one latent ``Categorical(w)`` site inside the data plate.
4. Observation: one observed site inside the data plate whose distribution indexes the
   component parameters by the assignment. The full data tensor is an argument of the
   model (the observed value, or the argument indexed by the plate's subsample). Data of
   shape ``(N, D)`` are observed with ``.to_event(1)``; scalar data of shape ``(N,)``
   (``Normal``, ``Poisson``, ``Bernoulli`` observations with component sites of shape
   ``(T,)``) are read as ``D = 1``. Instead of ``.to_event(1)``, the features may be a nested
   plate of size ``D`` at ``dim=-1``, with the data plate (and then the assignment) at ``dim=-2``;
   likewise the component sites, in their plate of size ``T`` at ``dim=-2`` (see
   :func:`_nested_features`). That is the same model, and the guide mirrors the plates.

5. Optionally a latent DP concentration (Blei & Jordan 2006, §5): one global site outside any
   plate, ``alpha = pyro.sample("alpha", dist.Gamma(s1, s2))``, used as the sticks' second
   parameter, ``Beta(1, alpha)`` (or ``Beta(torch.ones(T - 1), alpha)``); it may have shape ``()`` or
   ``(1,)`` (also ``.to_event(1)``). Its prior is recorded in the spec (``alpha_site``, ``alpha_prior``,
   with ``alpha_shape`` / ``alpha_event_dim`` for the guide) and the fit learns
   :math:`q(\\alpha) = Gamma(w_1, w_2)`.

``pyro.deterministic`` sites are ignored. ``pyro.param`` sites, ``pyro.factor`` terms, masked sites
(``poutine.mask``, ``.mask()``, ``obs_mask=``; an all-True mask is accepted), sites under
``poutine.scale`` (a scale other than 1: the closed-form updates would ignore it; the data plate's
own subsample scaling is fine), ``MixtureSameFamily`` observations, a latent DP concentration with
another prior than a Gamma or inside a plate, and plates nested in another way than item 4's are
refused, each with the nearest supported form. NaN or inf in the observed value raise
:class:`~pyro_memo.families.NonFiniteDataError` naming the observed site.

After reading the structure, three numerical checks run at random values: the
assignment probabilities equal the stick-breaking weights, the observation's log_prob
equals the family's log-density, and the component sites' log_prob equals the
family's prior log-density. Anything else raises :class:`ModelStructureError`.
"""

import inspect
import re
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

import numpy as np
import pyro.distributions as dist
import torch
from pyro import poutine

from ..checks import as_index_tensor
from ..families import FAMILIES
from ..families._wishart import quiet_wishart
from ..families.base import NonFiniteDataError, check_finite
from ..models.component_sites import sites_for
from .hdp_recognition import is_hdp, recognize_hdp, refuse_document_observation
from .relational_recognition import is_relational, recognize_relational
from .structure import (
    ArgumentReader,
    ModelStructureError,
    _base,
    _constant_over_components,
    _find_sticks,
    _plates,
    as_batch_ids,
    model_failure,
    plate_size_error,
    positional_names,
    refuse_sequential,
    refuse_subsampled,
    sites_moved_by,
)
from .wiring_check import verify_wiring


def _first(t, event_dim):
    """The first component's value of a ``(T, *event)`` tensor."""
    return t.reshape((-1,) + t.shape[t.dim() - event_dim:])[0]


@dataclass
class ModelSpec(ArgumentReader):
    """What recognition learnt about a model: family, sticks, site and plate names."""

    family: object
    alpha: float
    T: int
    stick_site: str
    stick_plate: str
    component_plate: str
    param_sites: dict
    assignment_site: str
    obs_site: str
    data_plate: str
    num_data: int
    subsample_size: int
    data_arg: tuple
    subsample_arg: tuple = None
    one_hot: bool = False
    #: the argument holding a random subsample's size (e.g. ``subsample_size=``), if any
    subsample_size_arg: tuple = None
    #: the data are ``(N,)`` scalars, read as one column
    scalar: bool = False
    extra: dict = field(default_factory=dict)
    #: the latent DP concentration's site (``alpha ~ Gamma(s1, s2)`` outside any plate), if any
    alpha_site: str = None
    #: ``(s1, s2)``: shape and rate of its Gamma prior (``alpha`` is then the prior mean ``s1 / s2``)
    alpha_prior: tuple = None
    #: the alpha site's shape in the model (``()`` or e.g. ``(1,)``) and how many of its dims are event dims
    alpha_shape: tuple = ()
    alpha_event_dim: int = 0
    #: the plates' ``dim`` in the model: ``{"sticks": .., "components": .., "data": ..}``
    plate_dims: dict = field(default_factory=dict)
    #: the observation's feature plate (name), when its features are a nested plate, not an event
    obs_features: str = None
    #: component role -> its feature plate (name), for the component sites written that way
    component_features: dict = field(default_factory=dict)

    kind = "dp"
    batch_plate_field = "data_plate"

    @property
    def sites(self):
        sites = sites_for(self.family, self.param_sites)
        if self.scalar:
            return _ScalarSites(sites)
        if self.component_features:
            return _FeatureSites(sites, self.component_features, self.family.dim)
        return sites

    def dim(self, plate):
        """The ``dim`` the model gave ``plate`` (``"sticks"``, ``"components"`` or ``"data"``)."""
        return self.plate_dims.get(plate, -1)

    def data(self, args, kwargs, index=None):
        """The ``(N, D)`` data tensor (rows ``index`` only, if given), validated."""
        x = torch.as_tensor(self._get(self.data_arg, args, kwargs))
        if index is not None:
            x = x[index.to(x.device)]
        if self.one_hot:
            x = self.one_hot_rows(x)
        elif self.scalar and x.dim() == 1:
            x = x.unsqueeze(-1)
        return self.family.check_data(x)

    def one_hot_rows(self, x):
        """The category ids ``x`` of a ``Categorical`` observation as one-hot rows over the family's ``D``
        categories; a :class:`ValueError` naming the observed site for an id outside ``[0, D)`` or a fraction
        (torch's one_hot said only "Class values must be smaller than num_classes", and ``.long()`` truncated 1.5
        to 1)."""
        D = self.family.dim
        ids = as_index_tensor(x, D, f"the category ids observed at site '{self.obs_site}' (a Categorical over "
                                    f"{D} categories)")
        return torch.nn.functional.one_hot(ids, D)

    def raw_data(self, args, kwargs):
        """The data argument of this call, as passed."""
        return self._get(self.data_arg, args, kwargs)

    def raw_data_or_none(self, args, kwargs):
        """The data argument of this call, or ``None`` where the call leaves it out: passed where the recognised
        call passed it, or the other way (by name instead of position, or by position instead of name; a
        model trained with ``svi.step(data=x, batch=b)`` and then run as ``guide(x)`` passes its data)."""
        return self._get_either_way(self.data_arg, args, kwargs)

    def _get_either_way(self, where, args, kwargs):
        """The argument at ``where`` passed as recognised, or the other way (by name instead of position, or by
        position instead of name); ``None`` where the call leaves it out."""
        value = self._get(where, args, kwargs, None)
        if value is None:
            kind, key = where
            names = self.extra.get("arg_names", ())
            if kind == "arg" and key < len(names):
                value = kwargs.get(names[key])
            elif kind == "kwarg" and key in names:
                value = self._get(("arg", names.index(key)), args, kwargs, None)
        return value

    def no_data_message(self):
        """Why a guide cannot run on a call without the data, and the call that draws new data."""
        kind, key = self.data_arg
        where = f"keyword argument {key!r}" if kind == "kwarg" else f"positional argument {key}"
        return (f"this call passes no data (the model's {where}, observed at site '{self.obs_site}'): the guide's "
                f"assignments '{self.assignment_site}' are those of observed items. To draw new data from the fitted "
                "posterior, let the model draw the assignments too: pyro.infer.Predictive(model, "
                "posterior_samples=guide.sample_posterior(num_samples))(...)")

    def plate_args(self, args, kwargs):
        """``(size, subsample, subsample_size)`` of the data plate for this call, read from the call:
        the size is the data argument's length (when the recognised plate's size was that length),
        the subsample the batch indices the call passes (``None``: the whole plate, or a random
        subsample of the size this call asks for)."""
        x = self.raw_data(args, kwargs)
        size = int(x.shape[0]) if self.extra.get("data_len", self.num_data) == self.num_data else self.num_data
        batch = self.batch_indices(args, kwargs)
        if batch is not None:
            return size, batch, int(batch.shape[0])
        if self.subsample_size_arg is not None:
            subsample_size = self._get_either_way(self.subsample_size_arg, args, kwargs)
            if subsample_size is None:  # left at the model's default
                subsample_size = self.extra.get("subsample_size_default")
        elif self.subsample_arg is None and self.subsample_size < self.num_data:
            subsample_size = self.subsample_size  # fixed inside the model
        else:
            subsample_size = None
        if subsample_size is None or int(subsample_size) >= size:
            return size, None, size
        return size, None, int(subsample_size)


def _unsqueeze_dist(fn):
    """``fn`` (a univariate Normal / Gamma / Beta / Poisson of batch shape ``(..., T)``) rebuilt with
    batch shape ``(..., T, 1)``: a scalar model's component site in the family's ``D = 1`` form."""
    return type(fn)(**{k: getattr(fn, k).unsqueeze(-1) for k in fn.arg_constraints})


def _squeeze_dist(fn):
    """The inverse of :func:`_unsqueeze_dist` for a family's ``.to_event(1)`` site of width 1."""
    fn = fn.base_dist if isinstance(fn, dist.Independent) else fn
    return type(fn)(**{k: getattr(fn, k)[..., 0] for k in fn.arg_constraints})


class _WrittenSites:
    """A family's component sites as a model writes them in another form than the family's own: the
    family's prior, with each site sampled by :meth:`site`."""

    def __init__(self, sites):
        self.inner = sites
        self.names = sites.names
        self.roles = sites.roles

    def site(self, role, fn):
        raise NotImplementedError

    def sample(self, hyper):
        return self.inner.family.pyro_prior(dist, hyper, self.site)


class _ScalarSites(_WrittenSites):
    """A family's component sites for a model with scalar ``(N,)`` data: the sites are sampled with
    shape ``(T,)`` (as the model samples them) and handed to the family as ``(T, 1)``."""

    def site(self, role, fn):
        import pyro

        return pyro.sample(self.names[role], _squeeze_dist(fn)).unsqueeze(-1)


def _without_event(fn):
    """``fn`` with its rightmost event dimension made a batch dimension (undoing one ``.to_event(1)``)."""
    if isinstance(fn, dist.Independent):
        n = fn.reinterpreted_batch_ndims - 1
        return fn.base_dist if n == 0 else dist.Independent(fn.base_dist, n)
    raise ValueError(f"{type(fn).__name__} has no event dimension written with .to_event")


class _FeatureSites(_WrittenSites):
    """A family's component sites for a model whose component sites sit in a nested feature plate
    (``dim=-1``, inside the component plate at ``dim=-2``): each such site is sampled there one feature
    at a time, the family's ``.to_event(1)`` form with its event dimension as a plate."""

    def __init__(self, sites, features, D):
        super().__init__(sites)
        self.features, self.D = dict(features), int(D)

    def sample(self, hyper):
        import pyro

        # one plate object per feature plate (a plate's second pyro.plate call would be another site)
        self.plates = {name: pyro.plate(name, self.D, dim=-1) for name in dict.fromkeys(self.features.values())}
        return super().sample(hyper)

    def site(self, role, fn):
        import pyro

        if role not in self.features:
            return pyro.sample(self.names[role], fn)
        with self.plates[self.features[role]]:
            return pyro.sample(self.names[role], _without_event(fn))


#: the nested-plate form of a DP mixture's observation (the alternative to ``.to_event(1)``)
NESTED_FORM = ("with pyro.plate('data', N, dim=-2):\n"
               "        z = pyro.sample('z', dist.Categorical(weights))\n"
               "        with pyro.plate('features', D, dim=-1):\n"
               "            pyro.sample('x', dist.Normal(loc[z.squeeze(-1)], scale[z.squeeze(-1)]), obs=data)\n"
               "with the component sites in pyro.plate('components', T, dim=-2) and a feature plate at dim=-1; "
               "or write the features as one event: dist.Normal(loc[z], scale[z]).to_event(1) in one data plate")


def _nested_features(site, outer_size, what):
    """``(outer frame, feature frame)`` of a site in two plates, the features nested at ``dim=-1`` in a
    plate of size ``outer_size`` (``None``: any size) at ``dim=-2``; a :class:`ModelStructureError`
    naming the site and :data:`NESTED_FORM` for any other pair of plates or a value of another shape."""
    outer, inner = sorted(site["cond_indep_stack"], key=lambda f: f.dim)
    value = site["value"]
    fits = (inner.dim == -1 and outer.dim == -2 and site["fn"].event_shape == () and value.dim() == 2
            and value.shape[-1] == inner.size and (outer_size is None or outer.size == outer_size))
    if not fits:
        raise _nesting_error(site, what)
    return outer, inner


def _nesting_error(site, what):
    frames = sorted(site["cond_indep_stack"], key=lambda f: f.dim)
    return ModelStructureError(
        f"{what} site '{site['name']}' sits in plates {[(f.name, f.size, f.dim) for f in frames]} with a value of "
        f"shape {tuple(site['value'].shape)}; pyro-memo reads two plates as items (dim=-2) and their features "
        f"(dim=-1). Supported:\n    {NESTED_FORM}"
    )


def _as_event(site, outer):
    """A nested-plate site rewritten in its ``.to_event(1)`` form: one plate, a ``(D,)`` event."""
    fn = site["fn"].expand(site["value"].shape)
    return dict(site, fn=dist.Independent(fn, 1), cond_indep_stack=(outer,))


#: the supported way to write a DP mixture's items (docs/guide/conventions.md)
DATA_PLATE_FORM = ("with pyro.plate('data', len(data)): z = pyro.sample('z', dist.Categorical(weights)); "
                   "pyro.sample('x', ..., obs=data)")

#: the supported way to give a DP mixture its batches (docs/guide/pyro.md)
BATCH_FORM = ("pass the whole data and the batch's indices, model(data, batch), and observe data[idx] in "
              "`with pyro.plate('data', len(data), subsample=batch) as idx:` (pyro.sample('x', ..., obs=data[idx]))")


def _find_data_arg(args, kwargs, obs, subsample, site=None, rows=None):
    """Where the observed data come from: the argument whose value (indexed by the data plate's
    ``subsample``, if any, else by ``rows``, the plate's whole range, if given) is the observed value of
    ``site`` (the observed site)."""
    candidates = [("arg", i, a) for i, a in enumerate(args)] + [("kwarg", k, a) for k, a in kwargs.items()]
    index = subsample if subsample is not None else rows
    for kind, key, value in candidates:
        if not torch.is_tensor(value) or value.dim() != obs.dim():
            continue
        try:
            picked = value if index is None else value[index.to(value.device)]
        except (IndexError, RuntimeError):  # fewer rows than the plate's indices: not the whole data
            continue
        if picked.shape == obs.shape and bool(torch.equal(picked.to(obs.dtype), obs)):
            return kind, key
    if subsample is not None and site is not None and any(
            torch.is_tensor(v) and v.shape == obs.shape and bool(torch.equal(v.to(obs.dtype), obs))
            for _, _, v in candidates):
        plate = next((f for f in site["cond_indep_stack"] if f.full_size is not None), None)
        where = f"plate '{plate.name}' (size {plate.full_size})" if plate is not None else "the data plate"
        raise ModelStructureError(
            f"observed site '{site['name']}' observes a batch of {len(subsample)} items passed as an argument, "
            f"not the whole data indexed by the subsample of {where}: pyro-memo needs the whole data as an "
            f"argument and reads each batch's rows by the plate's indices. Instead, {BATCH_FORM}"
        )
    name = f"observed site '{site['name']}'" if site is not None else "the observed site"
    for _, _, value in candidates:
        if torch.is_tensor(value) and value.shape != obs.shape and value.numel() == obs.numel() \
                and bool(torch.equal(value.reshape(obs.shape).to(obs.dtype), obs)):
            raise ModelStructureError(
                f"{name} observes a data argument reshaped from {tuple(value.shape)} to {tuple(obs.shape)}: observe "
                f"the data as passed, one item per row in the data plate at dim=-1 ({DATA_PLATE_FORM}); an "
                f"item's features go in .to_event(1) or an inner feature plate")
    raise ModelStructureError(
        f"the observed data must be passed to the model as an argument (positional or keyword); no argument "
        f"matches the value of {name}. Data fixed by pyro.condition(model, data={{...}}) or read from a global "
        f"variable are no argument: write model(data) with pyro.sample(..., obs=data) ({DATA_PLATE_FORM})"
    )


def _find_subsample_arg(args, kwargs, subsample):
    """The argument the data plate's ``subsample`` indices came from, if any."""
    candidates = [("arg", i, a) for i, a in enumerate(args)] + [("kwarg", k, a) for k, a in kwargs.items()]
    for kind, key, value in candidates:
        if value is subsample:
            return kind, key
    for kind, key, value in candidates:
        if torch.is_tensor(value) and value.dim() == 1 and not value.is_floating_point() \
                and value.shape == subsample.shape and bool(torch.equal(value.to(subsample), subsample)):
            return kind, key
    return None


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _int_candidates(model, args, kwargs, value):
    """Where each integer argument equal to ``value`` is (``("arg", i)`` or ``("kwarg", name)``): those the
    call passes and the model's keyword parameters the call leaves at an integer default equal to ``value``."""
    candidates = [("arg", i, a) for i, a in enumerate(args)] + [("kwarg", k, a) for k, a in kwargs.items()]
    found = [(kind, key) for kind, key, a in candidates if _is_int(a) and a == value]
    try:
        signature = inspect.signature(model)
        bound = signature.bind_partial(*args, **kwargs).arguments
    except (TypeError, ValueError):
        return found
    keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return found + [("kwarg", name) for name, p in signature.parameters.items()
                    if name not in bound and p.kind in keyword and _is_int(p.default) and p.default == value]


def _parameter_default(model, where):
    """The integer default of the model's parameter at ``where`` (``None`` if it has none)."""
    try:
        parameters = inspect.signature(model).parameters
    except (TypeError, ValueError):
        return None
    kind, key = where
    names = positional_names(model)
    name = names[key] if kind == "arg" and key < len(names) else key
    default = parameters[name].default if name in parameters else None
    return default if _is_int(default) else None


def _traced_subsample_size(model, args, kwargs, plate):
    """The length of plate ``plate``'s subsample when ``model(*args, **kwargs)`` is traced (``None`` if the
    trace fails or never enters the plate)."""
    try:  # a probe draws nothing from the caller's stream, even under tracing_draws_from_the_caller_rng
        with _forked_rng(), torch.no_grad(), poutine.block(), quiet_wishart():
            trace = poutine.trace(model).get_trace(*args, **kwargs)
    except Exception:  # a probe the model cannot run with: that argument does not size the plate alone
        return None
    sizes = [len(site["value"]) for name, site in _plate_sites(trace) if name == plate and site["value"] is not None]
    return sizes[0] if sizes else None


def _with_value(args, kwargs, where, value):
    """``(args, kwargs)`` of the call with the argument at ``where`` replaced (or passed) as ``value``."""
    kind, key = where
    if kind == "arg":
        return (*args[:key], value, *args[key + 1:]), kwargs
    return args, {**kwargs, key: value}


def _find_subsample_size_arg(model, args, kwargs, plate, value, num_data):
    """``(where, default)`` of the argument the random subsample of plate ``plate`` takes its size
    ``value`` from (``default``: that parameter's integer default, used by a call leaving it out), or
    ``(None, None)`` when none does (a size fixed inside the model). Each integer argument
    equal to ``value`` is re-traced with another value: the one that changes the subsample's size is it
    (``model(data, batch_size=10, T=10)`` reads ``batch_size``, not the later ``T``).

    :raises ModelStructureError: naming the arguments if more than one changes the subsample's size."""
    probe = value - 1 if value > 1 else value + 1
    if probe >= num_data:
        probe = value - 1
    names = positional_names(model)
    found = []
    for where in _int_candidates(model, args, kwargs, value):
        if probe > 0 and _traced_subsample_size(model, *_with_value(args, kwargs, where, probe), plate) == probe:
            found.append(where)
    if len(found) > 1:
        described = [names[k] if kind == "arg" and k < len(names) else (f"#{k}" if kind == "arg" else k)
                     for kind, k in found]
        raise ModelStructureError(
            f"the random subsample of plate '{plate}' (size {value}) changes size with each of the arguments "
            f"{described}: pyro-memo cannot tell which one sizes it, so a guide called later could draw batches "
            f"of another size than the model. Pass the subsample size as one argument used only as the plate's "
            f"subsample_size: pyro.plate('{plate}', len(data), subsample_size=batch_size)")
    return (found[0], _parameter_default(model, found[0])) if found else (None, None)


def _component_types(family_cls):
    return sorted(t for t, _ in family_cls.pyro_components.values())


def supported_forms():
    """observation distribution -> the registered families that fit it, with their component sites."""
    forms = {}
    for fam in FAMILIES.values():
        for obs in fam.pyro_observation:
            forms.setdefault(obs, []).append(f"{' + '.join(_component_types(fam))} components -> {fam.name}")
    return {k: " or ".join(v) for k, v in forms.items()}


#: observation distribution -> what pyro-memo fits it with (the built-in families; see :func:`supported_forms`)
SUPPORTED = supported_forms()


class _Reader:
    """What a family's recognition rule (``prior_from_pyro``) reads hyperparameters with."""

    def __init__(self, names):
        self.names = names

    def constant(self, t, event_dim, role, what):
        return _constant_over_components(t, event_dim, self.names[role], what)

    @staticmethod
    def first(t, event_dim):
        return _first(t, event_dim)


def _recognise_components(obs_fn, obs_name, comp_sites, scalar=False):
    """Map the observation and component sites to a registered family (each family declares its
    Pyro form and recognition rule in its own file); return (family class, hyper, names)."""
    by_type = {}
    for name, site in comp_sites.items():
        by_type.setdefault(type(_base(site["fn"])).__name__, []).append(name)
    kind = type(obs_fn).__name__
    candidates = [f for f in FAMILIES.values() if kind in f.pyro_observation]
    if not candidates:
        raise ModelStructureError(
            f"observed site '{obs_name}' has an unsupported likelihood {kind}; supported: "
            + "; ".join(f"{k} ({v})" for k, v in supported_forms().items())
        )
    single = all(len(v) == 1 for v in by_type.values())
    for fam in candidates:
        if single and sorted(by_type) == _component_types(fam):
            names = {role: by_type[t][0] for role, (t, _) in fam.pyro_components.items()}
            sites = {role: (_base(comp_sites[n]["fn"]), comp_sites[n]["value"]) for role, n in names.items()}
            known = _observation_constants(fam, obs_fn, obs_name, scalar)
            try:
                hyper = dict(fam.prior_from_pyro(sites, _Reader(names)), **known)
            except (RuntimeError, IndexError) as err:  # the sites' shapes do not fit the family's form
                raise _component_shapes_error(fam, names, comp_sites, obs_name) from err
            return fam, {k: torch.as_tensor(v).detach() for k, v in hyper.items()}, names
    found = set(by_type)

    def overlap(fam):
        needed = set(_component_types(fam))
        return len(found & needed) - len(found ^ needed)

    nearest = max(candidates, key=overlap)
    raise ModelStructureError(
        f"observed site '{obs_name}' is {kind}, so the {nearest.name} family needs component sites of types "
        f"{_component_types(nearest)}; found {{{', '.join(f'{n!r}: {t!r}' for t, ns in by_type.items() for n in ns)}}}"
        f"; the {kind} forms pyro-memo fits: {supported_forms()[kind]}"
    )


def _component_shapes_error(fam, names, comp_sites, obs_name):
    """The error for component sites of the types a family reads but of other shapes than its form (a Gamma of
    shape ``(T,)`` beside a Normal of shape ``(T, D)``): each site's distribution and shapes, and the form."""
    found = "; ".join(f"'{n}' {type(_base(comp_sites[n]['fn'])).__name__} of shape "
                      f"{tuple(comp_sites[n]['value'].shape)} (event shape {tuple(comp_sites[n]['fn'].event_shape)})"
                      for n in names.values())
    form = ", ".join(f"{role} ~ {t}" + (f" with {k} event dim (.to_event({k}))" if k else "")
                     for role, (t, k) in fam.pyro_components.items())
    return ModelStructureError(
        f"observed site '{obs_name}' and component sites {sorted(names.values())} have the types of the {fam.name} "
        f"family, but not its shapes: {found}. The {fam.name} family reads {form}, each one per component in the "
        f"plate of size T, with the observation's dimension D")


def _observation_constants(fam, obs_fn, obs_name, scalar=False):
    """Hyperparameters ``fam`` reads off the observed site (``pyro_observation_constants``, e.g. a
    known noise covariance), each required to be the same for every item."""

    def constant(t, event_dim, what):
        if scalar:  # (N,) data read as D = 1: the feature dimension the family expects is implicit
            t = t.reshape(t.shape + (1,) * event_dim)
        flat = t.reshape((-1,) + t.shape[t.dim() - event_dim:])
        if not bool(torch.allclose(flat, flat[:1].expand_as(flat))):
            raise ModelStructureError(
                f"observed site '{obs_name}': its {what} must be the same for every item (the {fam.name} "
                f"family treats it as a known constant)"
            )
        return flat[0]

    return fam.pyro_observation_constants(obs_fn, constant)


def _plate_sites(trace):
    """``(name, site)`` of each plate a trace entered (Pyro records a plate as a sample site of a ``_Subsample``
    distribution, its value the subsample's indices), in the order entered."""
    from pyro.poutine.subsample_messenger import _Subsample

    return [(name, site) for name, site in trace.nodes.items()
            if site["type"] == "sample" and isinstance(site["fn"], _Subsample)]


def _sample_sites(trace):
    plates, sites = {}, []
    plate_names = {name for name, _ in _plate_sites(trace)}
    for name, site in trace.nodes.items():
        if site["type"] != "sample":
            continue
        if name in plate_names:
            plates[name] = (site["fn"].size, site["fn"].subsample_size, site["value"])
        elif site["infer"].get("_deterministic"):
            continue  # pyro.deterministic: a recorded value, no density
        elif isinstance(site["fn"], dist.Unit):
            raise ModelStructureError(
                f"site '{name}' is a pyro.factor (an extra log-density term); pyro-memo's closed-form updates "
                "cannot include it: remove it, or write the term as the prior of a supported site"
            )
        else:
            sites.append(site)
    return plates, sites


def _read_obs_masks(trace, sites):
    """The sites of a model with Pyro's ``obs_mask=`` read as the model without it. Pyro splits
    ``pyro.sample(name, fn, obs=data, obs_mask=mask)`` into an observed site ``<name>_observed`` (masked by
    ``mask``), a latent ``<name>_unobserved`` (masked by ``~mask``) and a ``pyro.deterministic`` ``<name>``.
    An all-True mask is a no-op: the latent half scores nothing and is dropped, and the observed half is
    the observation. A partial mask is refused, naming ``<name>``, as a masked observation is."""
    by_name = {s["name"]: s for s in sites}
    drop = []
    for site in sites:
        name = site["name"]
        if site["is_observed"] or not name.endswith("_unobserved"):
            continue
        user = name[: -len("_unobserved")]
        observed, merged = by_name.get(f"{user}_observed"), trace.nodes.get(user)
        if observed is None or not observed["is_observed"] or merged is None \
                or not merged.get("infer", {}).get("_deterministic"):
            continue
        if _is_masked(observed):
            raise ModelStructureError(
                f"observed site '{user}' is masked (obs_mask= leaves some items unobserved); pyro-memo needs "
                f"every item in the data plate observed: pass only the observed rows as the data (e.g. data[mask]) "
                f"and drop obs_mask"
            )
        drop.append(site)
    return [s for s in sites if not any(s is d for d in drop)]


def _refuse_params(trace):
    params = [name for name, site in trace.nodes.items() if site["type"] == "param"]
    if params:
        raise ModelStructureError(
            f"site {params[0]!r} is a pyro.param: pyro-memo fits no point-estimated hyperparameters (it would stay "
            "frozen at its initial value); pass a constant tensor instead, e.g. torch.tensor(1.0). For the DP "
            f"concentration alpha: pass a constant, or learn it with a Gamma prior: {ALPHA_FORM}"
        )


def _refuse_observation(obs):
    name, fn = obs["name"], obs["fn"]
    if isinstance(_base(fn), dist.MixtureSameFamily):
        raise ModelStructureError(
            f"observed site '{name}' is a MixtureSameFamily (the assignment marginalised out); pyro-memo needs "
            "the assignment as its own site. Rewrite it as (e.g. for Normal components)\n"
            "    with pyro.plate('data', N):\n"
            "        z = pyro.sample('z', dist.Categorical(weights))\n"
            f"        pyro.sample('{name}', dist.Normal(loc[z], scale[z]).to_event(1), obs=data)"
        )
    if _is_masked(obs):
        raise ModelStructureError(
            f"observed site '{name}' is masked (poutine.mask or .mask()); pyro-memo needs every item in the data "
            "plate observed: pass only the observed rows as the data"
        )


def _refuse_latent_masks(sites):
    """Refuse a masked latent site: Pyro's ELBO drops its masked terms, while the closed-form updates
    use every component's and stick's prior, so the mask would be ignored."""
    masked = [s["name"] for s in sites if not s["is_observed"] and _is_masked(s)]
    if masked:
        raise ModelStructureError(
            f"latent site '{masked[0]}' is masked (poutine.mask or .mask()); pyro-memo's closed-form updates use "
            "the whole prior of every stick and component and would ignore the mask: remove it (a smaller "
            "truncation T is the way to use fewer components)"
        )


def _is_masked(site):
    """Whether the site's mask, or one of its distribution's (``.mask()``), leaves any term out."""
    masked = not _all_true(site.get("mask"))
    fn = site["fn"]
    while isinstance(fn, (dist.Independent, dist.ExpandedDistribution, dist.MaskedDistribution)):
        masked = masked or (isinstance(fn, dist.MaskedDistribution) and not _all_true(fn._mask))
        fn = fn.base_dist
    return masked


def _all_true(mask):
    """Whether ``mask`` (a site's or a ``MaskedDistribution``'s) masks nothing: ``None``, ``True`` or a
    tensor of ``True`` only (an all-True mask is a no-op)."""
    if mask is None or mask is True:
        return True
    if torch.is_tensor(mask):
        return bool(mask.all())
    return bool(mask)


def _check_observed_finite(obs):
    """Raise :class:`~pyro_memo.families.NonFiniteDataError` if the observed site's value holds NaN or
    inf (counted by rows: the data plate's items; for a subsampled plate, the rows of its batch)."""
    value = torch.as_tensor(obs["value"])
    if not (value.is_floating_point() or value.is_complex()):
        return
    rows = value.reshape(value.shape[0] if value.dim() else 1, -1)
    try:
        check_finite(rows, f"observed site '{obs['name']}'")
    except NonFiniteDataError as err:
        sub = [f for f in obs["cond_indep_stack"] if f.full_size is not None and f.full_size != f.size]
        if not sub:
            raise
        raise err.within(f"this call's subsample of plate '{sub[0].name}'", None) from None


def _extra_scale(site):
    """The scale of ``site``'s log-density beyond its plates' subsampling (``size / subsample_size``),
    as a float or a tensor; ``None`` when it is 1 (also a tensor of ones)."""
    plates = 1.0
    for f in site["cond_indep_stack"]:
        if f.full_size is not None and f.size:
            plates *= float(f.full_size) / float(f.size)
    scale = site.get("scale", 1.0)
    if torch.is_tensor(scale):
        extra = scale.detach().double() / plates
        return None if bool(((extra - 1).abs() <= 1e-6).all()) else extra
    extra = float(scale) / plates
    return None if abs(extra - 1) <= 1e-6 else extra


def _refuse_scales(sites):
    """Refuse a sample site whose log-density is scaled (``poutine.scale``, or a ``scale`` in ``infer``):
    pyro-memo's closed-form updates use the model's unscaled density, so the scale would be ignored."""
    scaled = [(s, _extra_scale(s)) for s in sites]
    scaled = [(s, e) for s, e in scaled if e is not None]
    if not scaled:
        return
    site, extra = scaled[0]
    if torch.is_tensor(extra):
        flat = extra.reshape(-1)
        by = f"{float(flat[0]):g}" if bool((flat == flat[0]).all()) else \
            f"a tensor of scales from {float(flat.min()):g} to {float(flat.max()):g}"
    else:
        by = f"{extra:g}"
    others = [s["name"] for s, _ in scaled[1:]]
    also = f"; so {'is' if len(others) == 1 else 'are'} {', '.join(repr(n) for n in others)}" if others else ""
    kind = "observed" if site["is_observed"] else "latent"
    raise ModelStructureError(
        f"{kind} site '{site['name']}' has its log-density scaled by {by} (poutine.scale{also}); pyro-memo's "
        "closed-form updates use the model's unscaled density and would ignore it: remove the scale. To fit "
        "in batches, let the data plate subsample (pyro.plate(..., subsample=batch)) or use fit_memoized / "
        "MemoizedELBO: pyro-memo's memoized driver scales batches itself"
    )


#: the latent DP concentration pyro-memo learns (Blei & Jordan 2006, §5)
ALPHA_FORM = ("alpha = pyro.sample('alpha', dist.Gamma(s1, s2)) outside any plate, then "
              "v = pyro.sample('v', dist.Beta(1, alpha)) in the sticks' plate")


def _stick_concentration0(global_sites, T):
    """The stick site's second Beta parameter, expanded to the site's shape (``None`` without a stick site)."""
    sticks = [s for s in global_sites if isinstance(_base(s["fn"]), dist.Beta)
              and [f.size for f in s["cond_indep_stack"]] == [T - 1] and s["fn"].event_shape == ()]
    if len(sticks) != 1:
        return None, None  # _find_sticks explains
    return sticks[0], _base(sticks[0]["fn"]).concentration0.expand(sticks[0]["value"].shape)


def _find_latent_alpha(model, args, kwargs, trace, global_sites, T):
    """The latent DP concentration: the one other global site whose value the sticks' ``Beta(1, alpha)``
    takes as ``alpha`` (checked by re-running the model with the site conditioned on another value), and no
    other site of ``trace`` (see :func:`_refuse_alpha_elsewhere`).
    Returns ``(site, (s1, s2))`` or ``(None, None)``; refuses another prior than a Gamma with one value
    (shape ``()`` or ``(1,)``, its dimension a batch or an event dimension), or the site inside a plate."""
    stick, c0 = _stick_concentration0(global_sites, T)
    if stick is None:
        return None, None
    found = None
    for site in global_sites:
        value = site["value"]
        if site is stick or not torch.is_tensor(value) or not value.is_floating_point() or value.numel() == 0:
            continue
        try:
            same = bool(torch.equal(torch.broadcast_to(value, c0.shape).to(c0), c0))
        except RuntimeError:
            continue
        if same:
            found = site
            break
    if found is None:
        return None, None
    name, prior = found["name"], _base(found["fn"])
    if found["cond_indep_stack"]:
        raise ModelStructureError(
            f"site '{name}' is a latent DP concentration inside plate(s) "
            f"{[f.name for f in found['cond_indep_stack']]}; "
            f"pyro-memo learns one alpha shared by all sticks: {ALPHA_FORM}"
        )
    if not isinstance(prior, dist.Gamma) or found["value"].numel() != 1:
        what = (f"a {type(prior).__name__} prior" if not isinstance(prior, dist.Gamma)
                else f"a Gamma prior of shape {tuple(found['value'].shape)}")
        raise ModelStructureError(
            f"site '{name}' is a latent DP concentration with {what}; pyro-memo learns one alpha in closed form "
            f"under a Gamma prior with a single value (shape () or (1,), with or without .to_event(1)): {ALPHA_FORM}"
        )
    s1, s2 = float(prior.concentration.reshape(-1)[0]), float(prior.rate.reshape(-1)[0])
    if not (s1 > 0 and s2 > 0 and s1 < float("inf") and s2 < float("inf")):
        raise ModelStructureError(f"site '{name}': its Gamma prior's shape and rate must be positive and finite; "
                                  f"got ({s1}, {s2})")
    # the wiring: conditioned on another value of alpha, the sticks' second parameter follows it
    probe = found["value"].detach() * 0 + 0.5 + 1.37 * float(found["value"].detach().reshape(-1)[0])
    with torch.no_grad(), poutine.block():
        cond = poutine.trace(poutine.condition(model, data={name: probe})).get_trace(*args, **kwargs)
    got = _base(cond.nodes[stick["name"]]["fn"]).concentration0.expand(stick["value"].shape)
    if not bool(torch.allclose(got.double(), probe.double().expand(got.shape), rtol=1e-6, atol=0)):
        raise ModelStructureError(
            f"site '{name}' looks like the DP concentration, but the stick site '{stick['name']}' does not take it "
            f"as its Beta(1, alpha) parameter; supported form: {ALPHA_FORM}"
        )
    _refuse_alpha_elsewhere(model, args, kwargs, trace, name, probe, stick["name"])
    return found, (s1, s2)


def _refuse_alpha_elsewhere(model, args, kwargs, trace, name, probe, stick):
    """Raise :class:`ModelStructureError` if the latent alpha ``name`` enters another site than the sticks
    ``stick`` (a component prior's rate, the observation's scale): q(alpha) is learnt from the sticks alone, and
    recognition would read that site's parameters at the one value of alpha the trace drew."""
    others = [n for n in sites_moved_by(model, args, kwargs, trace, name, probe,
                                        f"site '{name}' at another value (checking which sites it enters)")
              if n != stick]
    if others:
        raise ModelStructureError(
            f"site '{name}' is the latent DP concentration (the sticks '{stick}' take it as their Beta(1, alpha) "
            f"parameter), but it also enters site(s) {others}: pyro-memo learns q(alpha) from the sticks alone, and "
            f"would read {others} at one random draw of alpha. Use the latent alpha only in the sticks, and constants "
            f"in the other sites' distributions: {ALPHA_FORM}"
        )


def _refuse_latent_alpha(global_sites, stick_site, alpha):
    for site in global_sites:
        if site is stick_site or site["cond_indep_stack"] or site["value"].numel() != 1:
            continue
        value = float(site["value"].reshape(()))
        if stick_site is not None and abs(value - alpha) <= 1e-6 * (1 + abs(alpha)):
            raise ModelStructureError(
                f"site '{site['name']}' looks like a latent DP concentration ({type(_base(site['fn'])).__name__} "
                f"prior on the sticks' alpha) but is not wired as one; supported form: {ALPHA_FORM}"
            )
        raise ModelStructureError(
            f"site '{site['name']}' is a global latent outside any plate; pyro-memo supports only the sticks "
            "(plate of size T - 1), component parameters (plate of size T) and a latent DP concentration "
            f"({ALPHA_FORM})"
        )


_TRACE_FROM_CALLER_RNG = ContextVar("trace_from_caller_rng", default=False)


@contextmanager
def _caller_rng_untouched():
    """Tracing the model samples its latent sites from torch's global generator: fork it (and any CUDA
    generator already in use), so that recognising a model leaves the caller's random stream where it was
    (unless under :func:`tracing_draws_from_the_caller_rng`)."""
    if _TRACE_FROM_CALLER_RNG.get():
        yield
        return
    with _forked_rng():
        yield


def _forked_rng():
    """torch's global generator (and any CUDA generator already in use), forked: restored on exit."""
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []
    return torch.random.fork_rng(devices=devices)


@contextmanager
def tracing_draws_from_the_caller_rng():
    """Recognition's traces draw from torch's global generator, as before it was forked: for a caller that
    runs under its own seed and whose seeded results were made so (:class:`~pyro_memo.PyroSVI`)."""
    token = _TRACE_FROM_CALLER_RNG.set(True)
    try:
        yield
    finally:
        _TRACE_FROM_CALLER_RNG.reset(token)


def recognize_model(model, *args, dtype=torch.float64, **kwargs):
    """Trace ``model(*args, **kwargs)`` and return its spec: a :class:`~pyro_memo.bridge.ModelSpec` (``kind == "dp"``)
    for a DP mixture, an :class:`~pyro_memo.bridge.hdp_recognition.HDPSpec` (``kind == "hdp"``)
    for an HDP topic model (dispatched on the model's structure: global sites in three plates, one
    of them a Dirichlet over the assignment's categories), a
    :class:`~pyro_memo.bridge.relational_recognition.RelationalSpec` (``kind == "relational"``) for an
    HDP relational model (two latent Categorical roles and an observed Bernoulli link per pair).

    :param model: a Pyro model following the conventions in this module's docstring, or those
        of ``pyro_memo.bridge.hdp_recognition``.
    :param torch.dtype dtype: dtype of pyro-memo's variational math (float64 default).
    :raises ModelStructureError: naming the offending site and what was expected.
    """
    with _caller_rng_untouched():  # tracing draws the latent sites: the caller's RNG stream must not move
        tracer = poutine.trace(model)
        try:
            with torch.no_grad(), poutine.block(), quiet_wishart():  # invisible to any handler the caller runs under
                trace = tracer.get_trace(*args, **kwargs)
        except Exception as err:
            _check_batch_arguments(model, args, kwargs, tracer.trace)  # the plates the trace reached
            _check_plate_sizes(model, args, kwargs, tracer.trace, err)
            _, cause = model_failure(err)  # the cause, without the table of shapes Pyro's trace appends
            raise ModelStructureError(f"tracing the model with the given arguments raised {type(err).__name__}: "
                                      f"{cause}{_argument_hint(model, args, kwargs)}") from err
        _check_batch_arguments(model, args, kwargs, trace)
        try:
            with quiet_wishart():
                return _recognize(model, args, kwargs, trace, dtype)
        except (ModelStructureError, NonFiniteDataError):
            raise
        except (RuntimeError, TypeError, IndexError, ValueError, AttributeError, KeyError, NotImplementedError) as err:
            raise ModelStructureError(
                f"pyro-memo could not read this model ({type(err).__name__}: {err}); see the conventions in "
                f"pyro_memo.bridge.recognition (docs/guide/conventions.md){_argument_hint(model, args, kwargs)}"
            ) from err


def _named_arguments(model, args, kwargs):
    """``(name, value)`` of each argument of the call: the model's parameter names where its signature
    binds them (``"args[i]"`` for the ``i``-th caught by ``*args``, a keyword's own name where ``**kwargs``
    catches it), else ``"#i"`` for the ``i``-th positional one."""
    try:
        signature = inspect.signature(model)
        bound = signature.bind_partial(*args, **kwargs).arguments
    except (TypeError, ValueError):  # no signature, or one the arguments do not fit
        return [*((f"#{i}", a) for i, a in enumerate(args)), *kwargs.items()]
    named = []
    for name, value in bound.items():
        kind = signature.parameters[name].kind
        if kind == inspect.Parameter.VAR_POSITIONAL:
            named += [(f"{name}[{i}]", a) for i, a in enumerate(value)]
        elif kind == inspect.Parameter.VAR_KEYWORD:
            named += list(value.items())
        else:
            named.append((name, value))
    return named


def _check_batch_arguments(model, args, kwargs, trace):
    """Raise :class:`ValueError` naming the argument if a plate of ``trace`` is subsampled by an argument of
    the call that is not a 1-D integer tensor of ids in ``[0, size)`` (:func:`.structure.as_batch_ids`):
    a 2-D batch otherwise reads as rows of items and recognition finds no data argument, a float one fails
    in the model's own ``data[idx]``."""
    named = _named_arguments(model, args, kwargs)
    for name, site in _plate_sites(trace):
        if site["value"] is None:
            continue
        for arg, value in named:
            if value is site["value"]:
                as_batch_ids(value, site["fn"].size, f"the model's argument {arg!r} (the subsample of plate '{name}')")


_OUT_OF_BOUNDS = re.compile(r"index (-?\d+) is out of bounds for dimension 0 with size (\d+)")


def _check_plate_sizes(model, args, kwargs, trace, err):
    """Raise :func:`.structure.plate_size_error` if the failed trace ``err`` indexed past the end of an argument of
    the call inside a plate larger than it (``pyro.plate("pairs", 60)`` over 45 pairs: torch's bare "index 45 is
    out of bounds for dimension 0 with size 45"), naming the plate, its size, the argument and its length."""
    cause = err.__cause__ if err.__cause__ is not None else err
    match = _OUT_OF_BOUNDS.search(str(cause)) if isinstance(cause, IndexError) else None
    if match is None:
        return
    index, length = int(match.group(1)), int(match.group(2))
    plates = [(name, site) for name, site in _plate_sites(trace) if site["value"] is not None
              and site["fn"].size > length and bool((torch.as_tensor(site["value"]) == index).any())]
    arguments = [(name, value) for name, value in _named_arguments(model, args, kwargs)
                 if torch.is_tensor(value) and value.dim() >= 1 and len(value) == length]
    if plates and arguments:
        name, site = plates[-1]  # the innermost plate the trace entered
        ids = [a for a in arguments if a[1].dim() == 1 and not a[1].is_floating_point()]  # node ids first
        arg = (ids or arguments)[0][0]
        raise plate_size_error(name, site["fn"].size, arg, length) from err


def _signature_mismatch(model, args, kwargs):
    """``"; "`` and a phrase saying that the call's arguments do not fit ``model``'s signature (an unknown
    keyword, such as one meant for the fit but passed on to the model, or too many or too few arguments),
    else ``""`` (also for a model without a signature)."""
    try:
        signature = inspect.signature(model)
    except (TypeError, ValueError):
        return ""
    try:
        signature.bind(*args, **kwargs)
    except TypeError as err:
        name = getattr(model, "__name__", type(model).__name__)
        return f"; the arguments do not fit the model's signature {name}{signature} ({err})"
    return ""


def _argument_hint(model, args, kwargs):
    """``"; "`` and a phrase naming an argument of ``model`` that a failed trace likely stumbled on, else ``""``:
    one that is no tensor (a numpy array or a list, which Pyro's plates and pyro-memo's readers take as
    tensors) or an empty tensor (a batch of no items); first, arguments that do not fit the model's signature."""
    mismatch = _signature_mismatch(model, args, kwargs)
    if mismatch:
        return mismatch
    for name, value in _named_arguments(model, args, kwargs):
        if isinstance(value, list | tuple) or type(value).__module__ == "numpy":
            kind = "numpy array" if isinstance(value, np.ndarray) else type(value).__name__
            return (f"; the model's argument {name!r} is a {kind}: give the model torch tensors "
                    f"(torch.as_tensor({name}))")
        if torch.is_tensor(value) and value.numel() == 0:
            return (f"; the model's argument {name!r} is empty (shape {tuple(value.shape)}): data and batches need "
                    "at least one item")
    return ""


def _recognize(model, args, kwargs, trace, dtype):
    _refuse_params(trace)
    plates, sites = _sample_sites(trace)
    sites = _read_obs_masks(trace, sites)
    observed = [s for s in sites if s["is_observed"]]
    if len(observed) != 1:
        raise _observed_count_error(observed)
    obs = observed[0]
    _check_observed_finite(obs)
    _refuse_scales(sites)
    _refuse_latent_masks(sites)
    _refuse_observation(obs)
    _check_observed_shape(obs)
    obs_features, written = None, obs
    if len(obs["cond_indep_stack"]) == 2:
        outer, inner = _nested_features(obs, None, "observed")
        obs, obs_features = _as_event(obs, outer), inner.name
    obs_plates = list(_plates(obs))
    if len(obs_plates) != 1:
        found = f"found plates {obs_plates}" if obs_plates else "found none (items written as .expand or .to_event)"
        raise ModelStructureError(
            f"observed site '{obs['name']}' must sit in exactly one data plate; {found}: write the items' "
            f"assignment and observation in one plate, {DATA_PLATE_FORM}"
        )
    data_plate = obs_plates[0]
    latent = [s for s in sites if not s["is_observed"]]
    assignment = [s for s in latent if data_plate in _plates(s)]
    if obs_features is not None and not assignment:  # the items' plate is the inner one: not the nested form
        raise _nesting_error(written, "observed")
    if is_relational(obs, assignment):
        global_sites = [s for s in latent if not any(s is a for a in assignment)]
        return recognize_relational(model, args, kwargs, trace, plates, obs, assignment, global_sites)
    if len(assignment) != 1 or not isinstance(_base(assignment[0]["fn"]), dist.Categorical):
        refuse_document_observation(obs, assignment, data_plate)
        found = {s["name"]: type(_base(s["fn"])).__name__ for s in assignment}
        raise ModelStructureError(
            f"expected one latent Categorical assignment site inside plate '{data_plate}'; found {found}"
        )
    z_site = assignment[0]
    T = _base(z_site["fn"]).probs.shape[-1]
    global_sites = [s for s in latent if s is not z_site]
    if is_hdp(global_sites, T):
        return recognize_hdp(model, args, kwargs, trace, plates, obs, z_site, global_sites)
    for site in global_sites:
        refuse_sequential(site, "global")
        refuse_subsampled(site, "global", f"the items (plate '{data_plate}')")
    alpha_site, alpha_prior = _find_latent_alpha(model, args, kwargs, trace, global_sites, T)
    if alpha_site is not None:
        global_sites = [s for s in global_sites if s is not alpha_site]
    stick_site, alpha = _find_sticks(global_sites, T)
    if alpha_site is not None:
        alpha = alpha_prior[0] / alpha_prior[1]
    _refuse_latent_alpha(global_sites, stick_site, alpha)
    comp = {s["name"]: s for s in global_sites if s is not stick_site}
    if not comp:
        raise ModelStructureError("expected component parameter sites in a plate of size T = "
                                  f"{T} (the assignment has T categories); found none")
    comp, component_features = _unnest_components(comp, T)
    component_plate = _component_plate(comp, T)
    obs_fn = _base(obs["fn"])
    scalar = obs_fn.event_shape == () and obs["value"].dim() == 1 and type(obs_fn).__name__ not in \
        sum((f.pyro_one_hot for f in FAMILIES.values()), ())
    if scalar:
        comp = _scalar_components(obs["name"], comp, T)
    family_cls, hyper, names = _recognise_components(obs_fn, obs["name"], comp, scalar)
    first_param = next(iter(comp.values()))["value"]
    try:
        family = family_cls(hyper, dtype=dtype, device=first_param.device)
    except ValueError as err:
        raise ModelStructureError(f"component sites {sorted(comp)}: {err}") from err
    size, subsample_size, subsample = plates.get(data_plate, (None, None, None))
    num_items = obs["value"].shape[0]
    if size is None:
        size = num_items
    if subsample is not None:
        subsample_size = subsample.shape[0]
    if subsample_size is None:
        subsample_size = size
    # the plate's own indices (its whole range when not subsampled): where the data argument is read from, so a
    # plate smaller than the data (its first rows observed) finds the argument and is refused below by name
    rows = subsample
    _check_observed_rows(obs, data_plate, size, subsample_size)
    if subsample_size == size and (subsample is None or bool((subsample == torch.arange(size)).all())):
        subsample = None
    spec = ModelSpec(
        family=family,
        alpha=alpha,
        T=T,
        stick_site=None if stick_site is None else stick_site["name"],
        stick_plate=None if stick_site is None else next(iter(_plates(stick_site))),
        component_plate=component_plate,
        param_sites=names,
        assignment_site=z_site["name"],
        obs_site=obs["name"],
        data_plate=data_plate,
        num_data=int(size),
        subsample_size=int(subsample_size),
        data_arg=_find_data_arg(args, kwargs, obs["value"], subsample, obs, rows),
        subsample_arg=None if subsample is None else _find_subsample_arg(args, kwargs, subsample),
        one_hot=type(obs_fn).__name__ in family_cls.pyro_one_hot,
        scalar=scalar,
        alpha_site=None if alpha_site is None else alpha_site["name"],
        alpha_prior=alpha_prior,
        alpha_shape=() if alpha_site is None else tuple(alpha_site["value"].shape),
        alpha_event_dim=0 if alpha_site is None else len(alpha_site["fn"].event_shape),
        plate_dims=_plate_dims(stick_site, next(iter(comp.values())), obs),
        obs_features=obs_features,
        component_features={role: component_features[name] for role, name in names.items()
                            if name in component_features},
    )
    if spec.subsample_arg is None and spec.subsample_size < spec.num_data:
        spec.subsample_size_arg, default = _find_subsample_size_arg(
            model, args, kwargs, data_plate, spec.subsample_size, spec.num_data)
        spec.extra["subsample_size_default"] = default
    data_len = spec.raw_data(args, kwargs).shape[0]
    _check_plate_covers_data(model, spec, data_len)
    spec.extra.update(model_dtype=first_param.dtype, model_device=first_param.device, data_len=int(data_len),
                      arg_names=positional_names(model))
    verify_wiring(model, args, kwargs, spec, trace)
    return spec


def _check_observed_rows(obs, plate, size, subsample_size):
    """Raise :class:`ModelStructureError` naming the observed site, its plate and both sizes if the site
    observes another number of items than its plate holds (``pyro.plate('data', 21)`` with ``obs=data`` of 20
    rows): recognition otherwise found no argument the observation came from."""
    value = obs["value"]
    if value.dim() - len(obs["fn"].event_shape) != 1 or value.shape[0] == subsample_size:
        return
    holds = f"size {size}" if subsample_size == size else f"size {size}, subsampled to {subsample_size}"
    raise ModelStructureError(
        f"observed site '{obs['name']}' observes {value.shape[0]} items, but its plate '{plate}' ({holds}) holds "
        f"{subsample_size}: observe one item per index of the plate. Give the plate the data's length: "
        f"pyro.plate('{plate}', len(data), subsample=batch) as idx, with obs=data[idx] (or pyro.plate('{plate}', "
        f"len(data)) with obs=data, without batches)")


def _check_plate_covers_data(model, spec, data_len):
    """Raise :class:`ModelStructureError` naming the data plate, its size, the data argument and its length
    unless the plate has one item per row of the data argument. A larger plate (``pyro.plate('data', 100,
    subsample=batch)`` over 60 rows) is never covered by batches of the data's rows: memoized inference held
    the globals forever. A smaller one (``pyro.plate('data', 30, ...)`` over 60 rows) observes only the
    data's first rows: batches silently fitted 30 of the 60 items."""
    if spec.num_data == data_len:
        return
    kind, key = spec.data_arg
    names = positional_names(model)
    name = names[key] if kind == "arg" and key < len(names) else key
    plate, size = spec.data_plate, spec.num_data
    verb = "subsamples" if spec.subsample_arg is not None or spec.subsample_size < size else "observes"
    if size > data_len:
        why = (f"batches of its rows never cover the plate (memoized inference would never update the globals, "
               f"and each batch would be scaled as a part of {size} items)")
    else:
        why = (f"the plate's indices reach only its first {size} rows, so the other {data_len - size} would never be "
               f"fitted (and each batch would be scaled as a part of {size} items)")
    raise ModelStructureError(
        f"plate '{plate}' has size {size}, but the data it {verb}, the model's argument {name!r}, holds "
        f"{data_len} items: {why}. Give the plate the data's length: pyro.plate('{plate}', len(data), "
        f"subsample=batch) (or pyro.plate('{plate}', len(data)) without batches)")


def _check_observed_shape(obs):
    """Raise :class:`ModelStructureError` if the observed value's rows do not have the observation's event
    shape: data of another dimension than the model's (3 columns under a 2-D prior), which failed later in
    a log-density with torch's "The size of tensor a (3) must match the size of tensor b (2)"."""
    event, value = tuple(obs["fn"].event_shape), tuple(obs["value"].shape)
    if event and value[max(len(value) - len(event), 0):] != event:
        raise ModelStructureError(
            f"observed site '{obs['name']}' observes a value of shape {value}, but its distribution's event shape is "
            f"{event}: each item must be a row of shape {event}. The data argument does not fit the model's "
            f"dimension (its prior or the observation's parameters)")


def _observed_count_error(observed):
    """The error for a model without exactly one observed site: the sites (the first few), and for sites in a
    sequential plate (``for i in pyro.plate(...)``, one site per item) the vectorised form."""
    names = [s["name"] for s in observed]
    shown = repr(names) if len(names) <= 5 else f"{len(names)} sites: [{', '.join(map(repr, names[:3]))}, ..., " \
                                                 f"{names[-1]!r}]"
    sequential = next((f for s in observed for f in s["cond_indep_stack"] if not f.vectorized), None)
    hint = ""
    if not names:
        hint = (": this call observes nothing (its data argument left out or None?); recognising the model, and "
                "starting a guide, need a call with the data")
    if sequential is not None:
        hint = (f"; they come from the sequential plate '{sequential.name}' (`for i in pyro.plate(...)`, one site "
                f"per item): write it vectorised, `with pyro.plate('{sequential.name}', N):`, with one observed "
                f"site for all the data (obs=data) and one assignment site")
    return ModelStructureError(f"expected exactly one observed site (the data); found {shown}{hint}")


def _scalar_components(obs_name, comp, T):
    """Component sites of a model with scalar data, seen as the family's ``D = 1`` form."""
    out = {}
    for name, site in comp.items():
        fn = _base(site["fn"])
        if site["value"].shape != (T,) or fn.event_shape != () or type(fn).__name__ not in ("Normal", "Gamma", "Beta"):
            raise ModelStructureError(
                f"observed site '{obs_name}' has scalar data of shape (N,), so component site '{name}' must be a "
                f"univariate Normal / Gamma / Beta of shape (T,) = ({T},); it is {type(fn).__name__} of shape "
                f"{tuple(site['value'].shape)} (for (N, D) data use .to_event(1) on the observation)"
            )
        out[name] = dict(site, fn=_unsqueeze_dist(fn), value=site["value"].unsqueeze(-1))
    return out


def _unnest_components(comp, T):
    """Component sites in a nested feature plate rewritten in their ``.to_event(1)`` form; returns
    ``(sites, {site name: feature plate name})``."""
    out, features = {}, {}
    for name, site in comp.items():
        if len(site["cond_indep_stack"]) == 2 and T in [f.size for f in site["cond_indep_stack"]]:
            outer, inner = _nested_features(site, T, "component")
            out[name], features[name] = _as_event(site, outer), inner.name
        else:
            out[name] = site
    return out, features


def _plate_dims(stick_site, component_site, obs):
    """The ``dim`` of the sticks', the components' and the data's plate in the model."""
    dims = {"components": component_site["cond_indep_stack"][0].dim, "data": obs["cond_indep_stack"][0].dim}
    if stick_site is not None:
        dims["sticks"] = stick_site["cond_indep_stack"][0].dim
    return dims


def _component_plate(comp, T):
    names = set()
    for name, site in comp.items():
        sizes = [(f.name, f.size) for f in site["cond_indep_stack"]]
        if len(sizes) != 1 or sizes[0][1] != T:
            where = f"it is in plates {sizes}" if sizes else (
                f"it is in no plate (its {T} components written as one event of shape "
                f"{tuple(site['fn'].event_shape)}, .to_event)")
            raise ModelStructureError(
                f"site '{name}' must be a component parameter in one plate of size T = {T}; {where}. Supported: "
                f"with pyro.plate('components', {T}): {name} = pyro.sample('{name}', prior), the prior of one "
                f"component (.to_event(1) for its vector of D, not for the T components)"
            )
        names.add(sizes[0][0])
    if len(names) != 1:
        raise ModelStructureError(f"component parameters must share one plate; found {sorted(names)}")
    return names.pop()
