"""The thread policy: how many intra-op threads a fit's local steps run with.

A memoized local step on a batch of about a thousand items is many small kernels. Torch's intra-op
pool helps them on an idle machine, but when another process holds a core the pool's threads wait
on each other at every kernel, and two threads run a lap up to three times slower than one
(``benchmarks/bench_threads.py``). No rule on the kernel sizes alone can know whether the cores are
free, so the policy measures: it times the local step with one thread and with the most it may use,
keeps the faster, and measures again from time to time, as the load of the machine changes.

:class:`ThreadPolicy` is entered for the whole of a fit (the thread count is restored afterwards)
and wraps each local step in :meth:`ThreadPolicy.step`. Every driver does this (see
:class:`~pyro_memo.engine.Driver`), so every model has it; ``threads=1`` turns it off.
"""

import time
from collections import deque
from contextlib import contextmanager

import torch

#: local steps between the re-measurements of a choice that held (doubling to :data:`MAX_INTERVAL`)
FIRST_INTERVAL = 16
MAX_INTERVAL = 256
#: re-measuring the losing count may cost at most this share of the time between re-measurements
PROBE_SHARE = 0.02


def check_threads(threads):
    """``threads`` if it is ``None`` or a positive integer, else one clear error."""
    if threads is None:
        return None
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be a positive integer or None (torch's setting); got {threads!r}")
    return threads


class ThreadPolicy:
    """Chooses between one thread and ``threads`` for the local steps of a fit, by timing them.

    Until the first choice the fit runs on one thread. The first local step is a warm-up; then each
    candidate runs ``probes`` steps (more threads stop after one step slower than all of one thread's)
    and the one with the lower mean time is kept. The kept candidate's own times are tracked as it runs; the other is
    timed again after an interval that doubles each time the choice holds (from :data:`FIRST_INTERVAL`
    to :data:`MAX_INTERVAL` steps) and restarts when it changes: one step, or ``probes`` steps when the
    first is not slower than all of the choice's recent steps; and never sooner than when that one step
    costs :data:`PROBE_SHARE` of the interval's time, unless the choice's own last ``probes`` steps all
    took twice as long as when it was chosen (the load changed), which measures again at once. The
    losing count costs about 2% of the time.

    :param threads: the most intra-op threads to use; ``None`` (default) takes torch's setting when
        the fit starts (``torch.get_num_threads()``: the number of cores, or ``OMP_NUM_THREADS``).
        ``1`` runs single-threaded and measures nothing.
    :param int probes: timed steps per candidate in each measurement.
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
        most = self.threads or self._saved
        self.candidates = (1,) if most == 1 else (1, most)
        self._times = {t: deque(maxlen=self.probes) for t in self.candidates}
        self._warm = False
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
            short = [t for t in self.candidates if len(self._times[t]) < self.probes]
            if short and not self._hopeless(short[0]):
                return short[0]
            self._decide()
        return self.choice

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
        for t in self.candidates:
            if t != best:
                self._times[t].clear()

    @contextmanager
    def step(self):
        """Run one local step (the ``with`` body) under the policy's thread count and time it."""
        threads = self._next()
        if threads != torch.get_num_threads():
            torch.set_num_threads(threads)
        start = time.perf_counter()
        yield threads
        seconds = time.perf_counter() - start
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
