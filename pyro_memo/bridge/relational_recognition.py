"""Recognise a user's Pyro HDP relational model by tracing it, and verify the wiring numerically.

Conventions (the shape of :class:`~pyro_memo.models.HDPRelationalModel`; any site and plate names):

1. Top-level sticks: one latent ``Beta(1, gamma)`` site in a plate of size ``K``; the community
   weights are :math:`\\beta_k = u_k \\prod_{\\ell<k}(1 - u_\\ell)` over ``K + 1`` entries (the last
   the tail beyond the truncation).
2. Memberships: one latent ``Dirichlet(alpha * beta)`` site in a node plate of size ``N`` (not
   subsampled: every pair reads two rows of it).
3. Link probabilities: one latent ``Beta(tau_a, tau_b)`` site in a plate of size ``K``.
4. Pairs: in one pair plate, two latent roles ``s ~ Categorical(pi[src])`` and
   ``r ~ Categorical(pi[dst])`` and an observed link ``y ~ Bernoulli(w[s] if s == r else eps)``
   (two roles in the tail entry link with ``eps`` too), with ``eps`` a constant in (0, 1). The
   pairs' node ids ``src`` and ``dst`` and the links ``y`` (0/1 floats) are arguments of the model,
   one entry per observed unordered pair; a pair that is not listed is unobserved. For batches of
   nodes the pair plate is subsampled, ``pyro.plate("pairs", len(src), subsample=batch)`` with
   ``batch`` an argument (:func:`batch_pairs` gives a batch of nodes' pairs).

The checks run at random values: the membership Dirichlet's concentration is ``alpha`` times the
stick-breaking weights, each role's probabilities are the memberships of its node, and the link's
``log_prob`` is the assortative likelihood's. Anything else raises
:class:`~pyro_memo.bridge.structure.ModelStructureError` naming the site and this form.
"""

from dataclasses import dataclass, field

import pyro.distributions as dist
import torch

from ..allocation import stick_breaking_weights
from ..checks import as_index_tensor
from ..posterior.relational import check_hyperparameters
from .structure import (
    ArgumentReader,
    ModelStructureError,
    _base,
    _constant_over_components,
    _plates,
    plate_size_error,
    positional_names,
    probe_trace,
    single_plate,
)

#: the supported relational form, quoted in error messages
RELATIONAL_FORM = ("u ~ Beta(1, gamma) in a plate of size K; pi ~ Dirichlet(alpha * beta(u)) in a node plate of size "
                   "N; w ~ Beta(tau_a, tau_b) in a plate of size K; in a pair plate, s ~ Categorical(pi[src]), "
                   "r ~ Categorical(pi[dst]) and y ~ Bernoulli(w[s] if s == r else eps) (observed)")

__all__ = ["RELATIONAL_FORM", "RelationalSpec", "batch_pairs", "is_relational", "recognize_relational"]


def _node_ids(value, name, form, flat=False):
    """``value`` (node ids: :func:`batch_pairs`'s ``src``, ``dst`` or ``nodes``) as a long tensor, else a
    :class:`ValueError` naming ``name`` that starts with ``form`` (the form expected): ``None`` or an object torch
    cannot read raised torch's own "Could not infer dtype of NoneType"; with ``flat``, more than one dimension
    is refused too."""
    if value is None:
        raise ValueError(f"{form}; got None")
    try:
        given = torch.as_tensor(value)
    except (TypeError, ValueError, RuntimeError):
        raise ValueError(f"{form}; got {type(value).__name__}") from None
    if flat and given.dim() > 1:
        raise ValueError(f"{form}; got shape {tuple(given.shape)}, dtype {given.dtype}")
    return as_index_tensor(given, None, name)


