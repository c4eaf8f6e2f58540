"""The stochastic online HDP baseline: exact on one batch with a unit first step, improves
its bound, validates its schedule."""

import numpy as np
import pytest
import torch

from pyro_memo.synthetic import bars_corpus
from pyro_memo.topics import MemoizedHDP, StochasticHDP, document_completion, split_documents
from tests.topics.test_memoized_hdp import random_corpus


@pytest.mark.parametrize("seed", range(3))
def test_first_step_with_one_batch_and_no_delay_is_the_memoized_update(seed):
    corpus = random_corpus(seed)
    svi = StochasticHDP(K=5, laps=1, delay=0.0, seed=seed).fit(corpus, 1)
    memo = MemoizedHDP(K=5, laps=1, seed=seed).fit(corpus, 1)
    torch.testing.assert_close(svi.posterior.lam, memo.posterior.lam, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(svi.posterior.rho, memo.posterior.rho, rtol=1e-8, atol=1e-10)


def test_stochastic_hdp_learns_bars():
    corpus, _, _ = bars_corpus(400, 150, alpha=0.2, seed=3)
    train, test = split_documents(corpus, 0.2, seed=0)
    fit = StochasticHDP(K=15, laps=10, seed=0).fit(train, 8)
    trace = np.asarray(fit.elbo_trace)
    assert trace[-1] > trace[0]
    assert document_completion(fit.posterior, test) > -np.log(corpus.vocab_size) + 0.4


def test_schedule_and_options_validate():
    with pytest.raises(ValueError, match="kappa"):
        StochasticHDP(kappa=0.2)
    with pytest.raises(ValueError, match="delay"):
        StochasticHDP(delay=-1)
    with pytest.raises(ValueError, match="no moves"):
        StochasticHDP(moves="merge")
