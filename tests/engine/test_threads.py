"""The thread policy: it keeps the faster of one thread and more (the cores other work left free, where
the load can be read), follows a change of load, restores torch's setting, and never changes what a fit
computes."""

import os
import time

import numpy as np
import pytest
import torch

import pyro_memo as pm
from pyro_memo.cli import main
from pyro_memo.engine import ThreadPolicy
from pyro_memo.engine import threads as thread_module
from pyro_memo.engine.threads import FIRST_INTERVAL, LOAD_WINDOW, LoadMeter, check_threads

REAL_CORE_TIMES = thread_module.core_times
REAL_USABLE_CORES = thread_module.usable_cores


@pytest.fixture(autouse=True)
def unmetered(monkeypatch):
    """The timing tests below run where the load cannot be read (the machine's real load, other test
    workers included, would decide what they time); the load tests set their own."""
    monkeypatch.setattr(thread_module, "core_times", lambda: None)
    monkeypatch.setattr(thread_module, "usable_cores", lambda: 64)  # a 1-core runner still times 2 threads


class FakeLoad:
    """``core_times`` of ``cpus`` cores of which other work keeps ``others`` busy, this process's own CPU
    time (``process_time``) counted as busy too, on the policy's clock (the :class:`VirtualClock` where a
    test runs one, else the real one)."""

    def __init__(self, cpus, others):
        self.cpus, self.others = cpus, others
        self.start = self.last = thread_module.time.perf_counter()
        self.other_seconds = 0.0

    def __call__(self):
        now = thread_module.time.perf_counter()
        self.other_seconds += self.others * (now - self.last)
        self.last = now
        wall = now - self.start
        busy = 100 * (thread_module.time.process_time() + self.other_seconds)
        return busy, 100 * self.cpus * wall, self.cpus


class VirtualClock:
    """The thread module's clock in the timing tests: a step takes exactly the seconds its test gives it
    (:func:`run_steps` advances this clock instead of sleeping), so what the policy measures does not
    depend on how busy the machine running the tests is (a sleep of 1 ms can take 3 on a loaded one). The
    process itself does no work (``process_time`` stays 0): other work alone keeps the cores busy."""

    def __init__(self):
        self.now = 1000.0

    def perf_counter(self):
        return self.now

    def process_time(self):
        return 0.0

    def sleep(self, seconds):
        self.now += seconds


@pytest.fixture
def clock(monkeypatch):
    virtual = VirtualClock()
    monkeypatch.setattr(thread_module, "time", virtual)
    return virtual


@pytest.fixture
def load(monkeypatch):
    def set_load(cpus, others):
        fake = FakeLoad(cpus, others)
        monkeypatch.setattr(thread_module, "core_times", fake)
        return fake
    return set_load


@pytest.fixture
def two_threads():
    saved = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(saved)


def run_steps(policy, steps, seconds_at):
    """Drive ``steps`` local steps whose duration depends on the thread count they run with, on the
    :class:`VirtualClock` (the ``clock`` fixture)."""
    assert isinstance(thread_module.time, VirtualClock), "timing tests run on the virtual clock"
    used = []
    for _ in range(steps):
        with policy.step() as threads:
            assert threads == torch.get_num_threads()
            thread_module.time.sleep(seconds_at(threads))
        used.append(threads)
    return used


@pytest.mark.parametrize("slow", [1, 2])
def test_policy_keeps_the_faster_count(clock, two_threads, slow):
    fast = 3 - slow
    with ThreadPolicy(2) as policy:
        used = run_steps(policy, 40, lambda t: 0.006 if t == slow else 0.001)
        assert policy.choice == fast
        assert torch.get_num_threads() == fast
    # after the first measurement only re-measurements run the slow count: a few steps in 40
    assert used[-FIRST_INTERVAL:].count(slow) <= policy.probes
    assert used.count(slow) <= 3 * policy.probes + 1
    assert torch.get_num_threads() == 2


def test_policy_follows_a_change_of_load(clock, two_threads):
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


def test_one_thread_measures_nothing(clock, two_threads):
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


def test_numpy_integers_are_thread_counts():
    assert check_threads(np.int64(2)) == 2 and type(check_threads(np.int64(2))) is int
    x = torch.randn(60, 2, dtype=torch.float64)
    assert pm.MemoizedVB(pm.Gaussian.from_data(x), 2, laps=2, threads=np.int32(1)).fit(x, num_batches=2).elbo_trace


@pytest.mark.parametrize("threads", [None, 10**5, 2**40])
def test_more_threads_than_the_usable_cores_are_never_started(monkeypatch, threads):
    # where the load cannot be read (macOS, Windows) only the cores cap the wider count: 100,000 OpenMP
    # threads crashed the process
    monkeypatch.setattr(thread_module, "usable_cores", lambda: 3)
    saved = torch.get_num_threads()
    torch.set_num_threads(4)
    try:
        with ThreadPolicy(threads) as policy:
            assert policy.most == 3 and policy.candidates == (1, 3)
        assert torch.get_num_threads() == 4
    finally:
        torch.set_num_threads(saved)