def batch_pairs(src, dst, nodes):
    """The positions of the pairs whose smaller node is in ``nodes``: a batch of nodes' pairs, as
    the pair plate's ``subsample``. Batches of nodes that partition the nodes give batches of pairs
    that partition the pairs::

        for nodes in torch.randperm(N).chunk(B):
            svi.step(src, dst, y, batch_pairs(src, dst, nodes))

    :raises ValueError: unless ``src`` and ``dst`` are arrays (not ``None``) listing one node per pair each
        (one length), and unless
        ``src``, ``dst`` and ``nodes`` are whole-number node ids (``nodes`` a 1-D array of them, or one id),
        naming the argument: a fraction was truncated to another node (``0.5`` to node 0), silently.
    """
    pair_ids = "{} must be a 1-D array of node ids, one per pair (e.g. torch.tensor([0, 0, 1]))"
    src, dst = _node_ids(src, "src", pair_ids.format("src")), _node_ids(dst, "dst", pair_ids.format("dst"))
    if src.shape != dst.shape:
        raise ValueError(f"src and dst must list one node per pair each; got shapes {tuple(src.shape)} and "
                         f"{tuple(dst.shape)}")
    ids = _node_ids(nodes, "nodes", "nodes must be a 1-D array of node ids (e.g. torch.tensor([0, 4, 7]))", flat=True)
    return torch.nonzero(torch.isin(torch.minimum(src, dst), ids.to(src.device))).squeeze(-1)


def is_relational(observed, roles):
    """Whether the data plate holds a relational model's pair: an observed Bernoulli link and two
    latent Categorical roles."""
    return isinstance(_base(observed["fn"]), dist.Bernoulli) and len(roles) == 2 and all(
        isinstance(_base(s["fn"]), dist.Categorical) for s in roles)


@dataclass
class RelationalSpec(ArgumentReader):
    """What recognition learnt about an HDP relational model: hyperparameters, site and plate names,
    and where a call passes the pairs."""

    N: int
    K: int
    alpha: float
    gamma: float
    tau: tuple
    eps: float
    stick_site: str
    stick_plate: str
    membership_site: str
    node_plate: str
    link_site: str
    link_plate: str
    source_site: str
    receiver_site: str
    obs_site: str
    pair_plate: str
    src_arg: tuple
    dst_arg: tuple
    y_arg: tuple
    subsample_arg: tuple = None
    extra: dict = field(default_factory=dict)

    kind = "relational"
    batch_plate_field = "pair_plate"

    def _get(self, where, args, kwargs, default=...):
        """The argument at ``where``, found by the model's parameter name too: an argument recognised
        as positional may come as a keyword in another call, and the other way round."""
        names = self.extra.get("arg_names", ())
        kind, key = where
        name = names[key] if kind == "arg" and key < len(names) else key
        if name in kwargs:
            return kwargs[name]
        position = names.index(name) if name in names else (key if kind == "arg" else None)
        if position is not None and position < len(args):
            return args[position]
        if default is ...:
            raise ValueError(f"this call does not pass the model's argument {name!r}: the guide reads the pairs "
                             "(and their links) from the call, as the model does")
        return default

    def pairs(self, args, kwargs):
        """The call's ``(src, dst, y)``: every observed pair (long, long, float64), validated; the same
        tensors again while the call's arguments are the same, unmodified objects (SVI steps pass the
        whole pair list every time)."""
        given = tuple(self._get(where, args, kwargs, None) for where in (self.src_arg, self.dst_arg, self.y_arg))
        key = tuple((id(v), getattr(v, "_version", None)) for v in given)
        cached = self.extra.get("_pairs")
        if cached is not None and cached[0] == key and all(a is b for a, b in zip(cached[1], given, strict=True)):
            return cached[2]
        checked = self._checked_pairs(*given)
        self.extra["_pairs"] = (key, given, checked)
        return checked

    def _checked_pairs(self, src, dst, y):
        src = torch.as_tensor(src).long().reshape(-1)
        dst = torch.as_tensor(dst).long().reshape(-1)
        if y is None:
            raise ValueError(f"memoized inference needs the observed links: pass them as the model's "
                             f"'{self.obs_site}' argument")
        y = torch.as_tensor(y).double().reshape(-1)
        if not src.shape == dst.shape == y.shape:
            raise ValueError(f"src, dst and the links must be 1-D arrays of one length; got {tuple(src.shape)}, "
                             f"{tuple(dst.shape)} and {tuple(y.shape)}")
        if len(src) and (int(torch.minimum(src, dst).min()) < 0 or int(torch.maximum(src, dst).max()) >= self.N):
            raise ValueError(f"node ids must lie in [0, {self.N}) (the node plate's size)")
        if bool((src == dst).any()):
            raise ValueError(f"pair {int(torch.nonzero(src == dst)[0])} links a node to itself; the model has no "
                             "self-pairs")
        if not bool(((y == 0) | (y == 1)).all()):
            raise ValueError("the links must be 0 or 1 (found other values, NaN or inf)")
        return src, dst, y


def _single_plate(site, what):
    return single_plate(site, what, f"relational form: {RELATIONAL_FORM}")


