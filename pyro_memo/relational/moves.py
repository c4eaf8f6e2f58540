"""Community births, deletes and merges for the assortative HDP relational model, each accepted only
when the exact bound of the whole graph rises (the engine's candidate memo,
:class:`~pyro_memo.engine.candidate_memo.CandidateMemoMove`; Hughes, Kim & Sudderth 2015 §5 for the HDP's moves).

Each move changes the globals into a candidate (:func:`surgery`: the memberships' columns, the link
probabilities' factors and the sticks' weights, and the same change of the batches' non-linked
factors as their start), runs every batch's local step under it through one lap and keeps it only
if the candidate memo's optimal globals have a higher exact bound than the fit.

* **birth**: the largest community not tried since the last accepted birth is split into the
  groups of the subgraph of its members (nodes whose largest expected membership it is) by spectral
  clustering (Ng, Jordan & Weiss 2002), their number chosen by the eigengap (von Luxburg 2007); where
  that subgraph is too sparse (fewer links than members), its members without any link (nodes of
  degree 0) form a group of their own beside the others' groups. From
  ``K = 1``, a split that falls short gives way to the same groups with the one community kept for
  the links between them (``_kept_split_columns()``).
* **delete**: the smallest community holding at most ``max_share`` of the roles is removed, its
  members' mass spread over their other communities in proportion.
* **merge**: the smallest community is merged into the one its members link to most.
"""

import torch

from ..allocation.hdp_sticks import expected_beta, rho_from_weights
from ..checks import as_count, as_positive_int, as_seed, as_share
from ..data.graphs import Graph
from ..engine.candidate_memo import CandidateMemoMove, candidate_total, smallest_untried
from ..engine.moves import optimal_elbo
from .initialization import spectral_split

#: the least membership Dirichlet parameter a candidate starts with (a start only: the candidate's
#: own global step refits the memberships from its roles)
_FLOOR = 1e-2

__all__ = ["RELATIONAL_MOVES", "CommunityBirthMove", "CommunityDeleteMove", "CommunityMergeMove", "surgery"]


def surgery(post, columns, node_columns=None):
    """The posterior whose community ``j`` is ``sum_k columns[k, j] x`` community ``k`` of ``post``
    (``columns`` ``(K, K')``, non-negative): sticks' weights map linearly (the tail stays last),
    link probabilities' factors take the weighted mean of the sources', memberships map by
    ``node_columns`` ``(N, K, K')`` when given (a per-node change), else by ``columns``. Apply the
    same map to the batches' factors with ``map_factors()``."""
    K = post.K
    mapped = post.theta[:, :K] @ columns if node_columns is None else \
        torch.einsum("nk,nkj->nj", post.theta[:, :K], node_columns)
    theta = torch.cat([mapped.clamp_min(_FLOOR), post.theta[:, K:]], 1)  # no zero Dirichlet parameter
    weights = expected_beta(post.rho)
    new_weights = torch.cat([weights[:K] @ columns, weights[K:]])
    share = columns / columns.sum(0, keepdim=True).clamp_min(1e-300)
    w_a, w_b = post.w_a @ share, post.w_b @ share
    omega = torch.full((columns.shape[1],), float(post.omega.mean()), dtype=post.rho.dtype, device=post.rho.device)
    rho = rho_from_weights(new_weights)
    return post.with_globals(theta, rho, omega, w_a, w_b)


def _stacked(factors):
    """A local step's non-linked factors ``(m, m_bar)`` as one ``(2, N, K)`` tensor (``None``: none)."""
    return None if factors is None else torch.stack(factors)


def map_factors(warm, columns):
    """The batch's non-linked factors ``(2, N, K)`` mapped by ``columns`` ``(K, K')`` (or per-node
    ``(N, K, K')``), rows renormalised; ``None`` stays ``None``."""
    if warm is None:
        return None
    out = warm @ columns if columns.dim() == 2 else torch.einsum("snk,nkj->snj", warm, columns)
    return out / out.sum(-1, keepdim=True).clamp_min(1e-300)


