"""Initial memberships of a relational fit from the graph's spectral embedding.

Memoized coordinate ascent moves node memberships slowly (each node's roles in its ``N - 1`` pairs
are mostly non-linked pairs that follow its current membership), so the start matters, as k-means
starts matter for mixtures. :func:`spectral_memberships` embeds the nodes by the top ``K``
eigenvectors of the normalised adjacency :math:`D^{-1/2} A D^{-1/2}` (rows scaled to unit length; Ng,
Jordan & Weiss 2002) and clusters the embedding by k-means++ seeding.
"""

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as sla
import torch

from ..inference.initialization import initial_responsibilities

__all__ = ["initial_memberships", "spectral_memberships"]


def spectral_memberships(graph, K, seed=0, dtype=torch.float64, device=None):
    """``(N, K)`` hard memberships (one-hot rows) from the graph's spectral embedding; a graph
    with fewer than ``K + 2`` nodes, or no links, gets seeded random ones."""
    N = graph.num_nodes
    rng = np.random.default_rng(seed)
    if graph.num_edges == 0 or N < K + 2:
        labels = rng.integers(0, K, N)
    else:
        adjacency = graph.adjacency().astype(np.float64)
        degree = np.asarray(adjacency.sum(1)).ravel()
        scale = sp.diags(1.0 / np.sqrt(np.maximum(degree, 1.0)))
        start = rng.standard_normal(N)
        _, vectors = sla.eigsh(scale @ adjacency @ scale, k=K, which="LA", v0=start)
        x = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        labels = initial_responsibilities(torch.as_tensor(x), K, "kmeans++", seed).argmax(1).numpy()
    return torch.nn.functional.one_hot(torch.as_tensor(labels, device=device), K).to(dtype)


def initial_memberships(graph, K, init="spectral", seed=0, dtype=torch.float64, device=None):
    """``(N, K)`` initial memberships of a relational fit: :func:`spectral_memberships` (``init="spectral"``)
    or one flat Dirichlet draw per node (``"random"``), seeded by ``seed``."""
    if init == "spectral":
        return spectral_memberships(graph, K, seed, dtype, device)
    if init != "random":
        raise ValueError(f"init must be 'spectral' or 'random'; got {init!r}")
    rng = np.random.default_rng(seed)
    return torch.as_tensor(rng.dirichlet(np.ones(K), size=graph.num_nodes), dtype=dtype, device=device)