def _trace(model, args, kwargs, data):
    """A probe trace with the sites of ``data`` set (:func:`.structure.probe_trace`: a model that fails there is
    refused naming the sites set and the cause, without Pyro's table of shapes)."""
    return probe_trace(model, args, kwargs, data, f"sites {sorted(data)} set (reading the relational form)")


def _concentration(site):
    return _base(site["fn"]).concentration.expand(site["value"].shape).double()


def _split_betas(model, args, kwargs, betas, membership, K):
    """``(sticks, links)`` among the two Beta sites in plates of size ``K``: the sticks are the one
    whose values the membership Dirichlet's concentration follows (``alpha * beta(u)``)."""
    if len(betas) != 2:
        raise ModelStructureError(f"expected two Beta sites in plates of size K = {K} (the top-level sticks and the "
                                  f"link probabilities); found {[s['name'] for s in betas]}. Supported relational "
                                  f"form: {RELATIONAL_FORM}")
    g = torch.Generator().manual_seed(1)
    for stick, links in (betas, betas[::-1]):
        u = (0.1 + 0.8 * torch.rand(K, generator=g, dtype=torch.float64)).to(stick["value"])
        conc = _concentration(_trace(model, args, kwargs, {stick["name"]: u}).nodes[membership["name"]])
        ratio = conc.reshape(-1, K + 1) / stick_breaking_weights(u.double())
        if bool(torch.allclose(ratio, ratio[:1, :1].expand_as(ratio), rtol=1e-6, atol=0)):
            return stick, links, float(ratio[0, 0])
    raise ModelStructureError(f"membership site '{membership['name']}': its concentration is not alpha * beta with "
                              f"beta the stick-breaking weights of site '{betas[0]['name']}' or '{betas[1]['name']}'. "
                              f"Supported relational form: {RELATIONAL_FORM}")


def _int_vectors(args, kwargs):
    found = [("arg", i, a) for i, a in enumerate(args)] + [("kwarg", k, a) for k, a in kwargs.items()]
    return [(kind, key, v) for kind, key, v in found
            if torch.is_tensor(v) and v.dim() == 1 and not v.is_floating_point() and v.dtype != torch.bool]


def _reads_nodes(v, rows, pi, probs):
    """Whether the node ids ``v`` (at ``rows``) give the role probabilities ``probs`` as rows of ``pi``."""
    return int(v.min()) >= 0 and int(v.max()) < len(pi) and (len(rows) == 0 or int(rows.max()) < len(v)) \
        and bool(torch.allclose(probs, pi[v[rows]], rtol=1e-6, atol=1e-9))


def _find_pair_args(args, kwargs, trace, roles, membership, obs, P, subsample, names=()):
    """``(src_arg, dst_arg, y_arg)``: the arguments whose rows (under the batch) give each role's
    node and the observed links; ``names``: the model's positional parameter names, for errors."""
    pi = trace.nodes[membership]["value"].double()
    rows = torch.arange(P) if subsample is None else subsample
    found = []
    for role in roles:
        probs = _base(trace.nodes[role]["fn"]).probs.double().reshape(len(rows), -1)
        hit = [(kind, key) for kind, key, v in _int_vectors(args, kwargs)
               if len(v) == P and _reads_nodes(v, rows, pi, probs)]
        other = next(((kind, key, v) for kind, key, v in _int_vectors(args, kwargs)
                      if len(v) != P and _reads_nodes(v, rows, pi, probs)), None)
        if not hit and other is not None:  # the node ids of a plate of another size than the pairs they list
            kind, key, v = other
            name = names[key] if kind == "arg" and key < len(names) else key
            plate = next(iter(obs["cond_indep_stack"])).name
            raise plate_size_error(plate, P, name, len(v), ("pair", "pairs"),
                                   f"the node ids its role site '{role}' reads", kind="pair ")
        if not hit:
            raise ModelStructureError(
                f"role site '{role}': its probabilities must be the memberships pi[src] of site '{membership}' with "
                f"src the pairs' node ids, an integer argument of the model with one entry per pair. Supported "
                f"relational form: {RELATIONAL_FORM}")
        found.append(hit)
    src = found[0][0]
    dst = next((h for h in found[1] if h != src), None)
    if dst is None:
        raise ModelStructureError(f"role sites '{roles[0]}' and '{roles[1]}' read the same node ids; the receiver's "
                                  "must be the pair's other node (pi[dst])")
    obs = obs["value"].double().reshape(-1)
    candidates = [("arg", i, a) for i, a in enumerate(args)] + [("kwarg", k, a) for k, a in kwargs.items()]
    for kind, key, v in candidates:
        if torch.is_tensor(v) and v.dim() == 1 and len(v) == P and bool(torch.equal(v[rows].double(), obs)) \
                and (kind, key) not in (src, dst):
            return src, dst, (kind, key)
    raise ModelStructureError("the observed links must be passed to the model as an argument with one entry per pair "
                              "(indexed by the pair plate's subsample under a batch)")


