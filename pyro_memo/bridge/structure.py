"""What model recognition (DP mixtures, HDPs) and its numerical wiring check share: the error
they raise, the unwrapping of Pyro distributions, plates, and the sticks."""

import hashlib
import inspect
import re

import pyro.distributions as dist
import torch
from pyro import poutine

from ..checks import as_index_tensor


class ModelStructureError(ValueError):
    """A Pyro model does not follow the conventions pyro-memo recognises."""


#: where Pyro's trace appends its table of the sites' shapes to an exception raised inside the model
_TRACE_SHAPES = re.compile(r"\n[ \t]*Trace Shapes:")


def model_error(err, max_lines=6):
    """The cause ``err`` (an exception raised inside a traced model) states, without the "Trace Shapes:" table
    Pyro's trace appends to its text (the sites' shapes, a screenful, after the actual cause): Pyro re-raises
    ``type(err)(message + table)`` from the original, which is returned when it is there; else ``err``, or one
    of its type with the table cut off. A message of more than ``max_lines`` lines (a tensor's values printed
    in a constraint's error) keeps its first ones and says how many it leaves out."""
    cause = err.__cause__
    text = str(err)
    match = _TRACE_SHAPES.search(text)
    if match is None:
        original = err
    elif type(cause) is type(err) and text.startswith(str(cause)):
        original = cause
    else:
        try:
            original = type(err)(text[:match.start()])
        except Exception:  # noqa: BLE001 - an exception type with other arguments: its text is what matters
            original = ValueError(text[:match.start()])
    lines = str(original).rstrip().split("\n")
    message = "\n".join(lines[:max_lines])
    if len(lines) > max_lines:
        message += f"\n... ({len(lines) - max_lines} more lines)"
    return original, message


def probe_trace(model, args, kwargs, data, what):
    """The trace of ``model(*args, **kwargs)`` with the sites of ``data`` conditioned on its values (a probe of
    recognition or its wiring check, without gradients, invisible to the caller's handlers). A model that fails
    there raises one :class:`ModelStructureError` naming ``what`` the probe set and the cause (:func:`model_error`,
    without the "Trace Shapes:" table Pyro's trace appends); pyro-memo's own errors raised by the model pass as
    they are."""
    try:
        with torch.no_grad(), poutine.block():
            return poutine.trace(poutine.condition(model, data=data)).get_trace(*args, **kwargs)
    except Exception as err:
        original, cause = model_failure(err)
        raise ModelStructureError(f"tracing the model with {what} raised {type(original).__name__}: {cause}") from err


def sites_moved_by(model, args, kwargs, trace, name, value, what):
    """The names of ``trace``'s sample sites whose log-density changes when ``model`` runs again with site ``name``
    conditioned on ``value`` and every other site replayed from ``trace`` (plates' subsamples included): the sites
    ``name`` enters, directly. ``name`` itself, plates and ``pyro.deterministic`` sites are left out; ``what`` names
    the probe for :func:`probe_trace`'s error."""
    probe = probe_trace(poutine.replay(model, trace=trace), args, kwargs, {name: value}, what)
    moved = []
    for site_name, site in trace.nodes.items():
        if site["type"] != "sample" or site_name == name or site["infer"].get("_deterministic") \
                or type(site["fn"]).__name__ == "_Subsample" or site_name not in probe.nodes:
            continue
        before = site["fn"].log_prob(site["value"]).double()
        after = probe.nodes[site_name]["fn"].log_prob(site["value"]).double()
        if before.shape != after.shape or not bool(torch.allclose(before, after, rtol=1e-6, atol=1e-9,
                                                                  equal_nan=True)):
            moved.append(site_name)
    return moved