class _CommunityMove(CandidateMemoMove):
    """A candidate community change run through one lap: subclasses set ``target`` and
    ``columns`` (and optionally per-node ``node_columns``) in :meth:`plan`. Before the comparison
    the candidate is refined by up to ``refine`` rounds of its own global and local steps over every
    batch (each exact, so they only raise its bound), stopping as soon as its bound passes the
    fit's: memberships move slowly under exact coordinate ascent (each node's roles in its ``N - 1``
    pairs are mostly non-linked pairs that follow its current membership, so a lap moves a
    membership by about ``degree / N`` of the way), and a split or a merge needs many rounds to
    settle, which one lap beside the fit does not give it. A candidate still short after them may
    give way to a second one of the same target (:meth:`replan`), run through the lap's batches
    under the end-of-lap globals and refined alike; the better bound of the two is never sought:
    the one compared is the last.

    :param int refine: most candidate rounds after the lap.
    """

    def __init__(self, refine=30):
        super().__init__()
        self.planned, self.columns, self.node_columns = True, None, None
        self.refine = as_count(refine, "refine")
        self.batch_data = {}

    def start_lap(self, state, driver):
        self.target, self.candidate, self.batches, self.driver = None, None, {}, driver
        self.columns = self.node_columns = None
        total = state.cache.total
        if total is None or len(state.cache) == 0:
            return
        self.num_components = total.K
        self.planned = False

    def plan(self, state, batch):
        """Choose ``target`` and ``columns`` from the memo, the globals and the batch (its links)."""
        raise NotImplementedError

    def visit_batch(self, state, key, batch, local, summary):
        post = state.posterior
        if self.num_components is None or post.K != self.num_components:
            return summary
        if not self.planned:
            self.planned = True
            self.plan(state, batch)
        if self.target is None:
            return summary
        # under the current globals changed alike, so the candidate keeps pace with the fit
        self.candidate = surgery(post, self.columns, self.node_columns)
        self._candidate_step(state, key, batch)
        return summary

    def _candidate_step(self, state, key, batch):
        """Batch ``key``'s local step under the candidate, from the fit's factors mapped alike."""
        warm = map_factors(state.warm_starts.get(key), self.node_columns if self.node_columns is not None
                           else self.columns)
        start = None if warm is None else tuple(warm)
        factors, summary = self.candidate.local_step(batch.edges, batch.sources, start, self.driver.nonlink_iters,
                                                     batch.missing)
        self.batches[key] = (_stacked(factors), summary)
        self.batch_data[key] = batch

    def end_lap(self, state, driver):
        if self.target is not None and set(self.batches) == set(state.cache.batches):
            current = float(state.posterior.elbo(state.cache.total))
            if not self._refined(current) and self.replan(state):
                self.candidate = surgery(state.posterior, self.columns, self.node_columns)
                for key, batch in list(self.batch_data.items()):
                    self._candidate_step(state, key, batch)
                self._refined(current)
        super().end_lap(state, driver)
        self.planned, self.batch_data = True, {}

    def replan(self, state):
        """After the candidate fell short: set other ``columns`` for a second candidate of the same
        target and return ``True``, or ``False`` (none; the default)."""
        return False

    def _refined(self, current):
        """Refine the candidate by up to ``refine`` rounds; whether its bound passed ``current``."""
        total = candidate_total(self.batches)
        for _ in range(self.refine):
            self.candidate = self.candidate.optimal_for(total)
            for key, (warm, _) in self.batches.items():
                batch = self.batch_data[key]
                factors, summary = self.candidate.local_step(batch.edges, batch.sources,
                                                             None if warm is None else tuple(warm),
                                                             self.driver.nonlink_iters, batch.missing)
                self.batches[key] = (_stacked(factors), summary)
            total = candidate_total(self.batches)
            if float(self.candidate.elbo(total)) > current:
                return True  # already better: the comparison in end_lap accepts it
        return self.refine == 0 and optimal_elbo(self.candidate, total)[0] > current


def _dominant(post):
    return post.memberships().argmax(1)


