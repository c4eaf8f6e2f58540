"""Community births, deletes and merges for the assortative HDP relational model, each accepted only
when the exact bound of the whole graph rises (the engine's candidate memo,
:mod:`pyro_memo.engine.candidate_memo`; Hughes, Kim & Sudderth 2015 §5 for the HDP's moves).

Each move changes the globals into a candidate (:func:`surgery`: the memberships' columns, the link
probabilities' factors and the sticks' weights, and the same change of the batches' non-linked
factors as their start), runs every batch's local step under it through one lap and keeps it only
if the candidate memo's optimal globals have a higher exact bound than the fit.

* **birth**: the largest community not tried since the last accepted birth is split in two along
  the sign of the second eigenvector of the normalised adjacency of the subgraph of its members
  (nodes whose largest expected membership it is; Shi & Malik 2000).
* **delete**: the smallest community holding at most ``max_share`` of the roles is removed, its
  members' mass spread over their other communities in proportion.
* **merge**: the smallest community is merged into the one its members link to most.
"""

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as sla
import torch

from ..allocation.hdp_sticks import expected_beta, rho_from_weights
from ..engine.candidate_memo import CandidateMemoMove, candidate_total, smallest_untried
from ..posterior.relational import RelationalPosterior

#: the least membership Dirichlet parameter a candidate starts with (a start only: the candidate's
#: own global step refits the memberships from its roles)
_FLOOR = 1e-2

__all__ = ["RELATIONAL_MOVES", "CommunityBirthMove", "CommunityDeleteMove", "CommunityMergeMove", "surgery"]


def surgery(post, columns, node_columns=None):
    """The posterior whose community ``j`` is ``sum_k columns[k, j] x`` community ``k`` of ``post``
    (``columns`` ``(K, K')``, non-negative): sticks' weights map linearly (the tail stays last),
    link probabilities' factors take the weighted mean of the sources', memberships map by
    ``node_columns`` ``(N, K, K')`` when given (a per-node change), else by ``columns``. Apply the
    same map to the batches' factors with :func:`map_factors`."""
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
    return RelationalPosterior(theta, rho, omega, w_a, w_b, post.alpha, post.gamma, post.tau, post.eps)


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
    the candidate is refined by ``refine`` rounds of its own global and local steps over every
    batch (each exact, so they only raise its bound): a split or a merge needs a few rounds to
    settle, which one lap beside the fit does not give it.

    :param int refine: candidate rounds after the lap.
    """

    def __init__(self, refine=25):
        super().__init__()
        self.planned, self.columns, self.node_columns = True, None, None
        self.refine = int(refine)
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
        warm = state.warm_starts.get(key)
        warm = map_factors(warm, self.node_columns if self.node_columns is not None else self.columns)
        start = None if warm is None else tuple(warm)
        factors, candidate = self.candidate.local_step(batch.edges, batch.sources, start, self.driver.nonlink_iters,
                                                       batch.missing)
        self.batches[key] = (torch.stack(factors), candidate)
        self.batch_data[key] = batch
        return summary

    def end_lap(self, state, driver):
        if self.target is not None and set(self.batches) == set(state.cache.batches):
            for _ in range(self.refine):
                self.candidate = self.candidate.optimal_for(candidate_total(self.batches))
                for key, (warm, _) in self.batches.items():
                    batch = self.batch_data[key]
                    factors, summary = self.candidate.local_step(batch.edges, batch.sources, tuple(warm),
                                                                 driver.nonlink_iters, batch.missing)
                    self.batches[key] = (torch.stack(factors), summary)
        super().end_lap(state, driver)
        self.planned, self.batch_data = True, {}


def _dominant(post):
    return post.memberships().argmax(1)


class CommunityBirthMove(_CommunityMove):
    """Split the largest untried community in two by a spectral bisection of its members' subgraph.

    :param int min_nodes: a community needs at least this many members to be split.
    """

    name = "birth"

    def __init__(self, min_nodes=6):
        super().__init__()
        self.min_nodes = int(min_nodes)

    def plan(self, state, batch):
        post = state.posterior
        tried = state.tried_components(self.name, post.K)
        sizes = state.cache.total.sizes
        dominant = _dominant(post)
        for k in torch.argsort(sizes, descending=True).tolist():
            if k in tried:
                continue
            members = torch.nonzero(dominant == k).squeeze(-1)
            side = self._bisect(members, batch.edges, post.N) if len(members) >= self.min_nodes else None
            if side is None:
                tried.append(k)
                continue
            self.target = k
            K = post.K
            node_columns = torch.eye(K, K + 1, dtype=post.dtype, device=post.theta.device).expand(post.N, K, K + 1)
            node_columns = node_columns.clone()
            node_columns[members[side], k, k] = 0.0
            node_columns[members[side], k, K] = 1.0
            self.node_columns = node_columns
            split = float(side.float().mean())
            columns = torch.eye(K, K + 1, dtype=post.dtype, device=post.theta.device)
            columns[k, k], columns[k, K] = 1.0 - split, split
            self.columns = columns
            return

    @staticmethod
    def _bisect(members, edges, N):
        """Bool mask over ``members``: one side of the second eigenvector of their subgraph's
        normalised adjacency (``None`` if it cannot be split: too few links or one side empty)."""
        index = torch.full((N,), -1, dtype=torch.long)
        index[members] = torch.arange(len(members))
        i, j = index[edges[:, 0].cpu()], index[edges[:, 1].cpu()]
        inside = (i >= 0) & (j >= 0)
        n = len(members)
        if int(inside.sum()) < n:
            return None
        i, j = i[inside].numpy(), j[inside].numpy()
        a = sp.csr_matrix((np.ones(2 * len(i)), (np.concatenate([i, j]), np.concatenate([j, i]))), shape=(n, n))
        d = np.asarray(a.sum(1)).ravel() + 1.0
        scale = sp.diags(1.0 / np.sqrt(d))
        matrix = scale @ (a + sp.eye(n)) @ scale
        _, vectors = sla.eigsh(matrix, k=2, which="LA", v0=np.ones(n))
        side = torch.as_tensor(vectors[:, 0] > np.median(vectors[:, 0]))
        return side if 0 < int(side.sum()) < n else None


class CommunityDeleteMove(_CommunityMove):
    """Remove the smallest untried community holding at most ``max_share`` of the roles."""

    name = "delete"

    def __init__(self, max_share=0.2):
        super().__init__()
        self.max_share = float(max_share)

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
