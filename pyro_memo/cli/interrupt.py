"""Ctrl-C (SIGINT) and SIGTERM during ``pyro-memo``: a fit stops cleanly at the end of its lap.

While a command runs, the first signal only sets a flag: the fit's per-lap callback sees it and
stops the fit after the lap (and after that lap's checkpoint with ``--save``), the command writes
its summary and JSON for the laps done, and ``pyro-memo`` exits with 130 (SIGINT) or 143
(SIGTERM) after one line saying how to resume. A second signal stops at once
(:class:`KeyboardInterrupt`); checkpoints are written atomically, so the last complete one is kept.
"""

import signal
import sys

#: exit status after each signal (128 + its number)
EXIT_STATUS = {signal.SIGINT: 130, signal.SIGTERM: 143}


class StopOnSignal:
    """Context manager turning SIGINT / SIGTERM into a stop request (:attr:`requested`).

    Outside the main thread (where Python cannot install handlers) it does nothing.
    """

    def __init__(self):
        self.signum = None
        self._previous = {}

    def __enter__(self):
        try:
            self._previous = {s: signal.signal(s, self._handle) for s in EXIT_STATUS}
        except ValueError:  # not the main thread
            self._previous = {}
        return self

    def __exit__(self, *exc):
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        return False

    def _handle(self, signum, frame):
        if self.signum is not None:
            raise KeyboardInterrupt
        self.signum = signum
        print(f"pyro-memo: {signal.Signals(signum).name} received: stopping at the end of this lap "
              f"(send it again to stop at once)", file=sys.stderr, flush=True)

    @property
    def requested(self):
        """Whether a signal asked the command to stop."""
        return self.signum is not None

    @property
    def exit_status(self):
        """130 after SIGINT, 143 after SIGTERM, 0 when none came."""
        return EXIT_STATUS.get(self.signum, 0)

    def name(self):
        return signal.Signals(self.signum).name if self.signum is not None else ""
