"""The thread policy: how many intra-op threads a fit's local steps run with.

A memoized local step on a batch of about a thousand items is many small kernels. Torch's intra-op
pool helps them on an idle machine, but when another process holds a core the pool's threads wait
on each other at every kernel, and two threads run a lap up to three times slower than one
(``benchmarks/bench_threads.py``). No rule on the kernel sizes alone can know whether the cores are
free, so the policy measures: it times the local step with one thread and with more, keeps the faster,
and measures again from time to time, as the load of the machine changes.

Timing more threads beside a busy process is itself costly: one such step can take twenty times one
thread's. So where Linux tells how busy the cores are (``/proc/stat``), a :class:`~pyro_memo.engine.threads.LoadMeter`
first counts the cores that other work kept busy since it last looked, and more threads are timed only on the cores left
free: none when one other process holds one of two cores, so the fit stays on one thread and pays
for no probe.

:class:`ThreadPolicy` is entered for the whole of a fit (the thread count is restored afterwards)
and wraps each local step in :meth:`ThreadPolicy.step`. Every driver does this (see
:class:`~pyro_memo.engine.driver.Driver`), so every model has it; ``threads=1`` turns it off.
"""

import math
import numbers
import os
import time
from collections import deque
from contextlib import contextmanager

import torch

#: local steps between the re-measurements of a choice that held (doubling to ``MAX_INTERVAL``)
FIRST_INTERVAL = 16
MAX_INTERVAL = 256
#: re-measuring the losing count may cost at most this share of the time between re-measurements
PROBE_SHARE = 0.02
#: seconds of wall time a :class:`~pyro_memo.engine.threads.LoadMeter` reading spans at least (/proc/stat
#: counts 1/100 s ticks)
LOAD_WINDOW = 0.2


def core_times():
    """``(busy, total, cpus)``: clock ticks since boot summed over the CPUs this process may run on
    (``busy``: user, nice, system, irq, softirq and steal time; ``total`` adds idle and iowait), from
    Linux's ``/proc/stat``, and how many CPUs those are; ``None`` where they cannot be read."""
    try:
        cpus = os.sched_getaffinity(0)
        with open("/proc/stat") as stat:
            lines = stat.readlines()
    except (AttributeError, OSError):
        return None
    busy = total = 0
    for line in lines:
        name, *fields = line.split()
        if name[:3] == "cpu" and name[3:].isdigit() and int(name[3:]) in cpus and len(fields) >= 8:
            ticks = [int(v) for v in fields[:8]]
            busy += sum(ticks) - ticks[3] - ticks[4]
            total += sum(ticks)
    return (busy, total, len(cpus)) if total > 0 else None


class LoadMeter:
    """How many of this process's cores other work left free since the last reading. Other work's share is
    the cores' busy ticks (:func:`core_times`) less this process's own CPU time, per tick of wall time."""

    def __init__(self):
        self._tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self._start = self._read()

    def _read(self):
        times = core_times()
        return None if times is None else (*times, time.process_time(), time.perf_counter())

    @property
    def readable(self):
        return self._start is not None

    def wait(self):
        """Seconds until a reading spans ``LOAD_WINDOW`` (0 when it does)."""
        return max(0.0, LOAD_WINDOW - (time.perf_counter() - self._start[-1]))

    def free_cores(self):
        """The cores other work left free since the last reading (which this one ends), or ``None`` when
        the load cannot be read."""
        now = self._read()
        if now is None or self._start is None:
            self._start = now
            return None
        busy, total, cpus = (now[i] - self._start[i] for i in range(3))
        own = (now[3] - self._start[3]) * self._tick
        self._start = now
        if total <= 0:
            return None
        others = max(0.0, busy - own) / (total / now[2])
        return max(0.0, now[2] - others)


def check_threads(threads):
    """``threads`` as an ``int`` if it is ``None`` or a positive integer (numpy's too), else one clear error."""
    if threads is None:
        return None
    if isinstance(threads, bool) or not isinstance(threads, numbers.Integral) or threads < 1:
        raise ValueError(f"threads must be a positive integer or None (torch's setting); got {threads!r}")
    return int(threads)


