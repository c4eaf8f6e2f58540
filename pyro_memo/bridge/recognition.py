"""Recognise a user's Pyro DP-mixture model by tracing it, and verify the wiring numerically.

Conventions a model must follow (the ones :class:`~pyro_memo.models.DPMixtureModel`
and Pyro's DP-mixture tutorial follow):

1. Sticks: one latent ``Beta(1, alpha)`` site in a plate of size ``T - 1``; the
   weights are :math:`w_k = v_k \\prod_{\\ell<k}(1 - v_\\ell)` with :math:`v_T = 1`.
2. Component parameters: latent sites in a plate of size ``T`` with a supported
   conjugate prior (see :data:`SUPPORTED`), the same prior for every component.
3. Assignment: one latent ``Categorical(w)`` site inside the data plate.
4. Observation: one observed site inside the data plate whose distribution indexes the
   component parameters by the assignment. The full data tensor is an argument of the
   model (the observed value, or the argument indexed by the plate's subsample).

After reading the structure, three numerical checks run at random values: the
assignment probabilities equal the stick-breaking weights, the observation's log_prob
equals the family's log-density, and the component sites' log_prob equals the
family's prior log-density. Anything else raises :class:`ModelStructureError`.
"""

from dataclasses import dataclass, field

import pyro.distributions as dist
import torch
from pyro import poutine

from ..families import Bernoulli, DiagGaussian, Gaussian, Multinomial, Poisson, ZeroMeanGaussian
from ..models.component_sites import sites_for
from .structure import ModelStructureError, _base
from .wiring_check import verify_wiring

#: observation distribution -> what pyro-memo fits it with
SUPPORTED = {
    "MultivariateNormal": "Gaussian (Wishart precision [+ MultivariateNormal mean]) -> gauss / zm-gauss",
    "Normal": "diagonal Gaussian (Gamma precisions + Normal means) -> diag-gauss",
    "Multinomial / Categorical": "Dirichlet probabilities -> mult",
    "Bernoulli": "Beta probabilities -> bern",
    "Poisson": "Gamma rates -> poisson",
}


def _first(t, event_dim):
    """The first component's value of a ``(T, *event)`` tensor."""
    return t.reshape((-1,) + t.shape[t.dim() - event_dim:])[0]


def _constant_over_components(t, event_dim, site, what):
    flat = t.reshape((-1,) + t.shape[t.dim() - event_dim:])
    if not bool(torch.allclose(flat, flat[:1].expand_as(flat), rtol=1e-10, atol=0)):
        raise ModelStructureError(
            f"site '{site}': the prior {what} differs across components; pyro-memo needs "
            "i.i.d. components (one conjugate prior shared by all T components)"
        )
    return flat[0]


@dataclass
class ModelSpec:
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
    extra: dict = field(default_factory=dict)

    @property
    def sites(self):
        return sites_for(self.family, self.param_sites)

    @staticmethod
    def _get(where, args, kwargs):
        kind, key = where
        return args[key] if kind == "arg" else kwargs[key]

    def batch_indices(self, args, kwargs):
        """The data plate's subsample indices when the model is given them as an argument
        (the model's batch), else ``None``."""
        if self.subsample_arg is None:
            return None
        return torch.as_tensor(self._get(self.subsample_arg, args, kwargs), dtype=torch.long)

    def data(self, args, kwargs, index=None):
        """The ``(N, D)`` data tensor (rows ``index`` only, if given), validated."""
        x = torch.as_tensor(self._get(self.data_arg, args, kwargs))
        if index is not None:
            x = x[index.to(x.device)]
        if self.one_hot:
            x = torch.nn.functional.one_hot(x.long(), self.family.dim)
        return self.family.check_data(x)


def _plates(site):
    return {f.name: f for f in site["cond_indep_stack"]}


