"""Ctrl-C (SIGINT) and SIGTERM during ``pyro-memo``: a fit stops cleanly at the end of its lap.

While a command runs, the first signal only sets a flag: the fit's per-lap callback sees it and
stops the fit after the lap (and after that lap's checkpoint with ``--save``), the command writes
its summary and JSON for the laps done, and ``pyro-memo`` exits with 130 (SIGINT) or 143
(SIGTERM) after one line saying how to resume. A second signal stops at once
(:class:`KeyboardInterrupt`); checkpoints are written atomically, so the last complete one is kept
(a signal that lands while a file is written takes effect once it is written). Once the command is
stopping at once, or reporting how it ended, further signals are only recorded: it ends with one
message and the exit status of the signal that stopped it (130 or 143).

A terminal's Ctrl-C reaches the whole foreground process group: the worker processes the command
starts (``--workers N``) are started under :func:`kept_from_children`, so they leave SIGINT and
SIGTERM to the command, which stops them when the fit has stopped.
"""

import signal
import sys
import threading
from contextlib import contextmanager

#: exit status after each signal (128 + its number)
EXIT_STATUS = {signal.SIGINT: 130, signal.SIGTERM: 143}


class StopOnSignal:
    """Context manager turning SIGINT / SIGTERM into a stop request (:attr:`requested`).

    The first signal asks the command to stop at the end of its lap; the second raises
    :class:`KeyboardInterrupt` (stop at once); any later one, or any after :meth:`close`, is only
    recorded. On leaving, the previous handlers are put back, unless ``ignore_on_exit`` is set (the
    program ends there): then SIGINT and SIGTERM are ignored from there on, so that signals sent while
    it shuts down (interpreter exit, atexit hooks) change nothing.

    Outside the main thread (where Python cannot install handlers) it does nothing.
    """

    def __init__(self, ignore_on_exit=False):
        self.signum = None
        self.interrupted_by = None
        self.closed = False
        self.ignored = 0
        self.ignore_on_exit = ignore_on_exit
        self._previous = {}

    def __enter__(self):
        try:
            for signum in EXIT_STATUS:
                self._previous[signum] = signal.signal(signum, self._handle)
        except ValueError:  # not the main thread
            pass
        return self

    def __exit__(self, *exc):
        self.close()
        for signum, handler in self._previous.items():
            # ignored, not a Python handler: Python resets those to the default as it shuts down
            signal.signal(signum, signal.SIG_IGN if self.ignore_on_exit else handler)
        return False

    def close(self):
        """From now on signals are only recorded: the command is reporting how it ended."""
        self.closed = True

    def _handle(self, signum, frame):
        if self.closed or self.interrupted_by is not None:
            self.ignored += 1
        elif self.signum is None:
            self.signum = signum
            print(f"pyro-memo: {signal.Signals(signum).name} received: stopping at the end of this lap "
                  f"(send it again to stop at once)", file=sys.stderr, flush=True)
        else:
            self.interrupted_by = signum
            raise KeyboardInterrupt

    @property
    def requested(self):
        """Whether a signal asked the command to stop."""
        return self.signum is not None

    @property
    def exit_status(self):
        """130 or 143 after SIGINT or SIGTERM (the one that stopped the command at once, if one did), 0
        when none came."""
        return EXIT_STATUS.get(self.interrupted_by or self.signum, 0)

    def name(self):
        return signal.Signals(self.signum).name if self.signum is not None else ""


@contextmanager
def kept_from_children():
    """Block SIGINT and SIGTERM in this (the main) thread while it starts processes: the threads it
    starts meanwhile, and the processes they start, inherit the block (across ``exec`` too), so a
    Ctrl-C sent to the process group leaves them running and reaches only this process, whose handler
    (:class:`StopOnSignal`) stops the command cleanly. A signal that arrives meanwhile waits and is
    delivered here when the block ends. Elsewhere than in the main thread of a POSIX system it does
    nothing.

    multiprocessing's resource tracker process, started with the first process or semaphore, unblocks
    both signals in the thread that starts it (whatever their state was): it is started before."""
    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        yield
        return
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, set(EXIT_STATUS))
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
