"""Metrics against hand-worked cases."""

import numpy as np
import pytest
import torch

from pyro_memo.metrics import effective_k, hungarian_accuracy, link_auc, link_log_likelihood, nmi


def test_hungarian_accuracy_hand_case():
    truth = [0, 0, 0, 1, 1, 1, 2, 2]
    pred = [5, 5, 7, 7, 7, 7, 9, 9]   # 5->0 (2), 7->1 (3), 9->2 (2): 7 of 8
    assert hungarian_accuracy(truth, pred) == pytest.approx(7 / 8)
    # a permutation of labels is perfect; merging two classes costs the smaller one
    assert hungarian_accuracy(truth, [2, 2, 2, 0, 0, 0, 1, 1]) == 1.0
    assert hungarian_accuracy(truth, [0, 0, 0, 0, 0, 0, 1, 1]) == pytest.approx(5 / 8)


def test_nmi_and_effective_k():
    rng = np.random.default_rng(0)
    truth = rng.integers(4, size=1000)
    assert nmi(truth, (truth + 1) % 4) == pytest.approx(1.0)
    assert nmi(truth, rng.integers(4, size=1000)) < 0.02
    pred = np.concatenate([np.zeros(500), np.ones(495), np.full(5, 2)])
    assert effective_k(pred) == 2 and effective_k(pred, min_fraction=0.001) == 3
    assert effective_k(torch.tensor([3, 3, 1])) == 2


@pytest.mark.parametrize("seed", range(40))
def test_nmi_matches_sklearn(seed):
    """Our contingency-table NMI is scikit-learn's, over random labellings of every shape: few or
    many items and labels, dependent or independent, one side a single cluster, labels not 0..K-1."""
    from sklearn.metrics import normalized_mutual_info_score

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 600))
    truth = rng.integers(int(rng.integers(1, 12)), size=n) * 3 - 7
    noise = rng.random(n) < rng.random()
    pred = np.where(noise, rng.integers(int(rng.integers(1, 15)), size=n), truth // 2 + 100)
    for t, p in ((truth, pred), (pred, truth), (truth, np.zeros(n, dtype=int)), (truth, truth[::-1].copy())):
        assert nmi(t, p) == pytest.approx(normalized_mutual_info_score(t, p), abs=1e-12)


def test_nmi_limit_cases():
    """One cluster on both sides (or no items) is a perfect match; exactly independent labellings score 0."""
    assert nmi([4, 4, 4], [1, 1, 1]) == 1.0 and nmi([], []) == 1.0
    assert nmi([0, 0, 1, 1], [0, 1, 0, 1]) == 0.0
    assert nmi([0, 1, 2], [5, 5, 5]) == 0.0
    with pytest.raises(ValueError, match="at least one"):
        hungarian_accuracy([], [])


@pytest.mark.parametrize("bad,match", [(np.zeros((3, 2)), "1-D"), (np.array([0.5, 1.0, 2.0]), "integer")])
def test_bad_labels(bad, match):
    with pytest.raises(ValueError, match=match):
        nmi(bad, np.zeros(3))
    with pytest.raises(ValueError, match="same length"):
        hungarian_accuracy([0, 1], [0, 1, 1])


@pytest.mark.parametrize("metric", [nmi, hungarian_accuracy])
def test_complex_labels_are_refused(metric):
    """Used to fail with numpy's raw "ufunc 'remainder' not supported for the input types"."""
    with pytest.raises(ValueError, match="truth must hold integer labels; got dtype complex128"):
        metric(np.array([1j, 2j]), np.array([1, 2]))
    with pytest.raises(ValueError, match="pred must hold integer labels; got dtype complex64"):
        metric([0, 1], np.array([0, 1], dtype=np.complex64))


def test_labels_from_an_argmax_of_memberships():
    """Relational models report (N, K) memberships; their argmax, numpy or torch, is accepted as labels."""
    rng = np.random.default_rng(1)
    memberships = rng.dirichlet(np.full(4, 0.1), size=200)
    truth = memberships.argmax(1)
    permuted = memberships[:, [2, 0, 3, 1]]
    assert nmi(truth, permuted.argmax(1)) == pytest.approx(1.0)
    assert hungarian_accuracy(truth, torch.as_tensor(permuted).argmax(1)) == 1.0
    assert effective_k(torch.as_tensor(memberships).argmax(dim=1), min_fraction=0.1) == 4


@pytest.mark.parametrize("seed", range(6))
def test_link_auc_matches_sklearn(seed):
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 400))
    labels = rng.integers(2, size=n)
    labels[:2] = [0, 1]
    # continuous scores, then heavily tied ones (few distinct values), then scores that carry signal
    for scores in (rng.random(n), rng.integers(3, size=n).astype(float), labels + rng.normal(0, 1, n).round(1)):
        assert link_auc(scores, labels) == pytest.approx(roc_auc_score(labels, scores), abs=1e-12)


def test_link_auc_hand_cases():
    assert link_auc([0.9, 0.8, 0.1, 0.2], [1, 1, 0, 0]) == 1.0
    assert link_auc([0.1, 0.2, 0.9, 0.8], [1, 1, 0, 0]) == 0.0
    assert link_auc([0.5, 0.5, 0.5], [1, 0, 0]) == 0.5          # every comparison a tie: half each
    assert link_auc(torch.tensor([0.3, 0.7]), torch.tensor([0, 1])) == 1.0
    with pytest.raises(ValueError, match="both links and non-links"):
        link_auc([0.1, 0.2], [1, 1])
    with pytest.raises(ValueError, match="0 \\(non-link\\) or 1"):
        link_auc([0.1, 0.2], [0, 2])
    with pytest.raises(ValueError, match="one length"):
        link_auc([0.1, 0.2, 0.3], [0, 1])
    with pytest.raises(ValueError, match="NaN"):
        link_auc([0.1, np.nan], [0, 1])


def test_link_log_likelihood():
    probs, labels = np.array([0.9, 0.2, 0.5]), np.array([1, 0, 1])
    expected = (np.log(0.9) + np.log(0.8) + np.log(0.5)) / 3
    assert link_log_likelihood(probs, labels) == pytest.approx(expected)
    # certain and wrong is clipped, not -inf
    assert link_log_likelihood([0.0, 1.0], [1, 0]) == pytest.approx(np.log(1e-12))
    assert link_log_likelihood([1.0, 0.0], [1, 0]) == pytest.approx(0.0, abs=1e-11)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        link_log_likelihood([1.5], [1])
    with pytest.raises(ValueError, match="no held-out pairs"):
        link_log_likelihood([], [])


@pytest.mark.parametrize("call,match", [
    # NaN (clip NaN or 2) and -inf (clip -1) came back silently; a string min_fraction was a UFuncTypeError,
    # NaN counted no cluster
    (lambda: link_log_likelihood([0.5], [1], clip=float("nan")), r"clip must be a number in \[0, 0.5\); got nan"),
    (lambda: link_log_likelihood([0.5], [1], clip=2), "got 2"),
    (lambda: link_log_likelihood([0.0], [1], clip=-1), "got -1"),
    (lambda: effective_k([0, 1], min_fraction=float("nan")), r"min_fraction must be a number in \[0, 1\]; got nan"),
    (lambda: effective_k([0, 1], min_fraction=-1), "got -1"),
    (lambda: effective_k([0, 1], min_fraction="a"), "got 'a'"),
])
def test_metric_settings_out_of_range_are_refused(call, match):
    with pytest.raises(ValueError, match=match):
        call()