class CommunityBirthMove(_CommunityMove):
    """Split the largest untried community into the groups of its members' subgraph, found by
    spectral clustering with their number chosen by the eigengap (at most ``parts``;
    ``pyro_memo.relational.initialization.spectral_split()``).

    Several new communities at once, as the HDP's births propose several topics (Hughes, Kim &
    Sudderth 2015 §5): in an assortative graph a two-way cut of a community made of many groups
    can lower the bound (each cut link falls to the background probability) while the split into
    its groups raises it, so one community at a time would stop short. A community whose subgraph
    shows one group is not split (and is not retried until a birth is accepted).

    The first birth (from ``K = 1``) that falls short is followed in the same lap by the split that
    keeps the one community for the links between the groups (:meth:`replan`): a plain split charges
    each of them the background probability, so where groups are joined by many links (a planted
    partition whose links between blocks are 50 times ``eps``) it starts thousands of nats below one
    community and is rejected, although groups plus a shared community are far better.

    :param int parts: most communities a split makes.
    :param int min_nodes: a community needs at least ``2 * min_nodes`` members to be split.
    :param int seed: seeds the clustering.
    """

    name = "birth"

    def __init__(self, parts=16, min_nodes=6, seed=0):
        super().__init__()
        self.parts, self.min_nodes = as_positive_int(parts, "parts"), as_positive_int(min_nodes, "min_nodes")
        if self.parts < 2:
            raise ValueError(f"a birth needs parts >= 2 (it splits a community in two or more); got {parts}")
        self.seed = as_seed(seed)
        self.split = None  # (target, members, parts, links) of the planned split, for replan

    def plan(self, state, batch):
        post = state.posterior
        tried = state.tried_components(self.name, post.K)
        dominant = _dominant(post)
        self.split = None
        for k in torch.argsort(state.cache.total.sizes, descending=True).tolist():
            if k in tried:
                continue
            members = torch.nonzero(dominant == k).squeeze(-1).cpu()
            parts = min(self.parts, len(members) // self.min_nodes)
            labels = _split(members, batch.edges, parts, self.seed) if parts >= 2 else None
            if labels is None:
                tried.append(k)
                continue
            self.split = (k, members, labels, batch.edges.cpu()) if post.K == 1 else None  # see replan
            self.target, self.columns, self.node_columns = k, *_split_columns(post, k, members, labels)
            return

    def replan(self, state):
        """The first birth's second candidate, once the plain split has fallen short: the same parts
        as new communities, with the one community kept for the links between them
        (``_kept_split_columns()``). Only from ``K = 1``, where the one community holds every link,
        so the links between the groups to be found are its own; from ``K > 1`` such candidates were
        measured mostly rejected (a 10-block planted partition) or accepted for a few nats and then
        undone by deletes, each round trip a lap (Les Miserables: up to 5 times the fit's time)."""
        if self.split is None:
            return False
        self.columns, self.node_columns = _kept_split_columns(state.posterior, *self.split)
        self.split = None
        return True


def _split_columns(post, k, members, labels):
    """``(columns, node_columns)`` sending part ``p > 0`` of community ``k``'s members to new community
    ``K + p - 1`` (part 0 stays in ``k``)."""
    K, extra = post.K, int(labels.max())
    device = post.theta.device
    eye = torch.eye(K, K + extra, dtype=post.dtype, device=device)
    node_columns = eye.expand(post.N, K, K + extra).clone()
    moved = labels > 0
    rows = members[moved].to(device)
    node_columns[rows, k, k] = 0.0
    node_columns[rows, k, K + labels[moved].to(device) - 1] = 1.0
    share = torch.bincount(labels, minlength=extra + 1).to(post.dtype) / len(labels)
    columns = eye.clone()
    columns[k, k] = share[0]
    columns[k, K:] = share[1:].to(device)
    return columns, node_columns


def _kept_split_columns(post, k, members, labels, edges):
    """``(columns, node_columns)`` sending part ``p`` of community ``k``'s members to new community
    ``K + p``, each member keeping in ``k`` its share of crossing links (:func:`_crossing_shares`).

    A plain split charges every link between its parts the background probability: where those
    links are many (a dense background between groups, as in a planted partition), each costs
    ``log w_k - log eps`` nats more than in ``k``, and the split falls short of one community although
    the groups plus ``k`` kept for the links between them is far better (the mixed memberships of the
    assortative MMSB; Gopalan et al. 2012, Kim et al. 2013)."""
    K, extra = post.K, int(labels.max()) + 1
    device = post.theta.device
    keep = _crossing_shares(members, labels, edges).to(device=device, dtype=post.dtype)
    parts = labels.to(device)
    eye = torch.eye(K, K + extra, dtype=post.dtype, device=device)
    node_columns = eye.expand(post.N, K, K + extra).clone()
    rows = members.to(device)
    node_columns[rows, k, k] = keep
    node_columns[rows, k, K + parts] = 1.0 - keep
    columns = eye.clone()
    columns[k, k] = keep.mean()
    columns[k, K:] = torch.zeros(extra, dtype=post.dtype, device=device).index_add_(0, parts, 1.0 - keep) / len(parts)
    return columns, node_columns


def _crossing_shares(members, labels, edges):
    """``(n,)`` each member's share of its links to other members that join two different parts."""
    n = len(members)
    index = torch.full((max(int(edges.max()), int(members.max())) + 1,), -1, dtype=torch.long)
    index[members] = torch.arange(n)
    i, j = index[edges[:, 0]], index[edges[:, 1]]
    inside = (i >= 0) & (j >= 0)
    i, j = i[inside], j[inside]
    cross = (labels[i] != labels[j]).to(torch.float64)
    links = torch.bincount(i, minlength=n) + torch.bincount(j, minlength=n)
    crossing = torch.bincount(i, cross, minlength=n) + torch.bincount(j, cross, minlength=n)
    return crossing / links.clamp_min(1)


def _split(members, edges, parts, seed):
    """``(n,)`` part of each member (``0 .. J - 1``, ``2 <= J <= parts``) from the spectral clustering of the
    members' subgraph (``pyro_memo.relational.initialization.spectral_split()``); ``None`` when the subgraph
    has fewer links than members or shows one group, unless some members have no link at all (nodes of
    degree 0). Then the members with links are split alike (:func:`_linked_groups`; not at all where they
    show one group) and those without as one part of their own, the last.

    Nodes of degree 0 carry no sign of a group; counted among the members they made a community holding
    many of them unsplittable (three cliques beside 200 such nodes stayed one community of link probability
    0.005)."""
    n = len(members)
    e = edges.cpu()
    if e.numel() == 0:
        return None
    size = max(int(e.max()), int(members.max())) + 1
    index = torch.full((size,), -1, dtype=torch.long)
    index[members] = torch.arange(n)
    i, j = index[e[:, 0]], index[e[:, 1]]
    inside = (i >= 0) & (j >= 0)
    i, j = i[inside], j[inside]
    every = torch.ones(n, dtype=torch.bool)
    labels = _linked_groups(every, i, j, parts, seed)
    if labels is not None:
        return labels
    linked = torch.zeros(size, dtype=torch.bool)
    linked[e.reshape(-1)] = True
    linked = linked[members]
    lone = int(n - linked.sum())
    if not lone or lone == n:
        return None
    groups = _linked_groups(linked, i, j, parts - 1, seed)
    labels = torch.full((n,), 1 if groups is None else int(groups.max()) + 1, dtype=torch.long)
    labels[linked] = 0 if groups is None else groups
    return labels


def _linked_groups(linked, i, j, parts, seed):
    """``(m,)`` group ``0 .. J - 1`` (``J >= 2``) of each of the ``m`` members marked ``linked``, from the
    spectral clustering of their subgraph (links ``(i, j)`` between member positions, all of them linked
    members) into at most ``parts`` groups; ``None`` when ``parts < 2``, the subgraph has fewer links than
    the ``m`` members or shows one group."""
    m = int(linked.sum())
    if parts < 2 or len(i) < m or m == 0:
        return None
    position = torch.cumsum(linked.long(), 0) - 1  # a linked member's row among the linked ones
    groups = spectral_split(Graph(torch.stack([position[i], position[j]], 1).numpy(), m), parts, seed)
    if groups is None:
        return None
    _, groups = torch.unique(torch.as_tensor(groups), return_inverse=True)
    return groups if int(groups.max()) >= 1 else None


class CommunityDeleteMove(_CommunityMove):
    """Remove the smallest untried community holding at most ``max_share`` of the roles."""

    name = "delete"

    def __init__(self, max_share=0.2):
        super().__init__()
        self.max_share = as_share(max_share, "max_share")

    def plan(self, state, batch):
        post = state.posterior
        if post.K < 2:
            return
        self.target = smallest_untried(state, self.name, state.cache.total.sizes, self.max_share)
        if self.target is None:
            return
        keep = [i for i in range(post.K) if i != self.target]
        columns = torch.eye(post.K, dtype=post.dtype, device=post.theta.device)[:, keep]
        rest = post.theta[:, keep]
        spread = rest / rest.sum(1, keepdim=True)  # each node's mass of k over its other communities
        node_columns = columns.expand(post.N, post.K, len(keep)).clone()
        node_columns[:, self.target, :] = spread
        columns = columns.clone()
        columns[self.target] = spread.mean(0)
        self.columns, self.node_columns = columns, node_columns


class CommunityMergeMove(_CommunityMove):
    """Merge the smallest untried community into the one its members link to most."""

    name = "merge"

    def plan(self, state, batch):
        post = state.posterior
        if post.K < 2:
            return
        tried = state.tried_components(self.name, post.K)
        dominant = _dominant(post)
        src, dst = dominant[batch.edges[:, 0]], dominant[batch.edges[:, 1]]
        links = torch.zeros(post.K, post.K, dtype=post.dtype, device=post.theta.device)
        links.index_put_((src, dst), torch.ones_like(src, dtype=post.dtype), accumulate=True)
        links = links + links.T
        links.fill_diagonal_(-1.0)
        for a in torch.argsort(state.cache.total.sizes).tolist():
            if a in tried:
                continue
            b = int(torch.argmax(links[a]))
            self.target = a
            keep = [i for i in range(post.K) if i != a]
            columns = torch.eye(post.K, dtype=post.dtype, device=post.theta.device)
            columns[a, b] = 1.0
            self.columns = columns[:, keep]
            return


#: relational moves by name, in the order their lap-end evaluations run
RELATIONAL_MOVES = {"birth": CommunityBirthMove, "delete": CommunityDeleteMove, "merge": CommunityMergeMove}
