"""The thread policy: it keeps the faster of one thread and the most allowed, follows a change of
load, restores torch's setting, and never changes what a fit computes."""

import time

import numpy as np
import pytest
import torch

import pyro_memo as pm
from pyro_memo.cli import main
from pyro_memo.engine import ThreadPolicy
from pyro_memo.engine.threads import FIRST_INTERVAL, check_threads


@pytest.fixture
def two_threads():
    saved = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(saved)


def run_steps(policy, steps, seconds_at):
    """Drive ``steps`` local steps whose duration depends on the thread count they run with."""
    used = []
    for _ in range(steps):
        with policy.step() as threads:
            assert threads == torch.get_num_threads()
            time.sleep(seconds_at(threads))
        used.append(threads)
    return used


@pytest.mark.parametrize("slow", [1, 2])
def test_policy_keeps_the_faster_count(two_threads, slow):
    fast = 3 - slow
    with ThreadPolicy(2) as policy:
        used = run_steps(policy, 40, lambda t: 0.006 if t == slow else 0.001)
        assert policy.choice == fast
        assert torch.get_num_threads() == fast
    # after the first measurement only re-measurements run the slow count: a few steps in 40
    assert used[-FIRST_INTERVAL:].count(slow) <= policy.probes
    assert used.count(slow) <= 3 * policy.probes + 1
    assert torch.get_num_threads() == 2


def test_policy_follows_a_change_of_load(two_threads):
    load = {"busy": False}

    def seconds_at(threads):  # two threads win on an idle machine and lose beside a busy process
        if load["busy"]:
            return 0.008 if threads == 2 else 0.002
        return 0.001 if threads == 2 else 0.004

    with ThreadPolicy() as policy:
        run_steps(policy, 30, seconds_at)
        assert policy.choice == 2
        load["busy"] = True
        used = run_steps(policy, 4 * FIRST_INTERVAL + 4 * policy.probes, seconds_at)
        assert policy.choice == 1
        assert used[-FIRST_INTERVAL:].count(2) <= policy.probes


def test_one_thread_measures_nothing(two_threads):
    with ThreadPolicy(1) as policy:
        used = run_steps(policy, 10, lambda t: 0.0)
    assert set(used) == {1} and policy.history == []
    assert torch.get_num_threads() == 2


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_bad_thread_counts_are_refused(bad):
    with pytest.raises(ValueError, match="threads must be a positive integer"):
        check_threads(bad)
    with pytest.raises(ValueError, match="threads"):
        pm.MemoizedVB(pm.ZeroMeanGaussian.from_data(torch.randn(20, 2, dtype=torch.float64)), 2, threads=bad)


def test_fits_agree_and_restore_threads(two_threads):
    x = torch.as_tensor(pm.data.toy_patches(3000, seed=1)[0])
    family = pm.ZeroMeanGaussian.from_data(x)
    traces = []
    for threads in (1, 2, None):
        result = pm.MemoizedVB(family, 8, laps=4, tol=0, seed=3, threads=threads).fit(x, num_batches=6)
        traces.append(result.elbo_trace)
        assert torch.get_num_threads() == 2
    np.testing.assert_allclose(traces[1], traces[0], rtol=1e-10)
    np.testing.assert_allclose(traces[2], traces[0], rtol=1e-10)


def test_a_failed_fit_restores_threads(two_threads):
    x = torch.randn(200, 3, dtype=torch.float64)

    def stop(lap, elbo, posterior):
        raise RuntimeError("callback failed")

    with pytest.raises(RuntimeError, match="callback failed"):
        pm.MemoizedVB(pm.Gaussian.from_data(x), 3, laps=3, threads=1).fit(x, num_batches=2, callback=stop)
    assert torch.get_num_threads() == 2


def test_every_driver_takes_threads():
    x = torch.randn(300, 2, dtype=torch.float64)
    family = pm.Gaussian.from_data(x)
    for driver in (pm.FullBatchVB(family, 3, max_iter=2, threads=1), pm.StochasticVB(family, 3, laps=2, threads=1)):
        assert driver.threads == 1
        driver.fit(x) if isinstance(driver, pm.FullBatchVB) else driver.fit(x, num_batches=3)


def test_cli_threads(tmp_path, capsys):
    assert main(["fit", "digits", "--K", "3", "--laps", "2", "--threads", "1", "--quiet"]) == 0
    assert main(["fit", "digits", "--K", "3", "--laps", "2", "--threads", "0", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["pyro-memo: error: --threads 0: give a positive number of threads"]


def test_a_much_slower_count_is_measured_rarely(two_threads):
    """Two threads ten times slower (beside a busy process) cost at most PROBE_SHARE of the time."""
    with ThreadPolicy(2) as policy:
        used = run_steps(policy, 600, lambda t: 0.01 if t == 2 else 0.001)
    assert policy.choice == 1
    assert used.count(2) <= 3


def test_a_policy_entered_again_keeps_its_measurements(two_threads):
    """A memory-bounded stream shares its policy with each epoch's model building: entering it again (one
    short fit per epoch) keeps the choice measured so far, and only the outermost exit restores torch's
    setting."""
    with ThreadPolicy(2) as policy:
        for _ in range(10):  # ten model buildings of four local steps each
            with policy:
                run_steps(policy, 4, lambda t: 0.006 if t == 2 else 0.001)
            assert torch.get_num_threads() == policy.choice
        assert policy.choice == 1 and policy.history
    assert torch.get_num_threads() == 2


def test_a_memory_bounded_stream_shares_one_policy_across_epochs(two_threads):
    """Every epoch's model building runs under the stream's one policy, which ends with a choice measured over
    the epochs (each epoch alone is too short to measure), and the fit restores torch's setting."""
    x = np.random.default_rng(0).normal(size=(1200, 2))
    stream = pm.MemoryBoundedVB(pm.Gaussian.from_data(x), 3, 600, 100, laps=4, threads=2)
    fit = stream.fit(x)
    assert len(fit.epochs) == 12
    assert stream.thread_policy.history  # measured and decided across epochs
    assert torch.get_num_threads() == 2
