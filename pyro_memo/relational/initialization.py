"""Initial memberships of a relational fit from the graph's spectral embedding.

Memoized coordinate ascent moves node memberships slowly (each node's roles in its ``N - 1`` pairs
are mostly non-linked pairs that follow its current membership), so the start matters, as k-means
starts matter for mixtures. :func:`spectral_memberships` embeds the nodes by the top ``K``
eigenvectors of the normalised adjacency :math:`D^{-1/2} A D^{-1/2}` (rows scaled to unit length; Ng,
Jordan & Weiss 2002) and clusters the embedding by k-means++ seeding.
"""

import numpy as np
import scipy.linalg
import scipy.sparse as sp
import scipy.sparse.linalg as sla
import torch
from threadpoolctl import threadpool_limits

from ..inference.initialization import initial_responsibilities

__all__ = ["initial_memberships", "spectral_memberships", "spectral_split"]


def _normalised_adjacency(graph):
    adjacency = graph.adjacency().astype(np.float64)
    degree = np.asarray(adjacency.sum(1)).ravel()
    scale = sp.diags(1.0 / np.sqrt(np.maximum(degree, 1.0)))
    return scale @ adjacency @ scale


#: graphs of at most this many nodes are embedded by a dense eigensolver (deterministic; 0.03 s at 500 nodes,
#: 0.35 s at 1,500 and 3.5 s at 3,000 on one core, where ARPACK takes 0.01 to 0.03 s), larger ones by ARPACK
DENSE_NODES = 1000


def _top_eigenpairs(graph, k, rng):
    """The ``k`` largest eigenvalues and their eigenvectors of the normalised adjacency, with SciPy's BLAS
    held to one thread (its threads would spin against torch's on a busy machine, and the fit's thread
    policy does not size them): by LAPACK's dense solver up to :data:`DENSE_NODES` nodes, by ARPACK
    (started from ``rng``) above. ARPACK is not reproducible where the cut-off falls inside a repeated
    eigenvalue (isolated nodes, more components than ``k``): its vectors then differed from call to call
    within one process, and so did a seeded fit; above :data:`DENSE_NODES` that remains possible.

    LAPACK's index-subset solver (``?syevr``) can return fewer than the ``k`` pairs asked for where the
    cut-off falls inside a large cluster of equal eigenvalues (two disjoint 8-cliques at ``k = 3`` gave
    one); the whole spectrum is then solved (same dense solver, still deterministic) and its top ``k``
    pairs kept, so exactly ``k`` always come back."""
    adjacency = _normalised_adjacency(graph)
    with threadpool_limits(limits=1, user_api="blas"):
        if graph.num_nodes <= DENSE_NODES:
            n = graph.num_nodes
            dense = adjacency.toarray()
            values, vectors = scipy.linalg.eigh(dense, subset_by_index=[n - k, n - 1])
            if values.shape[0] != k:
                values, vectors = scipy.linalg.eigh(dense)
                values, vectors = values[n - k:], vectors[:, n - k:]
            return values, vectors
        return sla.eigsh(adjacency, k=k, which="LA", v0=rng.standard_normal(graph.num_nodes))


def _embedding(graph, k, rng):
    """The top ``k`` eigenvalues of the normalised adjacency and the nodes' rows of their eigenvectors
    (:func:`_top_eigenpairs`), the rows of nodes without links set to zero: any vector on those nodes is
    an eigenvector of eigenvalue 0, so where ``k`` reaches into that eigenvalue the solver's choice gave one
    or a few of them a row of their own, and k-means++ a cluster (two cliques beside 50 such nodes at
    ``k = 3``: one clique started with the 50 nodes in 4 of 50 seeds). At zero they all sit together."""
    values, vectors = _top_eigenpairs(graph, k, rng)
    vectors = np.array(vectors)
    vectors[graph.degrees() == 0] = 0.0
    return values, vectors


def _cluster_rows(vectors, K, seed):
    x = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    return initial_responsibilities(torch.as_tensor(x), K, "kmeans++", seed).argmax(1).numpy()


def spectral_memberships(graph, K, seed=0, dtype=torch.float64, device=None):
    """``(N, K)`` hard memberships (one-hot rows) from the graph's spectral embedding; a graph
    with fewer than ``K + 2`` nodes, or no links, gets seeded random ones."""
    N = graph.num_nodes
    rng = np.random.default_rng(seed)
    if graph.num_edges == 0 or N < K + 2:
        labels = rng.integers(0, K, N)
    else:
        _, vectors = _embedding(graph, K, rng)
        labels = _cluster_rows(vectors, K, seed)
    return torch.nn.functional.one_hot(torch.as_tensor(labels, device=device), K).to(dtype)


def spectral_split(graph, max_parts, seed=0):
    """``(N,)`` parts of a graph's nodes by spectral clustering into ``J >= 2`` groups, ``J`` chosen by
    the largest gap after the second of the top ``max_parts + 1`` eigenvalues of the normalised
    adjacency (the eigengap heuristic; von Luxburg 2007, §8.3: ``J`` well-separated groups give ``J``
    eigenvalues near 1; the first gap is left out, since a split is wanted); ``None`` when the graph
    has no links or too few nodes."""
    N = graph.num_nodes
    k = min(int(max_parts) + 1, N - 2)
    if graph.num_edges == 0 or k < 2:
        return None
    rng = np.random.default_rng(seed)
    values, vectors = _embedding(graph, k, rng)
    order = np.argsort(values)[::-1]
    values, vectors = values[order], vectors[:, order]
    parts = int(np.argmax(values[1:-1] - values[2:])) + 2 if k >= 3 else 2
    return _cluster_rows(vectors[:, :parts], parts, seed)


def initial_memberships(graph, K, init="spectral", seed=0, dtype=torch.float64, device=None):
    """``(N, K)`` initial memberships of a relational fit: :func:`spectral_memberships` (``init="spectral"``)
    or one flat Dirichlet draw per node (``"random"``), seeded by ``seed``."""
    if init == "spectral":
        return spectral_memberships(graph, K, seed, dtype, device)
    if init != "random":
        raise ValueError(f"init must be 'spectral' or 'random'; got {init!r}")
    rng = np.random.default_rng(seed)
    return torch.as_tensor(rng.dirichlet(np.ones(K), size=graph.num_nodes), dtype=dtype, device=device)