def model_failure(err):
    """:func:`model_error` of an exception a traced model raised (call it while handling ``err``), but for
    pyro-memo's own errors (:class:`ModelStructureError`, ``NonFiniteDataError``: the model checked its data),
    which are raised again as they are, the original one where Pyro's trace wrapped it."""
    from ..families.base import NonFiniteDataError

    original, cause = model_error(err)
    if isinstance(err, (ModelStructureError, NonFiniteDataError)):
        if original is err:
            raise err
        raise original from err
    return original, cause


def plate_size_error(plate, size, arg, length, items=("entry", "entries"), reader=None, kind=""):
    """The :class:`ModelStructureError` for a plate of ``size`` indices over the model's argument ``arg``, which
    lists ``length`` ``items`` (singular, plural): a larger plate indexes past the argument's end (torch's bare
    "index 45 is out of bounds"), a smaller one leaves items out of the fit. ``reader``: what reads the argument
    in the plate (a plural noun phrase, e.g. "the node ids its role site 's' reads"); ``kind``: the plate's kind
    (``"pair "``)."""
    item, plural = items
    subject = (f"{reader}, the model's argument {arg!r}, list" if reader is not None
               else f"the model's argument {arg!r}, which the model indexes in that plate, lists")
    return ModelStructureError(
        f"{kind}plate '{plate}' has size {size}, but {subject} {length} {plural}: the plate must have one index per "
        f"{item} listed (a larger plate indexes past them, a smaller one leaves {plural} out of the fit). Give the "
        f"plate the {plural}' number: pyro.plate('{plate}', len({arg}), subsample=batch)")


def _base(fn):
    """Strip Independent / Expanded / masked wrappers off a distribution."""
    while True:
        if isinstance(fn, dist.Independent):
            fn = fn.base_dist
        elif isinstance(fn, (dist.ExpandedDistribution, dist.MaskedDistribution)):
            fn = fn.base_dist
        else:
            return fn


def _plates(site):
    return {f.name: f for f in site["cond_indep_stack"]}


def single_plate(site, what, form):
    """The one plate ``site`` sits in; else a :class:`ModelStructureError` naming the site, its plates
    and the supported ``form``."""
    stack = site["cond_indep_stack"]
    if len(stack) != 1:
        raise ModelStructureError(f"{what} site '{site['name']}' must sit in exactly one plate; found "
                                  f"{[f.name for f in stack]}. Supported {form}")
    return stack[0]


def refuse_sequential(site, kind):
    """Raise :class:`ModelStructureError` if the global ``site`` (``kind`` as in :func:`refuse_subsampled`) sits in a
    sequential plate (``for k in pyro.plate(...)``, one site per index): recognition counted each index's site as
    another site ("found ['v_0', 'v_1', ...]", or the components' family "needs sites of types ['Normal']; found
    {'mu_0': 'Normal', ...}"), never naming the plate."""
    seq = [f for f in site["cond_indep_stack"] if not f.vectorized]
    if seq:
        f = seq[0]
        stem = re.sub(r"[_\W]*\d+$", "", site["name"]) or site["name"]
        raise ModelStructureError(
            f"{kind} site '{site['name']}' sits in the sequential plate '{f.name}' (`for i in pyro.plate(...)`, one "
            f"site per index); pyro-memo reads each global plate as one vectorised site: write it "
            f"`with pyro.plate('{f.name}', {f.full_size or f.size}): {stem} = pyro.sample('{stem}', ...)`, one site "
            f"for all its indices")


def refuse_subsampled(site, kind, batches):
    """Raise :class:`ModelStructureError` if the global ``site`` (``kind``: "global", "stick", "topic") sits in a
    subsampled plate: its other indices would never be fitted, and recognition read the plate's subsample size as
    the truncation, blaming another site. ``batches`` names the plate that may be subsampled instead."""
    sub = [f for f in site["cond_indep_stack"] if f.full_size is not None and f.full_size != f.size]
    if sub:
        f = sub[0]
        raise ModelStructureError(
            f"{kind} site '{site['name']}' sits in plate '{f.name}' subsampled to {f.size} of its {f.full_size} "
            f"indices; pyro-memo fits every index of a global plate at once and batches only {batches}: keep plate "
            f"'{f.name}' whole, "
            f"pyro.plate('{f.name}', {f.full_size}) without subsample or subsample_size")


