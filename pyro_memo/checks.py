"""Argument checks every layer shares: one rule and one message for a positive whole number, a
positive finite number (a truncation ``K``, a number of batches, a concentration, a step size) and ids
that index a model's nodes, documents or words."""

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


def as_count(value, name):
    """``value`` as an ``int`` if it is a whole number of at least 0 (a number of rounds, where 0 means none).

    :raises ValueError: naming ``name`` otherwise (``-1`` is not 0, ``2.5`` is not truncated, ``True`` is not ``1``).
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not float(value).is_integer() \
            or value < 0:
        raise ValueError(f"{name} must be a non-negative integer; got {value!r}")
    return int(value)


def as_bool(value, name):
    """``value`` as a ``bool`` if it is one (Python's or numpy's), else :class:`ValueError` naming ``name``: a
    string such as ``"no"`` or ``"False"`` is truthy and silently meant yes."""
    import numpy as np

    if isinstance(value, (bool, np.bool_)):  # numpy's type is named bool_ in 1.x, bool in 2.x
        return bool(value)
    raise ValueError(f"{name} must be True or False; got {value!r}")


def check_callback(callback, name="callback"):
    """Raise :class:`ValueError` naming ``name`` unless ``callback`` is ``None`` or callable: a fit calls it after
    its first lap, which then failed with Python's "'int' object is not callable", the lap's work lost."""
    if callback is not None and not callable(callback):
        raise ValueError(f"{name} must be a function callback(lap, elbo, posterior) or None; got "
                         f"{type(callback).__name__} {callback!r:.40}")


def as_positive_float(value, name):
    """``value`` as a ``float`` if it is a positive finite number, else :class:`ValueError` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive finite number; got {value!r}")
    return float(value)


def as_non_negative_float(value, name):
    """``value`` as a ``float`` if it is a finite number of at least 0 (a stopping tolerance ``tol``, where
    0 runs every lap), else :class:`ValueError` naming ``name`` (a negative or NaN ``tol`` never converges)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{name} must be a non-negative finite number; got {value!r}")
    return float(value)


def as_share(value, name):
    """``value`` as a ``float`` if it is a share in (0, 1] (of the items or tokens a move may target), else
    :class:`ValueError` naming ``name``: a share of 0 or below made a move never find a target and one above 1
    meant no limit, both silently."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < value <= 1:
        raise ValueError(f"{name} must be a share in (0, 1]; got {value!r}")
    return float(value)


def as_optional_positive_int(value, name):
    """``None``, or ``value`` as :func:`as_positive_int` reads it (a limit where ``None`` means the default)."""
    return None if value is None else as_positive_int(value, name)


def check_own_batch_count(source, num_batches):
    """Raise :class:`ValueError` naming ``num_batches`` unless it is ``None`` or the number of ``source``'s batches,
    where the data come as fixed batches (a list of batches, a source, a graph's node batches) that keep their own
    number: ``fit([a, b], 5)`` fitted 2 batches, the 5 silently ignored."""
    if num_batches is not None and num_batches != source.num_batches:
        raise ValueError(f"num_batches={num_batches!r}, but the data are {source.num_batches} batches already "
                         f"({type(source).__name__}), which keep their own number: pass num_batches=None or "
                         f"{source.num_batches}, or the data unbatched to cut into {num_batches!r}")


def check_positive_finite(value, name):
    """Raise :class:`ValueError` naming ``name`` unless ``value`` (a number, a numpy or 0-d torch scalar) is
    positive and finite: "``name`` must be positive and finite" (an infinite concentration or prior turns
    a fit's bound into NaN, a string or ``None`` fails in ``float``)."""
    try:
        number = None if isinstance(value, bool) else float(value)
    except (TypeError, ValueError, RuntimeError):
        number = None
    if number is None or not (math.isfinite(number) and number > 0):
        raise ValueError(f"{name} must be positive and finite; got {value!r}")


