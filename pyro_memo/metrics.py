"""Clustering, density and link prediction metrics shared by every method in a comparison."""

import numbers

import numpy as np


def _labels(a, name):
    """``a`` (a 1-D array or tensor of whole-number labels) as a numpy array, else :class:`ValueError` naming
    ``name``."""
    a = np.asarray(a.cpu() if hasattr(a, "cpu") else a)
    if a.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array of labels; got shape {a.shape}")
    if a.size and not np.issubdtype(a.dtype, np.integer):
        real = np.issubdtype(a.dtype, np.number) and not np.issubdtype(a.dtype, np.complexfloating)
        if not (real or a.dtype == bool):  # strings, complex: np.mod raised a ufunc TypeError
            raise ValueError(f"{name} must hold integer labels; got dtype {a.dtype}")
        if not np.all(np.mod(a, 1) == 0):
            raise ValueError(f"{name} must hold integer labels")
        a = a.astype(np.int64)
    return a


def _pair(truth, pred):
    truth, pred = _labels(truth, "truth"), _labels(pred, "pred")
    if truth.shape != pred.shape:
        raise ValueError(f"truth and pred must have the same length; got {truth.size} and {pred.size}")
    return truth, pred


def _contingency(truth, pred):
    """The ``(clusters, classes)`` table of counts of items with each predicted and true label."""
    classes, t = np.unique(truth, return_inverse=True)
    clusters, p = np.unique(pred, return_inverse=True)
    table = np.zeros((len(clusters), len(classes)), dtype=np.int64)
    np.add.at(table, (p, t), 1)
    return table


def _entropy(counts):
    """Entropy (nats) of the label distribution with these positive counts."""
    q = counts / counts.sum()
    return float(-(q * np.log(q)).sum())


def nmi(truth, pred):
    """Normalised mutual information :math:`I(T; P) / \\tfrac12 (H(T) + H(P))` in nats (the
    arithmetic-mean normalisation, scikit-learn's default; Vinh, Epps & Bailey 2010), from the
    contingency table. Two labellings with one cluster each (or none) match perfectly (1); when the
    mutual information is zero otherwise, so is the score, as scikit-learn has it."""
    truth, pred = _pair(truth, pred)
    table = _contingency(truth, pred)
    if table.shape[0] == table.shape[1] <= 1:
        return 1.0
    table = table.astype(np.float64)  # products of counts below 2**53 are exact
    n = table.sum()
    rows, cols = table.sum(1), table.sum(0)
    i, j = np.nonzero(table)
    mi = float(np.clip((table[i, j] / n * np.log(table[i, j] * n / (rows[i] * cols[j]))).sum(), 0.0, None))
    if mi == 0.0:
        return 0.0
    return mi / (0.5 * (_entropy(rows) + _entropy(cols)))


def hungarian_accuracy(truth, pred):
    """Fraction of items labelled correctly under the best one-to-one matching of predicted
    clusters to true classes (Hungarian algorithm on the contingency table); clusters left
    unmatched count as errors (Lim & Jiang, §5)."""
    from scipy.optimize import linear_sum_assignment

    truth, pred = _pair(truth, pred)
    if truth.size == 0:
        raise ValueError("accuracy needs at least one labelled item")
    table = _contingency(truth, pred)
    rows, cols = linear_sum_assignment(-table)
    return float(table[rows, cols].sum() / truth.size)


def effective_k(pred, min_fraction=0.01):
    """Number of clusters holding at least ``min_fraction`` of the items (hard labels)."""
    if isinstance(min_fraction, bool) or not isinstance(min_fraction, numbers.Real) or not 0 <= min_fraction <= 1:
        raise ValueError(f"min_fraction must be a number in [0, 1]; got {min_fraction!r}")
    pred = _labels(pred, "pred")
    _, counts = np.unique(pred, return_counts=True)
    return int((counts >= min_fraction * pred.size).sum())


def _scored_pairs(values, labels, name):
    """``(values, labels)`` as 1-D float64 and 0/1 int64 arrays of one length, checked."""
    values = np.asarray(values.detach().cpu() if hasattr(values, "detach") else values, dtype=np.float64)
    labels = _labels(labels, "labels")
    if values.ndim != 1 or values.shape != labels.shape:
        raise ValueError(f"{name} and labels must be 1-D of one length; got shapes {values.shape} and {labels.shape}")
    if not np.all(np.isfinite(values)):
        raise ValueError(f"{name} contain NaN or inf")
    if not np.all((labels == 0) | (labels == 1)):
        raise ValueError("labels must be 0 (non-link) or 1 (link)")
    return values, labels


def link_auc(scores, labels):
    """Area under the ROC curve of held-out link prediction: the probability that a random link
    scores above a random non-link, ties counted half. Computed from the average ranks of the
    scores (the Mann-Whitney statistic), so ties need no special care.

    :raises ValueError: unless both links and non-links are present.
    """
    from scipy.stats import rankdata

    scores, labels = _scored_pairs(scores, labels, "scores")
    n_pos = int(labels.sum())
    n_neg = labels.size - n_pos
    if n_pos == 0 or n_neg == 0:
        raise ValueError(f"AUC needs both links and non-links; got {n_pos} and {n_neg}")
    ranks = rankdata(scores)
    return float((ranks[labels == 1].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def link_log_likelihood(probs, labels, clip=1e-12):
    """Mean Bernoulli log-likelihood per held-out pair, :math:`\\frac{1}{M} \\sum_m y_m \\log p_m +
    (1 - y_m) \\log(1 - p_m)`, with the probabilities clipped to ``[clip, 1 - clip]``.

    :raises ValueError: on probabilities outside ``[0, 1]`` or labels other than 0/1.
    """
    if isinstance(clip, bool) or not isinstance(clip, numbers.Real) or not 0 <= clip < 0.5:
        raise ValueError(f"clip must be a number in [0, 0.5); got {clip!r}")  # else NaN or -inf, silently
    probs, labels = _scored_pairs(probs, labels, "probs")
    if probs.size == 0:
        raise ValueError("no held-out pairs")
    if np.any(probs < 0) or np.any(probs > 1):
        raise ValueError(f"probs must lie in [0, 1]; got [{probs.min()}, {probs.max()}]")
    p = np.clip(probs, clip, 1 - clip)
    return float(np.mean(np.where(labels == 1, np.log(p), np.log1p(-p))))