def _find_data_arg(args, kwargs, obs, subsample):
    candidates = [("arg", i, a) for i, a in enumerate(args)] + [("kwarg", k, a) for k, a in kwargs.items()]
    for kind, key, value in candidates:
        if not torch.is_tensor(value) or value.dim() != obs.dim():
            continue
        picked = value if subsample is None else value[subsample]
        if picked.shape == obs.shape and bool(torch.equal(picked.to(obs.dtype), obs)):
            return kind, key
    raise ModelStructureError(
        "the observed data must be passed to the model as an argument (positional or keyword); "
        "no argument matches the observed site's value"
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


def _recognise_components(obs_fn, obs_name, comp_sites):
    """Map the observation and component sites to a family; return (family class, hyper, names)."""
    by_type = {}
    for name, site in comp_sites.items():
        by_type.setdefault(type(_base(site["fn"])).__name__, []).append(name)

    def need(types, family_name):
        if sorted(by_type) != sorted(types) or any(len(v) != 1 for v in by_type.values()):
            found = {n: type(_base(s["fn"])).__name__ for n, s in comp_sites.items()}
            raise ModelStructureError(
                f"observed site '{obs_name}' is {type(obs_fn).__name__}, so the {family_name} family "
                f"needs component sites of types {sorted(types)}; found {found}"
            )
        return {t: by_type[t][0] for t in types}

    kind = type(obs_fn).__name__
    if kind == "MultivariateNormal":
        if "MultivariateNormal" in by_type:
            names = need(["Wishart", "MultivariateNormal"], "gauss")
            wish = _base(comp_sites[names["Wishart"]]["fn"])
            lam = comp_sites[names["Wishart"]]["value"]
            mvn = _base(comp_sites[names["MultivariateNormal"]]["fn"])
            ratio = _first(mvn.precision_matrix, 2) / _first(lam, 2)
            hyper = {
                "m": _constant_over_components(mvn.loc, 1, names["MultivariateNormal"], "mean"),
                "kappa": ratio[0, 0],
                "nu": _constant_over_components(wish.df, 0, names["Wishart"], "df"),
                "B": _constant_over_components(wish.precision_matrix, 2, names["Wishart"], "scale"),
            }
            return Gaussian, hyper, {"Lambda": names["Wishart"], "mu": names["MultivariateNormal"]}
        names = need(["Wishart"], "zm-gauss")
        wish = _base(comp_sites[names["Wishart"]]["fn"])
        hyper = {
            "nu": _constant_over_components(wish.df, 0, names["Wishart"], "df"),
            "B": _constant_over_components(wish.precision_matrix, 2, names["Wishart"], "scale"),
        }
        return ZeroMeanGaussian, hyper, {"Lambda": names["Wishart"]}
    if kind == "Normal":
        names = need(["Gamma", "Normal"], "diag-gauss")
        gam = _base(comp_sites[names["Gamma"]]["fn"])
        lam = comp_sites[names["Gamma"]]["value"]
        nor = _base(comp_sites[names["Normal"]]["fn"])
        kappa = 1.0 / (_first(nor.scale.expand_as(lam), 1) ** 2 * _first(lam, 1))
        hyper = {
            "m": _constant_over_components(nor.loc.expand_as(lam), 1, names["Normal"], "mean"),
            "kappa": kappa,
            "a": _constant_over_components(gam.concentration.expand_as(lam), 1, names["Gamma"], "shape"),
            "b": _constant_over_components(gam.rate.expand_as(lam), 1, names["Gamma"], "rate"),
        }
        return DiagGaussian, hyper, {"lambda": names["Gamma"], "mu": names["Normal"]}
    if kind in ("Multinomial", "Categorical"):
        names = need(["Dirichlet"], "mult")
        dirichlet = _base(comp_sites[names["Dirichlet"]]["fn"])
        hyper = {"lam": _constant_over_components(dirichlet.concentration, 1, names["Dirichlet"], "concentration")}
        return Multinomial, hyper, {"phi": names["Dirichlet"]}
    if kind == "Bernoulli":
        names = need(["Beta"], "bern")
        beta = _base(comp_sites[names["Beta"]]["fn"])
        phi = comp_sites[names["Beta"]]["value"]
        hyper = {
            "a": _constant_over_components(beta.concentration1.expand_as(phi), 1, names["Beta"], "a"),
            "b": _constant_over_components(beta.concentration0.expand_as(phi), 1, names["Beta"], "b"),
        }
        return Bernoulli, hyper, {"phi": names["Beta"]}
    if kind == "Poisson":
        names = need(["Gamma"], "poisson")
        gam = _base(comp_sites[names["Gamma"]]["fn"])
        lam = comp_sites[names["Gamma"]]["value"]
        hyper = {
            "a": _constant_over_components(gam.concentration.expand_as(lam), 1, names["Gamma"], "shape"),
            "b": _constant_over_components(gam.rate.expand_as(lam), 1, names["Gamma"], "rate"),
        }
        return Poisson, hyper, {"lambda": names["Gamma"]}
    raise ModelStructureError(
        f"observed site '{obs_name}' has an unsupported likelihood {kind}; supported: "
        + "; ".join(f"{k} ({v})" for k, v in SUPPORTED.items())
    )


def _sample_sites(trace):
    from pyro.poutine.subsample_messenger import _Subsample

    plates, sites = {}, []
    for name, site in trace.nodes.items():
        if site["type"] != "sample":
            continue
        if isinstance(site["fn"], _Subsample):
            plates[name] = (site["fn"].size, site["fn"].subsample_size, site["value"])
        else:
            sites.append(site)
    return plates, sites


def recognize_model(model, *args, dtype=torch.float64, **kwargs):
    """Trace ``model(*args, **kwargs)`` and return its :class:`ModelSpec`.

    :param model: a Pyro model following the conventions in this module's docstring.
    :param torch.dtype dtype: dtype of pyro-memo's variational math (float64 default).
    :raises ModelStructureError: naming the offending site and what was expected.
    """
    with torch.no_grad(), poutine.block():  # invisible to any handler the caller runs under
        trace = poutine.trace(model).get_trace(*args, **kwargs)
    plates, sites = _sample_sites(trace)
    observed = [s for s in sites if s["is_observed"]]
    if len(observed) != 1:
        raise ModelStructureError(
            f"expected exactly one observed site (the data); found {[s['name'] for s in observed]}"
        )
    obs = observed[0]
    obs_plates = list(_plates(obs))
    if len(obs_plates) != 1:
        raise ModelStructureError(
            f"observed site '{obs['name']}' must sit in exactly one data plate; found plates {obs_plates}"
        )
    data_plate = obs_plates[0]
    latent = [s for s in sites if not s["is_observed"]]
    assignment = [s for s in latent if data_plate in _plates(s)]
    if len(assignment) != 1 or not isinstance(_base(assignment[0]["fn"]), dist.Categorical):
        found = {s["name"]: type(_base(s["fn"])).__name__ for s in assignment}
        raise ModelStructureError(
            f"expected one latent Categorical assignment site inside plate '{data_plate}'; found {found}"
        )
    z_site = assignment[0]
    T = _base(z_site["fn"]).probs.shape[-1]
    global_sites = [s for s in latent if s is not z_site]
    stick_site, alpha = _find_sticks(global_sites, T)
    comp = {s["name"]: s for s in global_sites if s is not stick_site}
    component_plate = _component_plate(comp, T)
    obs_fn = _base(obs["fn"])
    family_cls, hyper, names = _recognise_components(obs_fn, obs["name"], comp)
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
        data_arg=_find_data_arg(args, kwargs, obs["value"], subsample),
        subsample_arg=None if subsample is None else _find_subsample_arg(args, kwargs, subsample),
        one_hot=isinstance(obs_fn, dist.Categorical),
    )
    spec.extra.update(model_dtype=first_param.dtype, model_device=first_param.device)
    verify_wiring(model, args, kwargs, spec, trace)
    return spec


