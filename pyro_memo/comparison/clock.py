"""The clock every comparison reads its time from: ``now()`` (wall time, seconds). Tests replace
:func:`now` to test time budgets without depending on how busy the machine is."""

import time


def now():
    """Seconds from an arbitrary start (``time.perf_counter``)."""
    return time.perf_counter()