def recognize_relational(model, args, kwargs, trace, plates, obs, roles, global_sites):
    """The :class:`RelationalSpec` of a traced HDP relational model (see the module docstring).

    :raises ModelStructureError: naming the offending site and the supported form.
    """
    T = _base(roles[0]["fn"]).probs.shape[-1]
    K = T - 1
    dirichlets = [s for s in global_sites if isinstance(_base(s["fn"]), dist.Dirichlet)]
    betas = [s for s in global_sites if isinstance(_base(s["fn"]), dist.Beta) and s["fn"].event_shape == ()
             and [f.size for f in s["cond_indep_stack"]] == [K]]
    others = [s["name"] for s in global_sites if not any(s is t for t in dirichlets + betas)]
    if len(dirichlets) != 1 or dirichlets[0]["fn"].event_shape != (T,) or others:
        raise ModelStructureError(
            f"a relational model's global sites are the sticks, the memberships and the link probabilities; found "
            f"Dirichlet sites {[s['name'] for s in dirichlets]} and other sites {others} (latent concentrations are "
            f"learnt by pyro_memo.relational.MemoizedRelational(alpha_prior=..., gamma_prior=...)). Supported "
            f"relational form: {RELATIONAL_FORM}")
    membership = dirichlets[0]
    node_plate = _single_plate(membership, "membership")
    size = node_plate.size if node_plate.full_size is None else node_plate.full_size
    if size != node_plate.size:
        raise ModelStructureError(f"node plate '{node_plate.name}' is subsampled; every pair reads the memberships of "
                                  "its two nodes, so keep the node plate whole and subsample the pair plate instead "
                                  "(pyro.plate('pairs', len(src), subsample=batch), see pyro_memo.batch_pairs)")
    stick, links, alpha = _split_betas(model, args, kwargs, betas, membership, K)
    gamma = float(_constant_over_components(_base(stick["fn"]).concentration0.expand(stick["value"].shape), 0,
                                            stick["name"], "gamma"))
    if not bool(torch.all(_base(stick["fn"]).concentration1 == 1)):
        raise ModelStructureError(f"stick site '{stick['name']}' must be Beta(1, gamma); its first parameter is not 1")
    beta = _base(links["fn"])
    tau = tuple(float(_constant_over_components(c.expand(links["value"].shape), 0, links["name"], "Beta prior"))
                for c in (beta.concentration1, beta.concentration0))
    pair_plate = next(iter(_plates(obs)))
    P, sub_size, subsample = plates.get(pair_plate, (obs["value"].shape[0], None, None))
    if subsample is not None and len(subsample) == P and bool(torch.equal(subsample, torch.arange(P))):
        subsample = None
    src_arg, dst_arg, y_arg = _find_pair_args(args, kwargs, trace, [r["name"] for r in roles], membership["name"],
                                              obs, int(P), subsample, positional_names(model))
    subsample_arg = None
    if subsample is not None:
        subsample_arg = next(((kind, key) for kind, key, v in _int_vectors(args, kwargs)
                              if v.shape == subsample.shape and bool(torch.equal(v.long(), subsample))), None)
        if subsample_arg is None:
            raise ModelStructureError(f"pair plate '{pair_plate}' is subsampled at random; memoized inference needs "
                                      "fixed batches: pass the batch's pair indices to the model and use them as "
                                      f"pyro.plate('{pair_plate}', len(src), subsample=batch)")
    spec = RelationalSpec(
        N=int(size), K=K, alpha=alpha, gamma=gamma, tau=tau, eps=0.5,
        stick_site=stick["name"], stick_plate=_single_plate(stick, "stick").name,
        membership_site=membership["name"], node_plate=node_plate.name,
        link_site=links["name"], link_plate=_single_plate(links, "link-probability").name,
        source_site=roles[0]["name"], receiver_site=roles[1]["name"], obs_site=obs["name"], pair_plate=pair_plate,
        src_arg=src_arg, dst_arg=dst_arg, y_arg=y_arg, subsample_arg=subsample_arg)
    spec.extra.update(model_dtype=membership["value"].dtype, model_device=membership["value"].device,
                      arg_names=positional_names(model))
    spec.extra["num_batch_pairs"] = obs["value"].numel()
    spec.eps = _read_eps(model, args, kwargs, spec)
    try:
        check_hyperparameters(spec.alpha, spec.gamma, spec.tau, spec.eps)
    except ValueError as err:
        raise ModelStructureError(f"relational model: {err}") from err
    verify_relational_wiring(model, args, kwargs, spec)
    return spec