def _find_sticks(global_sites, T):
    candidates = [
        s for s in global_sites
        if isinstance(_base(s["fn"]), dist.Beta) and [f.size for f in s["cond_indep_stack"]] == [T - 1]
        and s["fn"].event_shape == ()
    ]
    if T == 1 and not candidates:
        return None, 1.0
    if len(candidates) != 1:
        raise ModelStructureError(
            f"expected one Beta(1, alpha) stick site in a plate of size T - 1 = {T - 1} (the assignment "
            f"has T = {T} categories); found {[s['name'] for s in candidates]}"
        )
    site = candidates[0]
    beta = _base(site["fn"])
    c1 = beta.concentration1.expand(site["value"].shape)
    if not bool(torch.all(c1 == 1)):
        raise ModelStructureError(f"stick site '{site['name']}' must be Beta(1, alpha); its first parameter is not 1")
    alpha = _constant_over_components(beta.concentration0.expand(site["value"].shape), 0, site["name"], "alpha")
    return site, float(alpha)


def _component_plate(comp, T):
    names = set()
    for name, site in comp.items():
        sizes = [(f.name, f.size) for f in site["cond_indep_stack"]]
        if len(sizes) != 1 or sizes[0][1] != T:
            raise ModelStructureError(
                f"site '{name}' must be a component parameter in one plate of size T = {T}; it is in {sizes}"
            )
        names.add(sizes[0][0])
    if len(names) != 1:
        raise ModelStructureError(f"component parameters must share one plate; found {sorted(names)}")
    return names.pop()
