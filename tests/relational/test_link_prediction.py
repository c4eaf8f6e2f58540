"""Predictive link probabilities of the relational posterior and held-out link prediction."""

import numpy as np
import pytest
import torch

from pyro_memo.data import assortative_graph, split_pairs
from pyro_memo.relational import MemoizedRelational, RelationalPosterior, link_prediction


def random_posterior(N=12, K=4, seed=0, eps=1e-3):
    g = torch.Generator().manual_seed(seed)
    theta = torch.rand(N, K + 1, generator=g, dtype=torch.float64) * 3 + 0.1
    rho, omega = torch.full((K,), 0.3, dtype=torch.float64), torch.full((K,), 6.0, dtype=torch.float64)
    w_a = torch.rand(K, generator=g, dtype=torch.float64) + 0.5
    w_b = torch.rand(K, generator=g, dtype=torch.float64) * 5 + 0.5
    return RelationalPosterior(theta, rho, omega, w_a, w_b, alpha=1.0, gamma=5.0, eps=eps)


def test_link_probability_matches_the_direct_formula_and_lies_in_the_unit_interval():
    post = random_posterior()
    pairs = torch.tensor([(i, j) for i in range(post.N) for j in range(post.N) if i != j])
    got = post.link_probability(pairs)
    theta = post.theta.numpy()
    w = (post.w_a / (post.w_a + post.w_b)).numpy()
    expected = []
    for i, j in pairs.tolist():
        pi_i = theta[i, :-1] / theta[i, :-1].sum()
        pi_j = theta[j, :-1] / theta[j, :-1].sum()
        same = sum(pi_i[k] * pi_j[k] for k in range(post.K))
        expected.append(sum(pi_i[k] * pi_j[k] * w[k] for k in range(post.K)) + post.eps * (1 - same))
    assert got.shape == (len(pairs),)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12)
    assert bool(((got > 0) & (got < 1)).all())
    np.testing.assert_allclose(got.numpy(), post.link_probability(pairs.flip(1)).numpy(), rtol=1e-12)  # symmetric
    # numpy pairs work too, and whole numbers as floats
    np.testing.assert_allclose(post.link_probability(pairs.numpy()).numpy(), got.numpy())
    np.testing.assert_allclose(post.link_probability(pairs.double()).numpy(), got.numpy())


@pytest.mark.parametrize("pairs,message", [(np.zeros((3, 3), dtype=np.int64), "shape"),
                                           (np.array([[0, 12]]), "node ids"), (np.array([[-1, 2]]), "node ids"),
                                           (np.array([[0.7, 2.7]]), "whole-number node ids"),
                                           (np.array([[np.nan, 2.0]]), "whole-number node ids"),
                                           (np.array([[True, False]]), "whole-number node ids"),
                                           (np.array([[1, 2], [3, 3]]), "pair 1 links node 3 to itself")])
def test_link_probability_refuses_bad_pairs(pairs, message):
    with pytest.raises(ValueError, match=message):
        random_posterior().link_probability(pairs)


@pytest.mark.parametrize("pairs,message", [([["n0", "n1"]], r"whole-number node ids, the nodes' positions 0 \.\. 11.*"
                                                                r"not their names; got dtype <U2"),
                                           (np.array([[1, 2**63 + 1]], dtype=np.uint64),
                                            r"node ids must lie in \[0, 12\); found \[1, 9223372036854775809\]")])
def test_link_probability_names_node_names_and_huge_ids(pairs, message):
    """Node names (a networkx user's string labels) failed in torch with 'can't convert np.ndarray of type
    numpy.str_'; a uint64 id past 2**63 was reported as 'found [-9223372036854775807, 1]', ids never given."""
    with pytest.raises(ValueError, match=message):
        random_posterior().link_probability(pairs)


def test_held_out_links_of_an_easy_graph_are_predicted():
    graph, _, _ = assortative_graph(300, 4, link_probs=np.full(4, 0.3), epsilon=1e-3, seed=1)
    train, pairs, labels = split_pairs(graph, 0.1, seed=0)
    fit = MemoizedRelational(K=4, laps=8, seed=0).fit(train, 3)
    scores = link_prediction(fit.posterior, pairs, labels)
    assert set(scores) == {"auc", "log_lik"}
    assert scores["auc"] > 0.8
    assert np.isfinite(scores["log_lik"]) and scores["log_lik"] < 0
    # better than a constant predictor at the graph's density
    p = train.density
    constant = np.mean(np.where(labels == 1, np.log(p), np.log1p(-p)))
    assert scores["log_lik"] > constant


@pytest.mark.parametrize("labels", [np.array(["1", "0"]), np.array([b"1", b"0"]), np.array([None, 1], dtype=object)])
def test_link_prediction_names_labels_that_are_not_numbers(labels):
    # strings raised numpy's "ufunc 'remainder' not supported for the input types"
    with pytest.raises(ValueError, match="labels must hold integer labels; got dtype"):
        link_prediction(random_posterior(), np.array([[0, 1], [2, 3]]), labels)