def test_usable_cores_are_the_processes_cpus():
    expected = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert REAL_USABLE_CORES() == expected >= 1


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


def test_cli_threads_are_capped_at_the_usable_cores(monkeypatch):
    from pyro_memo.cli.common import thread_limit

    monkeypatch.setattr(thread_module, "usable_cores", lambda: 1)
    saved = torch.get_num_threads()
    with thread_limit(10**5):
        assert torch.get_num_threads() == 1
    with thread_limit(99999999999):  # past a C int: torch raised "Overflow when unpacking long"
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == saved


def test_a_much_slower_count_is_measured_rarely(clock, two_threads):
    """Two threads ten times slower (beside a busy process) cost at most PROBE_SHARE of the time."""
    with ThreadPolicy(2) as policy:
        used = run_steps(policy, 600, lambda t: 0.01 if t == 2 else 0.001)
    assert policy.choice == 1
    assert used.count(2) <= 3


def test_a_policy_entered_again_keeps_its_measurements(clock, two_threads):
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


def test_core_times_reads_the_cores_this_process_may_use():
    """Linux's /proc/stat, summed over this process's CPUs: busy ticks within the total, which grows."""
    first = REAL_CORE_TIMES()
    if not os.path.exists("/proc/stat"):
        assert first is None
        return
    time.sleep(0.05)
    busy, total, cpus = REAL_CORE_TIMES()
    assert cpus == len(os.sched_getaffinity(0))
    assert 0 <= busy <= total and first[0] <= busy and first[1] < total


@pytest.mark.parametrize("cpus, others, free", [(2, 1.0, 1.0), (2, 0.0, 2.0), (4, 1.5, 2.5), (2, 3.0, 0.0)])
def test_the_meter_counts_the_cores_other_work_held(load, cpus, others, free):
    """Other work's share of the cores over the window, this process's own CPU time left out: the meter
    spins the CPU itself for part of the window, which must not count as other work."""
    load(cpus, others)
    meter = LoadMeter()
    end = time.perf_counter() + LOAD_WINDOW
    while time.perf_counter() < end:  # this process busy on one core for the whole window
        pass
    assert meter.wait() == 0
    assert meter.free_cores() == pytest.approx(free, abs=0.1)


def test_a_core_held_by_other_work_is_not_timed(clock, two_threads, load):
    """Beside a process holding one of two cores, two threads (twenty times slower here) are never run:
    the policy stays on one thread and pays for no probe."""
    load(2, 1.0)
    with ThreadPolicy(2) as policy:
        used = run_steps(policy, 300, lambda t: 0.02 if t == 2 else 0.001)
        assert torch.get_num_threads() == 1
    assert used.count(2) == 0 and policy.choice == 1 and policy.held >= 1


@pytest.mark.parametrize("others, timed", [(0.0, 2), (0.4, 2), (0.6, None)])
def test_more_threads_are_timed_on_free_cores(clock, two_threads, load, others, timed):
    """On two cores, two threads are timed (and kept, being faster here) while other work holds less than
    half a core."""
    load(2, others)
    with ThreadPolicy(2) as policy:
        used = run_steps(policy, 150, lambda t: 0.001 if t == 2 else 0.003)
    assert policy.choice == (timed or 1)
    assert (2 in used) == (timed is not None)


def test_the_wider_count_is_the_cores_left_free(clock, load):
    """On four cores with one held by other work, the policy times three threads, not four."""
    saved = torch.get_num_threads()
    load(4, 1.0)
    try:
        torch.set_num_threads(4)
        with ThreadPolicy() as policy:
            used = run_steps(policy, 150, lambda t: 0.001 if t > 1 else 0.003)
        assert set(used) == {1, 3} and policy.choice == 3
    finally:
        torch.set_num_threads(saved)


def test_more_threads_are_timed_once_the_other_work_stops(clock, two_threads, load):
    fake = load(2, 1.0)
    with ThreadPolicy(2) as policy:
        used = run_steps(policy, 150, lambda t: 0.001 if t == 2 else 0.003)
        assert 2 not in used and policy.choice == 1
        fake.others = 0.0
        run_steps(policy, 150 + FIRST_INTERVAL, lambda t: 0.001 if t == 2 else 0.003)
        assert policy.choice == 2


@pytest.mark.parametrize("case", range(40))
def test_only_the_free_cores_are_ever_timed(clock, load, case):
    """Over random machines (cores, other work's load, the cap): the counts run are one thread and, only
    when at least two cores are free, the free cores up to the cap; never more."""
    rng = np.random.default_rng(case)
    cpus = int(rng.integers(2, 9))
    others = float(rng.uniform(0.0, cpus))
    most = int(rng.integers(2, cpus + 1))
    wide = min(most, max(1, int(cpus - others + 0.5)))
    saved = torch.get_num_threads()
    load(cpus, others)
    try:
        torch.set_num_threads(most)
        with ThreadPolicy() as policy:
            used = run_steps(policy, 200, lambda t: 0.001 if t > 1 else 0.002)
    finally:
        torch.set_num_threads(saved)
    assert set(used) == ({1} if wide == 1 else {1, wide})
    assert policy.choice == wide and (policy.held > 0) == (wide == 1)