def usable_cores():
    """The CPUs this process may run on (its affinity where the system tells it, else the machine's):
    more threads than these only contend, and OpenMP cannot even start a pool of 100,000."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


class ThreadPolicy:
    """Chooses between one thread and more for the local steps of a fit, by timing them.

    * Until the first choice the fit runs on one thread; the first local step is a warm-up.
    * A measurement times ``probes`` steps of each candidate and keeps the one with the lower mean time.
      The candidates are one thread and a wider count: ``threads`` where the load cannot be read, else the cores other
      work left free since the meter last looked (:class:`~pyro_memo.engine.threads.LoadMeter`, a reading of at least
      ``LOAD_WINDOW`` seconds), at most ``threads``. When that is one core, nothing is timed and the meter looks again
      after ``FIRST_INTERVAL`` steps: a busy machine costs no probe.
    * The kept count's own times are tracked as it runs; the other is timed again after an interval that
      doubles each time the choice holds (from ``FIRST_INTERVAL`` to ``MAX_INTERVAL`` steps) and
      restarts when it changes. A re-measurement of more threads stops after one step slower than all of
      the choice's recent steps, and comes no sooner than when that one step costs ``PROBE_SHARE`` of
      the interval's time.
    * When the choice's own last ``probes`` steps all took twice as long as when it was chosen (the load
      changed), it measures again at once.

    :param threads: the most intra-op threads to use; ``None`` (default) takes torch's setting when
        the fit starts (``torch.get_num_threads()``: the number of cores, or ``OMP_NUM_THREADS``).
        ``1`` runs single-threaded and measures nothing.
    :param int probes: timed steps per candidate in each measurement.

    After a fit, ``choice`` is the last choice, ``history`` every choice made and ``held`` how
    many times more threads were not timed because other work held the cores.
    """

    def __init__(self, threads=None, probes=3):
        self.threads = check_threads(threads)
        self.probes = int(probes)
        self.candidates = (1,)
        self.choice = 1
        self._saved = None
        self._depth = 0

    def __enter__(self):
        """Start measuring (from one thread). Entered again while entered, as a driver's fit is inside a
        :class:`~pyro_memo.MemoryBoundedVB` stream that shares its policy, it keeps its measurements."""
        self._depth += 1
        if self._depth > 1:
            return self
        self._saved = torch.get_num_threads()
        self.most = min(self.threads or self._saved, usable_cores())
        self.candidates = (1,) if self.most == 1 else (1, self.most)
        self._times = {t: deque(maxlen=self.probes) for t in self.candidates}
        self._meter = LoadMeter()
        self.held = 0  # measurements of more threads skipped because other work held the cores
        self._warm = False
        self._step_seconds = 0.0
        self._interval = FIRST_INTERVAL
        self._until_probe = 0
        self._decided = None
        self.choice = 1  # until measured: one thread is never the slow surprise
        self.history = []
        torch.set_num_threads(self.choice)
        return self

    def __exit__(self, *exc):
        self._depth -= 1
        if self._depth == 0:
            torch.set_num_threads(self._saved)
        return False

    def _next(self):
        """The thread count of the next step: an unfinished measurement's candidate, else the choice."""
        if len(self.candidates) == 1 or not self._warm:
            return self.choice
        if self._until_probe <= 0:
            short = self._unmeasured()
            if short and short[0] > self.choice and not self._times[short[0]]:  # about to time more threads
                if not self._cores_free():
                    return self.choice
                short = self._unmeasured()
            if short and not self._hopeless(short[0]):
                return short[0]
            self._decide()
        return self.choice

    def _unmeasured(self):
        return [t for t in self.candidates if len(self._times[t]) < self.probes]

    def _cores_free(self):
        """Before timing more threads than the choice: set the wider candidate to the cores other work left
        free (:class:`~pyro_memo.engine.threads.LoadMeter`); ``False`` (time nothing yet) when that is one
        core, or when the meter's reading is still too short, to look again after enough steps."""
        if not self._meter.readable:
            return True
        wait = self._meter.wait()
        if wait > 0:
            self._until_probe = max(1, math.ceil(wait / max(self._step_seconds, 1e-4)))
            return False
        free = self._meter.free_cores()
        if free is None:  # the load could be read when the fit started but no longer: timing alone decides
            return True
        wide = min(self.most, max(1, int(free + 0.5)))
        if wide == 1:
            self.held += 1
            self._until_probe = FIRST_INTERVAL
            return False
        self.candidates = (1, wide)
        self._times.setdefault(wide, deque(maxlen=self.probes))
        return True

    def _hopeless(self, other):
        """A re-measurement of ``other`` stops after one step slower than every step of the choice: on a
        busy machine the losing count then costs one step per interval, not ``probes``."""
        if other == self.choice or not self._times[other] or not self._times[self.choice]:
            return False
        return min(self._times[other]) > max(self._times[self.choice])

    def _decide(self):
        """Keep the faster candidate (lower mean time); measure the other again after the next interval."""
        means = {t: sum(ts) / len(ts) for t, ts in self._times.items() if ts}
        best = min(means, key=means.get)
        self._interval = min(2 * self._interval, MAX_INTERVAL) if best == self.choice else FIRST_INTERVAL
        # a losing count many times slower (two threads beside a busy process) is re-measured less often
        slowdown = max(means.values()) / max(means[best], 1e-12)
        self._interval = max(self._interval, int(slowdown / PROBE_SHARE) if best == self.choice else 0)
        self.choice = best
        self._decided = means[best]
        self.history.append(best)
        self._until_probe = self._interval
        for t, ts in self._times.items():
            if t != best:
                ts.clear()

    @contextmanager
    def step(self):
        """Run one local step (the ``with`` body) under the policy's thread count and time it."""
        threads = self._next()
        if threads != torch.get_num_threads():
            torch.set_num_threads(threads)
        start = time.perf_counter()
        yield threads
        seconds = time.perf_counter() - start
        self._step_seconds = seconds
        if not self._warm:
            self._warm = True
            return
        self._times[threads].append(seconds)
        if threads == self.choice:
            self._until_probe -= 1
            recent = self._times[threads]
            if self._decided is not None and len(recent) == self.probes and min(recent) > 2 * self._decided:
                self._until_probe = 0  # the choice became twice as slow: the load changed, measure again now
        if threads != self.choice and torch.get_num_threads() != self.choice:
            torch.set_num_threads(self.choice)
