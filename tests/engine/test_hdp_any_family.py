"""The HDP over any conjugate family: the same group-level code as the topic model."""

import numpy as np
import pytest
import torch

import pyro_memo as pm
from pyro_memo.posterior.hdp import HDPMixturePosterior
from pyro_memo.topics import HDPPosterior, MemoizedHDP
from tests.topics.test_memoized_hdp import random_corpus


@pytest.mark.parametrize("seed", range(3))
def test_the_multinomial_family_on_one_hot_tokens_is_the_topic_model(seed):
    corpus = random_corpus(seed)
    doc, word, count = corpus.tokens()
    doc, word = doc.repeat_interleave(count.long()), word.repeat_interleave(count.long())  # unit tokens
    ones = torch.ones(len(word), dtype=torch.float64)
    rng = np.random.default_rng(seed)
    K, V = 4, corpus.vocab_size
    topics = HDPPosterior.prior(K, V, alpha=0.7, gamma=3.0, lam0=0.2)
    topics.lam = topics.lam + torch.as_tensor(rng.gamma(1.0, 5.0, size=(K, V)))
    family = pm.Multinomial({"lam": torch.full((V,), 0.2)})
    general = HDPMixturePosterior(family, {"lam": topics.lam}, topics.rho, topics.omega, 0.7, 3.0)
    r1, n1, s1, _ = topics.local_step(doc, word, ones, corpus.num_docs)
    one_hot = torch.nn.functional.one_hot(word, V).double()
    r2, n2, s2, _ = general.local_step(doc, one_hot, ones, corpus.num_docs)
    torch.testing.assert_close(r1, r2, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(n1, n2, rtol=1e-9, atol=1e-9)
    # the two formulas of the topics term differ only in rounding (lgamma of sums of ~1e4)
    assert float(general.elbo(s2)) == pytest.approx(float(topics.elbo(s1)), rel=1e-9)
    a, b = topics.updated(s1), general.updated(s2)
    torch.testing.assert_close(a.lam, b.component["lam"])
    torch.testing.assert_close(a.rho, b.rho, rtol=1e-8, atol=1e-10)


def gaussian_groups(seed, num_groups=40, per_group=60, dim=2, components=4):
    """Groups drawing from shared Gaussian components with group-specific sparse weights."""
    rng = np.random.default_rng(seed)
    means = rng.normal(0, 8, size=(components, dim))
    groups = []
    for _ in range(num_groups):
        weights = rng.dirichlet(np.full(components, 0.3))
        z = rng.choice(components, per_group, p=weights)
        groups.append(means[z] + rng.normal(size=(per_group, dim)))
    return groups, means


@pytest.mark.parametrize("seed", range(4))
def test_an_hdp_mixture_of_gaussians_runs_on_the_engine_and_its_bound_never_falls(seed):
    groups, means = gaussian_groups(seed)
    family = pm.Gaussian.from_data(np.concatenate(groups))
    fit = MemoizedHDP(K=8, laps=6, tol=0, seed=seed, family=family, record_batch_elbos=True).fit(groups, 4)
    steps = fit.batch_elbos
    assert len(steps) > 10 and all(b >= a - 1e-9 * abs(a) for a, b in zip(steps, steps[1:], strict=False))
    total = fit.state.cache.recomputed_total()
    torch.testing.assert_close(total.counts, fit.state.cache.total.counts)
    assert float(total.counts.sum()) == pytest.approx(sum(len(g) for g in groups), rel=1e-10)
    # every true component is found: some fitted mean lies within 1 of it
    fitted = fit.posterior.family.point_estimates(fit.posterior.component)["means"]
    big = fit.posterior.expected_beta()[:-1] > 0.02
    distances = torch.cdist(torch.as_tensor(means), fitted[big])
    assert bool((distances.min(1).values < 1.0).all())


def test_an_hdp_mixture_checkpoints_and_resumes_alike(tmp_path):
    groups, _ = gaussian_groups(9, num_groups=20)
    family = pm.DiagGaussian.from_data(np.concatenate(groups))
    direct = MemoizedHDP(K=5, laps=4, tol=0, seed=2, family=family).fit(groups, 3)
    part = MemoizedHDP(K=5, laps=2, tol=0, seed=2, family=family).fit(groups, 3)
    pm.save_state(tmp_path / "state.pt", part.state)
    state = pm.load_state(tmp_path / "state.pt")
    assert isinstance(state.posterior, HDPMixturePosterior)
    resumed = MemoizedHDP(K=5, laps=4, tol=0, seed=2, family=family).fit(groups, 3, state=state)
    np.testing.assert_allclose(resumed.elbo_trace, direct.elbo_trace, rtol=1e-12)


def test_bad_groups_and_moves_are_refused():
    family = pm.Gaussian.from_data(np.zeros((5, 2)) + np.arange(5)[:, None])
    with pytest.raises(TypeError, match="list of groups"):
        MemoizedHDP(K=2, family=family).fit(np.zeros((4, 2)), 1)
    with pytest.raises(ValueError, match="group 1 has shape"):
        MemoizedHDP(K=2, family=family).fit([np.zeros((3, 2)), np.zeros((3, 3))], 1)
    with pytest.raises(ValueError, match="topic model only"):
        MemoizedHDP(K=2, family=family, moves="merge")


def test_bad_values_name_their_group_and_row():
    """A NaN or a value outside the support names its group and its row in it: the groups of a batch, drawn at
    random, were checked as one array, so a NaN in row 3 of group 5 was 'row 23' of 'its 40 rows'."""
    groups = [np.arange(20.0).reshape(10, 2) + g for g in range(8)]
    family = pm.Gaussian.from_data(np.concatenate(groups))
    groups[5][3, 0] = np.nan
    with pytest.raises(pm.families.NonFiniteDataError, match="in 1 of the 10 rows of group 5; the first is row 3$"):
        MemoizedHDP(K=2, family=family).fit(groups, 2)
    binary = [np.ones((4, 3)) for _ in range(6)]
    binary[4][2, 1] = 0.5
    with pytest.raises(ValueError, match="^group 4: bern data must be binary"):
        MemoizedHDP(K=2, family=pm.Bernoulli.from_data(np.ones((4, 3)))).fit(binary, 3)
