"""Pyro's SVI baseline on the DP-mixture model: it learns, and is scored on the exact ELBO."""

import pytest
import torch
from sklearn.metrics import normalized_mutual_info_score

import pyro_memo as pm
from pyro_memo.bridge.pyro_svi import PyroSVI
from pyro_memo.data_sources import make_batches
from pyro_memo.inference.stochastic_vb import full_data_elbo
from tests.conftest import four_blobs


def test_trace_enum_improves_the_exact_elbo_and_recovers_well_separated_clusters():
    """k-means++ with K = 8 splits the 4 blobs (NMI 0.83 at the start); SVI empties the extras."""
    x, labels = four_blobs(1000)
    family = pm.Gaussian.from_data(x)
    start = pm.FullBatchVB(family, 8, seed=0).initial_posterior(x)
    initial, _ = full_data_elbo(start, make_batches(x, 1))
    nmi_start = normalized_mutual_info_score(labels.numpy(), start.responsibilities(x).argmax(-1).numpy())
    result = PyroSVI(family, 8, lr=0.05, laps=6, seed=0).fit(x, num_batches=5)
    assert len(result.elbo_trace) == len(result.lap_seconds) == 6
    assert result.elbo_trace[-1] > initial
    pred = result.posterior.responsibilities(x).argmax(-1)
    assert nmi_start < 0.9 < 0.95 < normalized_mutual_info_score(labels.numpy(), pred.numpy())
    # the reported ELBO is the exact ELBO of the returned globals
    assert full_data_elbo(result.posterior, make_batches(x, 3))[0] == pytest.approx(result.elbo, rel=1e-10)


def test_trace_elbo_improves_the_exact_elbo():
    """Sampled assignments give score-function gradients: a small step and 8 particles."""
    x, _ = four_blobs(1000)
    family = pm.Gaussian.from_data(x)
    initial, _ = full_data_elbo(pm.FullBatchVB(family, 8, seed=1).initial_posterior(x), make_batches(x, 1))
    result = PyroSVI(family, 8, loss="Trace_ELBO", lr=0.003, laps=6, num_particles=8, seed=1).fit(
        x, num_batches=5)
    assert result.elbo_trace[-1] > initial + 5.0


def test_bad_options():
    family = pm.Gaussian.from_data(torch.randn(10, 2, dtype=torch.float64))
    with pytest.raises(ValueError, match="loss"):
        PyroSVI(family, 3, loss="JitTrace")
    with pytest.raises(ValueError, match="batches"):
        PyroSVI(family, 3).fit(torch.randn(10, 2, dtype=torch.float64), num_batches=11)
    # each was an AttributeError ('str' object has no attribute 'check_data') in fit, or truncated silently
    with pytest.raises(TypeError, match="family must be a family object"):
        PyroSVI("gauss", 3)
    for option, value in [("K", 2.5), ("laps", 0), ("num_particles", 1.5), ("lr", -0.1), ("alpha", float("nan"))]:
        with pytest.raises(ValueError, match=f"{option} must be a positive"):
            PyroSVI(family, **{"K": 3, option: value})
    with pytest.raises(ValueError, match="num_batches must be a positive integer"):
        PyroSVI(family, 3).fit(torch.randn(10, 2, dtype=torch.float64), num_batches=2.5)


def test_a_fit_leaves_the_users_params_and_random_generators_alone():
    """The fit runs under its own seed and owns only the param store's ``pyro_memo.PyroSVI.*``: a user's
    parameters stay, and their torch, numpy and ``random`` streams read on as if no fit had run."""
    import random

    import numpy as np
    import pyro
    import pyro.util

    x, _ = four_blobs(200)
    family = pm.Gaussian.from_data(x)
    pyro.clear_param_store()
    mine = pyro.param("my_weights", torch.arange(3.0))
    torch.manual_seed(11)
    np.random.seed(11)
    random.seed(11)
    before = pyro.util.get_rng_state()
    first = PyroSVI(family, 3, laps=2, seed=0).fit(x, num_batches=2)
    after = pyro.util.get_rng_state()
    assert torch.equal(after["torch"], before["torch"])
    assert after["random"] == before["random"]
    assert all(np.array_equal(a, b) for a, b in zip(after["numpy"], before["numpy"], strict=True))
    store = pyro.get_param_store()
    assert torch.equal(store["my_weights"], mine)
    assert {n for n in store.keys() if n != "my_weights"} and all(
        n.startswith("pyro_memo.PyroSVI.") for n in store.keys() if n != "my_weights")
    # a second fit starts afresh from its own seed (the first fit's parameters replaced), whatever the user's streams
    torch.manual_seed(12)
    again = PyroSVI(family, 3, laps=2, seed=0).fit(x, num_batches=2)
    assert again.elbo_trace == first.elbo_trace and "my_weights" in store
    pyro.clear_param_store()