def as_index_tensor(ids, bound, name):
    """``ids`` (a 1-D array or tensor of whole numbers) as a long tensor, each in ``[0, bound)`` (``bound``
    ``None``: each non-negative): the ids
    of nodes, documents or words a model indexes with, where a negative id would silently wrap
    around to the last one and a fraction be truncated to another.

    :raises ValueError: naming ``name`` for a fraction, NaN, or an id outside ``[0, bound)``.
    """
    import torch

    given = torch.as_tensor(ids)
    if given.is_floating_point() and not bool((given == given.round()).all()):
        raise ValueError(f"{name} must be whole-number ids; found fractions or NaN")
    if given.dtype == torch.bool or given.is_complex():
        raise ValueError(f"{name} must be whole-number ids; got dtype {given.dtype}")
    out = given.long()
    if out.numel() and (int(out.min()) < 0 or bound is not None and int(out.max()) >= bound):
        where = "be non-negative" if bound is None else f"lie in [0, {bound})"
        raise ValueError(f"{name} must {where}; found [{int(out.min())}, {int(out.max())}]")
    return out


def check_device(device, option="device"):
    """Raise a :class:`ValueError` naming ``option`` for a device other than ``cpu`` and ``cuda[:N]``,
    or one torch cannot reach (no CUDA, or ``cuda:N`` beyond the devices); ``None`` (the default)
    and plain ``"cpu"`` pass without importing torch. A string or a :class:`torch.device`."""
    if device is None or isinstance(device, str) and device == "cpu":
        return
    import torch

    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise ValueError(f"{option} {device}: not a torch device; the fits run on cpu or cuda (cuda:N)") from None
    if parsed.type not in ("cpu", "cuda"):
        raise ValueError(f"{option} {device}: the fits run on cpu or cuda (cuda:N); {parsed.type} is not supported")
    if parsed.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"{option} {device}: CUDA is not available on this machine")
    if parsed.type == "cuda" and parsed.index is not None and parsed.index >= torch.cuda.device_count():
        raise ValueError(f"{option} {device}: this machine has {torch.cuda.device_count()} CUDA device(s)")


#: the largest seed every generator a fit seeds takes (torch's ``manual_seed``; the CLI's ``--seed`` bound)
MAX_SEED = 2**63 - 1


def as_seed(seed, name="seed"):
    """``seed`` as an ``int`` in ``[0, 2**63 - 1]``, the seed every fit hands its generators (numpy's
    ``default_rng``, torch's ``manual_seed``): a whole number (Python's or numpy's) is returned as it is,
    so an integer seed gives the same fit as before; a numpy ``Generator`` or ``RandomState`` gives a seed
    drawn from it (scikit-learn's ``check_random_state`` idea: the fit is reproducible from the
    generator's state, and advances it).

    :raises ValueError: naming ``name`` for a negative or too large number, a fraction, a bool, ``None``
        or anything else.
    """
    import numpy as np

    if isinstance(seed, np.random.Generator):
        return int(seed.integers(0, 2**31 - 1))
    if isinstance(seed, np.random.RandomState):
        return int(seed.randint(0, 2**31 - 1))
    whole = isinstance(seed, numbers.Integral) or (isinstance(seed, numbers.Real) and float(seed).is_integer())
    if isinstance(seed, bool) or not whole or not 0 <= int(seed) <= MAX_SEED:
        raise ValueError(f"{name} must be a whole number in [0, 2**63 - 1] or a numpy Generator / RandomState; "
                         f"got {seed!r}")
    return int(seed)


def as_rng(seed, name="seed"):
    """A numpy ``Generator`` from ``seed``: a ``Generator`` itself (as ``np.random.default_rng`` passes it on),
    else ``default_rng`` of :func:`as_seed`'s number, so that a bad seed is a :class:`ValueError` naming
    ``name`` rather than numpy's "expected non-negative integer"."""
    import numpy as np

    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(as_seed(seed, name))


def interrupt_behind(err):
    """The :class:`KeyboardInterrupt` ``err`` is, or was raised while handling (its ``__context__`` chain),
    else ``None``: a writer's clean-up error over a Ctrl-C (``np.savez``'s "Can't close the ZIP file") is
    that Ctrl-C. Here, below every layer and without torch, so that the command line's ``--help`` and the
    file writers share it."""
    seen = set()
    while err is not None and id(err) not in seen:
        if isinstance(err, KeyboardInterrupt):
            return err
        seen.add(id(err))
        err = err.__context__
    return None