def _constant_over_components(t, event_dim, site, what):
    flat = t.reshape((-1,) + t.shape[t.dim() - event_dim:])
    if not bool(torch.allclose(flat, flat[:1].expand_as(flat), rtol=1e-10, atol=0)):
        raise ModelStructureError(
            f"site '{site}': the prior {what} differs across components; pyro-memo needs "
            "i.i.d. components (one conjugate prior shared by all T components)"
        )
    return flat[0]


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
            f"has T = {T} categories); found {[s['name'] for s in candidates] if candidates else 'none'}"
            f"{_stick_hint(global_sites, T) if not candidates else ''}"
        )
    site = candidates[0]
    beta = _base(site["fn"])
    c1 = beta.concentration1.expand(site["value"].shape)
    if not bool(torch.all(c1 == 1)):
        raise ModelStructureError(f"stick site '{site['name']}' must be Beta(1, alpha); its first parameter is not 1")
    alpha = _constant_over_components(beta.concentration0.expand(site["value"].shape), 0, site["name"], "alpha")
    return site, float(alpha)


def _stick_hint(global_sites, T):
    """Why no site was read as the sticks: a Beta site outside the components' plates (of size ``T``)
    written another way (its sticks an event, other plates), with the plate form; else a Dirichlet site
    (a finite mixture's weights); else nothing."""
    form = (f"with pyro.plate('sticks', {T - 1}): v = pyro.sample('v', dist.Beta(1.0, alpha)) (the user guide's "
            "model conventions)")
    for site in global_sites:
        fn = site["fn"]
        if not isinstance(_base(fn), dist.Beta) or T in [f.size for f in site["cond_indep_stack"]]:
            continue
        plates = [(f.name, f.size) for f in site["cond_indep_stack"]]
        where = f"in plates {plates}" if plates else "outside any plate"
        if fn.event_shape != ():
            return (f"; site '{site['name']}' is a Beta {where} with its sticks written as an event of shape "
                    f"{tuple(fn.event_shape)} (.to_event); pyro-memo reads the sticks from a plate, one stick per "
                    f"element, without .to_event: {form}")
        return (f"; site '{site['name']}' is a Beta {where} with shape {tuple(site['value'].shape)}; the "
                f"sticks are one Beta(1, alpha) site in one plate of size T - 1 = {T - 1}: {form}")
    dirichlets = [s["name"] for s in global_sites if isinstance(_base(s["fn"]), dist.Dirichlet)]
    if dirichlets:
        return (f"; site '{dirichlets[0]}' is Dirichlet, the weights of a finite mixture: a DP mixture draws "
                f"v ~ Beta(1, alpha) in a plate of size {T - 1} and builds its {T} weights by stick-breaking "
                "(the user guide's model conventions)")
    return ""


class ArgumentReader:
    """What a recognised model's spec shares: reading its arguments back from a call's
    ``args`` / ``kwargs`` (``where`` is ``("arg", position)`` or ``("kwarg", name)``)."""

    subsample_arg = None
    #: the field naming the plate the batch subsamples (``"data_plate"``, ``"doc_plate"``, ``"pair_plate"``)
    batch_plate_field = None

    @staticmethod
    def _get(where, args, kwargs, default=...):
        """The argument at ``where``; ``default`` (if given) when the call does not pass it."""
        kind, key = where
        try:
            return args[key] if kind == "arg" else kwargs[key]
        except (IndexError, KeyError):
            if default is ...:
                raise
            return default

    def batch_indices(self, args, kwargs):
        """The subsampled plate's indices when the model is given them as an argument (the
        model's batch: data items or documents), else ``None`` (also when this call leaves the
        argument out or passes ``None``: the whole plate)."""
        if self.subsample_arg is None:
            return None
        value = self._get(self.subsample_arg, args, kwargs, None)
        return None if value is None else as_batch_ids(value, None, self.batch_description())

    def batch_description(self):
        """The batch argument, named for an error: "the model's argument 'batch' (the subsample of plate
        'data')" (its parameter name where the model's signature gives one, else its position)."""
        kind, key = self.subsample_arg
        names = getattr(self, "extra", {}).get("arg_names", ())
        if kind == "arg":
            key = names[key] if key < len(names) else f"#{key}"
        plate = getattr(self, self.batch_plate_field, None) if self.batch_plate_field else None
        where = f" (the subsample of plate '{plate}')" if plate else ""
        return f"the model's argument {key!r}{where}"


