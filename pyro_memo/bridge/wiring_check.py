"""Numerical checks that a recognised model really is the DP mixture its spec describes."""

from contextlib import contextmanager

import torch
from pyro import poutine

from ..allocation import stick_breaking_weights
from ..families.base import NonFiniteDataError
from ..models.component_sites import index_components
from .structure import ModelStructureError, _base, probe_trace


def _close(a, b, dtype):
    rtol = 1e-7 if dtype == torch.float64 else 1e-3
    return bool(torch.allclose(a, b, rtol=rtol, atol=rtol * (1 + float(b.detach().abs().max()))))


def verify_wiring(model, args, kwargs, spec, trace):
    """Check weights, likelihood and prior of ``model`` against ``spec`` at random values.

    :raises ModelStructureError: naming the site whose numbers disagree.
    """
    model_dtype = spec.extra["model_dtype"]
    # 1. assignment probabilities are the stick-breaking weights of the sticks
    if spec.stick_site is not None:
        v = torch.rand(spec.T - 1, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
        v = (0.05 + 0.9 * v).to(dtype=model_dtype, device=spec.extra["model_device"])
        cond = probe_trace(model, args, kwargs, {spec.stick_site: v},
                           f"stick site '{spec.stick_site}' at random values (checking its wiring)")
        probs = _base(cond.nodes[spec.assignment_site]["fn"]).probs
        expected = stick_breaking_weights(v.double())
        if not _close(probs.double().reshape(-1, spec.T), expected.expand(probs.reshape(-1, spec.T).shape),
                      model_dtype):
            raise ModelStructureError(
                f"assignment site '{spec.assignment_site}': its probabilities are not the stick-breaking "
                f"weights w_k = v_k prod_(l<k) (1 - v_l) of site '{spec.stick_site}' (with v_T = 1)"
            )
    retrace = []  # the float64 re-run, made once, where a check needs it
    for check in (_check_likelihood, _check_prior):
        try:
            check(spec, trace)
        except ModelStructureError as err:
            # a float32 model scores an ill-conditioned draw (a Wishart of df = D) with rounding errors beyond the
            # float32 tolerance: check the same values again, the model run on them in float64
            if not retrace:
                retrace.append(_float64_trace(model, args, kwargs, spec, trace))
            if retrace[0] is None:
                raise
            try:
                with _default_dtype(torch.float64):
                    check(spec, retrace[0])
            except (RuntimeError, TypeError, ValueError):  # a mismatch again, or a model that mixes dtypes so
                raise err from None


@contextmanager
def _default_dtype(dtype):
    """Run with torch's default dtype ``dtype`` (a model's constants, ``torch.eye(D)``, Python floats turned into
    a distribution's parameters, are made in it), then put the caller's back."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(old)


def _float64_trace(model, args, kwargs, spec, trace):
    """``model`` re-run on ``trace``'s latent values cast to float64 (its subsamples replayed) under the default
    dtype float64, so that its distributions compute in float64; ``None`` for a float64 model, or where the model
    does not run so."""
    if spec.extra["model_dtype"] == torch.float64:
        return None
    data = {name: site["value"].double() for name, site in trace.nodes.items()
            if site["type"] == "sample" and not site["is_observed"] and torch.is_tensor(site["value"])
            and site["value"].is_floating_point() and type(site["fn"]).__name__ != "_Subsample"}
    try:
        with _default_dtype(torch.float64):
            return probe_trace(poutine.replay(model, trace=trace), args, kwargs, data, "its draws in float64")
    except (ModelStructureError, NonFiniteDataError):
        return None


def _theta(spec, trace):
    """The component sites' values in ``trace``, as float64 in the family's form (scalar data: ``(T, 1)``)."""
    theta = {role: trace.nodes[name]["value"].double() for role, name in spec.param_sites.items()}
    if spec.scalar:  # scalar (N,) data and (T,) component sites: the family's D = 1 form
        theta = {role: value.unsqueeze(-1) for role, value in theta.items()}
    return theta


def _check_likelihood(spec, trace):
    """Check 2 of :func:`verify_wiring` at the values of ``trace``: the observation's log_prob is the family's
    log-density at the assignment-indexed component parameters.

    :raises ModelStructureError: naming the observed site.
    """
    fam, model_dtype, sites = spec.family, spec.extra["model_dtype"], spec.sites
    theta = _theta(spec, trace)
    z = trace.nodes[spec.assignment_site]["value"]
    if spec.dim("data") == -2:  # the data plate left of a nested feature plate: z has shape (N, 1)
        z = z[..., 0]
    obs = trace.nodes[spec.obs_site]
    x = obs["value"]
    try:
        x_fam = spec.one_hot_rows(x) if spec.one_hot else x
    except ValueError as err:  # the data's category ids, not the model's structure
        raise ModelStructureError(str(err)) from err
    if spec.scalar:
        x_fam = x_fam.unsqueeze(-1)
    per_item = {role: index_components(theta[role], z, ev) for role, ev in sites.roles.items()}
    ours = fam.log_density(x_fam.double(), per_item)
    theirs = _observed_log_prob(spec, obs, x_fam).double()
    if spec.obs_features is not None:  # features as a nested plate: their log_probs sum to the event's
        theirs = theirs.sum(-1)
    if not _close(ours, theirs.expand(ours.shape), model_dtype):
        raise ModelStructureError(
            f"observed site '{spec.obs_site}': its log_prob does not match the {fam.name} likelihood "
            f"with component parameters {sorted(spec.param_sites.values())} indexed by "
            f"'{spec.assignment_site}' (max difference {float((ours - theirs).abs().max()):.3g})"
        )


def _check_prior(spec, trace):
    """Check 3 of :func:`verify_wiring` at the values of ``trace``: the component sites' log_prob is the family's
    conjugate prior read from them.

    :raises ModelStructureError: naming the component sites.
    """
    fam, model_dtype, theta = spec.family, spec.extra["model_dtype"], _theta(spec, trace)
    ours = fam.log_prior_density(theta).sum()
    theirs = sum(trace.nodes[name]["fn"].log_prob(trace.nodes[name]["value"]).double().sum()
                 for name in spec.param_sites.values())
    if not _close(ours, theirs, model_dtype):
        raise ModelStructureError(
            f"component sites {sorted(spec.param_sites.values())}: their prior log-density "
            f"({float(theirs):.6g}) does not match the {fam.name} conjugate prior read from them "
            f"({float(ours):.6g}); check how the mean's precision depends on the precision site"
        )


def _observed_log_prob(spec, obs, x_fam):
    """The observed site's own ``log_prob`` of its value, else a :class:`ModelStructureError` naming the site and
    why Pyro cannot score it either: the value's dtype (Pyro's ``Bernoulli`` cannot score integer or bool data;
    torch's "result type Float can't be cast to the desired output type Long" came out), or, where the dtype is
    not the cause, values outside the observation's support (:func:`_outside_support`)."""
    x = obs["value"]
    try:
        return obs["fn"].log_prob(x)
    except (RuntimeError, TypeError, ValueError) as err:
        dtype = spec.extra["model_dtype"]
        kind = type(_base(obs["fn"])).__name__
        if not _scores_as(obs["fn"], x, dtype):
            raise ModelStructureError(
                f"observed site '{spec.obs_site}': its observed value lies outside the support of its {kind} "
                f"({_outside_support(spec, obs, x_fam)}), so Pyro cannot score the model either: pass data the "
                f"observation can take") from err
        raise ModelStructureError(
            f"observed site '{spec.obs_site}': its {kind}.log_prob fails on the observed "
            f"value of dtype {x.dtype} ({type(err).__name__}: {err}), so Pyro cannot score the model either; pass the "
            f"data as floats, e.g. data.to({dtype})") from err


def _scores_as(fn, x, dtype):
    """Whether ``fn`` scores ``x`` once it is cast to ``dtype`` (so the value's dtype was what it could not take)."""
    if x.dtype == dtype:
        return False
    try:
        fn.log_prob(x.to(dtype))
    except (RuntimeError, TypeError, ValueError):
        return False
    return True


def _outside_support(spec, obs, x_fam):
    """Which observed values fall outside the support: the family's own data check's words (e.g. "poisson data
    must be non-negative counts; found 25 negative entries"), else the support's name."""
    try:
        spec.family.check_data(x_fam)
    except ValueError as err:
        return str(err)
    return f"its support is {obs['fn'].support}"
