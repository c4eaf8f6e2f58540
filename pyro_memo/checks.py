"""Argument checks every layer shares: one rule and one message for a positive whole number and a
positive finite number (a truncation ``K``, a number of batches, a concentration, a step size)."""

import math
import numbers


def as_positive_int(value, name):
    """``value`` as an ``int`` if it is a whole number of at least 1 (``3``, ``np.int64(3)``, ``3.0``).

    :raises ValueError: naming ``name`` otherwise (``2.5`` is not truncated, ``True`` is not ``1``).
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not float(value).is_integer() \
            or value < 1:
        raise ValueError(f"{name} must be a positive integer; got {value!r}")
    return int(value)


def as_positive_float(value, name):
    """``value`` as a ``float`` if it is a positive finite number, else :class:`ValueError` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive finite number; got {value!r}")
    return float(value)
