"""Initial topics for the HDP topic model.

Variational inference for topic models keeps much of the structure it starts from: topics
seeded by single random documents stay document-like and the fit settles in a poor local
optimum (on Wikipedia, K = 100: bound -8.34 and held-out -8.11 nats/token after 30 minutes,
against -8.06 and -7.92 after one lap from the clustering below;
``benchmarks/results/bench_hdp_init.txt``). bnpy's answer, which we follow, is to seed
the topics with a Bregman k-means of the documents (Banerjee et al., JMLR 2005): with the
KL divergence as the distortion, k-means is hard-assignment EM for a mixture of unigrams,
each cluster's topic the posterior mean of its pooled word counts.
"""

import numpy as np
import scipy.sparse as sp
import torch

#: initial-topic schemes of :func:`initial_topics`
INITS = ("kmeans", "documents")


def _doc_matrix(corpus):
    return sp.csr_matrix((corpus.counts, corpus.word_ids, corpus.doc_ptr),
                         shape=(corpus.num_docs, corpus.vocab_size))


def _log_means(centers, lam0):
    """``(V, K)`` log posterior-mean topics of pooled counts ``centers`` ``(K, V)``."""
    conc = centers + lam0
    return (np.log(conc) - np.log(conc.sum(1, keepdims=True))).T


def kmeans_topics(corpus, K, lam0=0.1, iters=3, seed=0):
    """Pooled word counts ``(K, V)`` of a k-means clustering of the documents under the KL
    divergence to smoothed cluster means.

    A document's distortion to cluster ``k`` is :math:`-\\sum_w n_{dw}\\log\\hat\\phi_{kw}`
    minus its own empirical log-likelihood, with :math:`\\hat\\phi_k` the mean of
    :math:`\\mathrm{Dir}(\\lambda_0 + C_k)` for pooled counts :math:`C_k`. Seeds are chosen by
    k-means++ (each next seed with probability proportional to its distortion to the
    nearest seed), then ``iters`` Lloyd steps; a cluster left empty takes the document
    worst served by its own cluster, so all ``K`` topics stay in use.

    :param Corpus corpus: documents.
    :param int K: number of clusters (at most the number of non-empty documents).
    :param float lam0: the topic-word prior that smooths the cluster means.
    :param int iters: Lloyd iterations after seeding.
    :param int seed: seeds the k-means++ draws.
    :returns: ``numpy.ndarray`` ``(K, V)`` pooled counts (add ``lam0`` for topic parameters).
    """
    X = _doc_matrix(corpus)
    lengths = np.asarray(X.sum(1)).ravel()
    docs = np.flatnonzero(lengths > 0)
    if K > len(docs):
        raise ValueError(f"kmeans initialisation needs at least K = {K} non-empty documents; "
                         f"the corpus has {len(docs)}: lower K, or use init='documents' (--init documents), "
                         f"which starts from random documents and takes any K")
    X = X[docs]
    rng = np.random.default_rng(seed)
    # own[d] = sum_w n_dw log(n_dw / N_d): distortion = own - X @ log_means >= 0 (up to smoothing)
    row = np.repeat(np.arange(len(docs)), np.diff(X.indptr))
    own = np.bincount(row, weights=X.data * np.log(X.data / lengths[docs][row]), minlength=len(docs))
    rows = [int(rng.integers(len(docs)))]
    best = own - X @ _log_means(X[rows].toarray(), lam0)[:, 0]
    for _ in range(1, K):
        weights = np.clip(best, 0, None)
        total = weights.sum()
        p = weights / total if total > 0 else None
        row = int(rng.choice(len(docs), p=p))
        rows.append(row)
        best = np.minimum(best, own - X @ _log_means(X[[row]].toarray(), lam0)[:, 0])
    centers = X[rows].toarray()
    for _ in range(int(iters)):
        scores = X @ _log_means(centers, lam0)  # (D, K) log-likelihoods
        z = scores.argmax(1)
        distortion = own - scores[np.arange(len(docs)), z]
        sizes = np.bincount(z, minlength=K)
        worst = iter(np.argsort(-distortion))
        for k in np.flatnonzero(sizes == 0):  # re-seed empty clusters with the worst-served documents
            d = next(d for d in worst if sizes[z[d]] > 1)
            sizes[z[d]] -= 1
            z[d], sizes[k] = k, 1
        onehot = sp.csr_matrix((np.ones(len(docs)), (z, np.arange(len(docs)))), shape=(K, len(docs)))
        centers = (onehot @ X).toarray()
    return centers


def initial_topics(corpus, K, lam0=0.1, init="kmeans", seed=0, dtype=torch.float64, device=None):
    """``(K, V)`` initial topic-word Dirichlet parameters :math:`\\lambda_0 + C_k`.

    :param str init: ``"kmeans"`` (pooled counts of :func:`kmeans_topics`) or
        ``"documents"`` (each topic one random document's counts).
    """
    if init == "kmeans":
        counts = kmeans_topics(corpus, K, lam0, seed=seed)
    elif init == "documents":
        rng = np.random.default_rng(seed)
        docs = rng.choice(corpus.num_docs, size=K, replace=corpus.num_docs < K)
        counts = corpus.subset(docs).to_dense()
    else:
        raise ValueError(f"init must be one of {', '.join(INITS)}; got {init!r}")
    return lam0 + torch.as_tensor(counts, dtype=dtype, device=device)