def _roles_data(spec, s, r, w, u=None):
    data = {spec.source_site: s, spec.receiver_site: r, spec.link_site: w}
    if u is not None:
        data[spec.stick_site] = u
    return data


def _link_probs(model, args, kwargs, spec, data):
    obs = _trace(model, args, kwargs, data).nodes[spec.obs_site]
    return torch.exp(obs["fn"].log_prob(torch.ones_like(obs["value"]))).double().reshape(-1)


def _read_eps(model, args, kwargs, spec):
    """``eps``: the link probability of a pair whose roles differ (source in community 0, receiver in
    the tail)."""
    like = {"dtype": spec.extra["model_dtype"], "device": spec.extra["model_device"]}
    n = spec.extra["num_batch_pairs"]
    s = torch.zeros(n, dtype=torch.long, device=like["device"])
    w = torch.full((spec.K,), 0.5, **like)
    p = _link_probs(model, args, kwargs, spec, _roles_data(spec, s, s + spec.K, w))
    if not bool(torch.allclose(p, p[:1].expand_as(p), rtol=1e-9, atol=0)):
        raise ModelStructureError(f"observed site '{spec.obs_site}': pairs whose roles differ must all link with one "
                                  f"constant probability eps. Supported relational form: {RELATIONAL_FORM}")
    return float(p[0])


def verify_relational_wiring(model, args, kwargs, spec):
    """Check, at random stick, link-probability and role values, that the memberships' prior is
    ``Dirichlet(alpha * beta(u))`` and the link's probability is ``w[s]`` where ``s == r < K``, else
    ``eps``.

    :raises ModelStructureError: naming the site whose numbers disagree.
    """
    g = torch.Generator().manual_seed(0)
    like = {"dtype": spec.extra["model_dtype"], "device": spec.extra["model_device"]}
    K = spec.K
    n = spec.extra["num_batch_pairs"]
    u = (0.05 + 0.9 * torch.rand(K, generator=g, dtype=torch.float64)).to(**like)
    w = (0.1 + 0.8 * torch.rand(K, generator=g, dtype=torch.float64)).to(**like)
    s = torch.randint(K + 1, (n,), generator=g)
    r = torch.where(torch.rand(n, generator=g) < 0.5, s, torch.randint(K + 1, (n,), generator=g))
    s, r = s.to(like["device"]), r.to(like["device"])
    data = _roles_data(spec, s, r, w, u)
    trace = _trace(model, args, kwargs, data)
    conc = _concentration(trace.nodes[spec.membership_site]).reshape(-1, K + 1)
    expected = spec.alpha * stick_breaking_weights(u.double())
    if not bool(torch.allclose(conc, expected.expand_as(conc), rtol=1e-6, atol=0)):
        raise ModelStructureError(f"membership site '{spec.membership_site}': its concentration is not alpha * beta "
                                  f"(alpha = {spec.alpha:.6g}). Supported relational form: {RELATIONAL_FORM}")
    p = _link_probs(model, args, kwargs, spec, data)
    same = (s == r) & (s < K)
    want = torch.where(same, w.double()[s.clamp(max=K - 1)], torch.full_like(p, spec.eps))
    if not bool(torch.allclose(p, want, rtol=1e-6, atol=0)):
        raise ModelStructureError(f"observed site '{spec.obs_site}': its link probability is not w[s] (site "
                                  f"'{spec.link_site}') where the roles '{spec.source_site}' and "
                                  f"'{spec.receiver_site}' agree on an explicit community, else eps = {spec.eps:.6g}. "
                                  f"Supported relational form: {RELATIONAL_FORM}")