def call_signature(args, kwargs):
    """Which arguments a call passes, and which are ``None``: a guide recognises its model once per
    signature, so a call that adds an argument (the batch's indices after a whole-data call) is read
    again."""
    return tuple(a is None for a in args), tuple(sorted((k, v is None) for k, v in kwargs.items()))


def adds_arguments(signature, than):
    """Whether a call of :func:`call_signature` ``signature`` passes an argument that a call of ``than`` left
    out or passed as ``None`` (a batch's indices after a whole-data call; not Predictive's call without
    the data)."""
    (args, kwargs), (old_args, old_kwargs) = signature, than
    old = dict(old_kwargs)
    return any(not none and (i >= len(old_args) or old_args[i]) for i, none in enumerate(args)) or \
        any(not none and old.get(key, True) for key, none in kwargs)


def check_subsample(indices, size, what):
    """``indices`` (a batch: a plate's subsample) as a 1-D long tensor of distinct ids in ``[0, size)``, else a
    :class:`ValueError` naming ``what``: a negative id silently wraps around to another item, a fraction is
    truncated, and an id listed twice is counted twice (or, in :func:`batch_tokens`, dropped)."""
    ids = as_index_tensor(indices, size, what)
    if ids.dim() != 1:
        raise ValueError(f"{what} must be a 1-D array of ids; got shape {tuple(ids.shape)}")
    if len(torch.unique(ids)) != len(ids):
        raise ValueError(f"{what} lists an id more than once; a batch holds each of its items once")
    return ids


def as_batch_ids(value, size, what):
    """``value`` (a model's batch: the ids its plate is subsampled by) as a 1-D long tensor of ids in
    ``[0, size)`` (``size`` ``None``: each non-negative), else a :class:`ValueError` naming ``what`` and the
    shape and dtype found: a 2-D batch reads as a batch of rows, a float one fails in the model's
    ``data[idx]`` (or is truncated), a bool one is a mask. Ids listed twice are :func:`check_subsample`'s."""
    try:
        given = torch.as_tensor(value)
    except (TypeError, ValueError, RuntimeError):
        raise ValueError(f"{what} must be a 1-D integer tensor of ids; got {type(value).__name__}") from None
    if given.dim() != 1 or given.is_floating_point() or given.is_complex() or given.dtype == torch.bool:
        raise ValueError(f"{what} must be a 1-D integer tensor of ids (e.g. torch.tensor([0, 4, 7])); got shape "
                         f"{tuple(given.shape)}, dtype {given.dtype}")
    return as_index_tensor(given, size, what)


def positional_names(fn):
    """The names of ``fn``'s positional-or-keyword parameters, in order (none if not inspectable)."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return ()
    return tuple(p.name for p in parameters if p.kind == inspect.Parameter.POSITIONAL_OR_KEYWORD)


def batch_key(indices):
    """A hashable key for a batch: a digest of its subsample indices (``"all"`` for the data)."""
    if indices is None:
        return "all"
    return hashlib.sha1(indices.cpu().numpy().tobytes()).hexdigest()
