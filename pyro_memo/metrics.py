"""Clustering and density metrics shared by every method in a comparison."""

import numpy as np
from scipy.optimize import linear_sum_assignment
from sklearn.metrics import normalized_mutual_info_score


def _labels(a, name):
    a = np.asarray(a.cpu() if hasattr(a, "cpu") else a)
    if a.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array of labels; got shape {a.shape}")
    if a.size and not np.issubdtype(a.dtype, np.integer):
        if not np.all(np.mod(a, 1) == 0):
            raise ValueError(f"{name} must hold integer labels")
        a = a.astype(np.int64)
    return a


def _pair(truth, pred):
    truth, pred = _labels(truth, "truth"), _labels(pred, "pred")
    if truth.shape != pred.shape:
        raise ValueError(f"truth and pred must have the same length; got {truth.size} and {pred.size}")
    return truth, pred


def nmi(truth, pred):
    """Normalised mutual information (arithmetic-mean normalisation, as scikit-learn)."""
    truth, pred = _pair(truth, pred)
    return float(normalized_mutual_info_score(truth, pred))


def hungarian_accuracy(truth, pred):
    """Fraction of items labelled correctly under the best one-to-one matching of predicted
    clusters to true classes (Hungarian algorithm on the contingency table); clusters left
    unmatched count as errors (Lim & Jiang, §5)."""
    truth, pred = _pair(truth, pred)
    _, t = np.unique(truth, return_inverse=True)
    _, p = np.unique(pred, return_inverse=True)
    table = np.zeros((p.max() + 1, t.max() + 1), dtype=np.int64)
    np.add.at(table, (p, t), 1)
    rows, cols = linear_sum_assignment(-table)
    return float(table[rows, cols].sum() / truth.size)


def effective_k(pred, min_fraction=0.01):
    """Number of clusters holding at least ``min_fraction`` of the items (hard labels)."""
    pred = _labels(pred, "pred")
    _, counts = np.unique(pred, return_counts=True)
    return int((counts >= min_fraction * pred.size).sum())
