"""Metrics against hand-worked cases."""

import numpy as np
import pytest
import torch

from pyro_memo.metrics import effective_k, hungarian_accuracy, nmi


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


@pytest.mark.parametrize("bad,match", [(np.zeros((3, 2)), "1-D"), (np.array([0.5, 1.0, 2.0]), "integer")])
def test_bad_labels(bad, match):
    with pytest.raises(ValueError, match=match):
        nmi(bad, np.zeros(3))
    with pytest.raises(ValueError, match="same length"):
        hungarian_accuracy([0, 1], [0, 1, 1])
