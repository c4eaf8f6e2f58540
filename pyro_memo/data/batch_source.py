"""The batch-source interface: a dataset cut into fixed batches (memoized inference caches one summary per
batch, so batch ``b`` must hold the same items on every lap)."""

import hashlib
import numbers

import numpy as np
import torch


class BatchSource:
    """A dataset cut into fixed batches.

    :ivar int num_batches: number of batches ``B``.
    :ivar int num_items: total number of items ``N``.
    """

    num_batches = 0
    num_items = 0
    #: whether a copy of the source is light and reads its batches anywhere (a path, not data in
    #: memory): a Dask executor then reads each batch on a worker (:mod:`pyro_memo.engine.executors`)
    portable = False
    #: whether the batches are held in memory, so that hashing them reads no file and no cluster: a memoized
    #: fit records each batch's ``batch_digest()``, and a resumed one compares them
    held = False

    def batch(self, b):
        """The items of batch ``b`` as an ``(n_b, D)`` array or tensor."""
        raise NotImplementedError

    def describe(self, b):
        """Where batch ``b`` lies, for error messages: ``"batch 3 of 10 (rows 2000 to 2999)"``."""
        rows = self._rows_text(b)
        return f"batch {b + 1} of {self.num_batches}" + (f" ({rows})" if rows else "")

    def first_row(self, b):
        """The data's row that starts batch ``b`` when the batches are contiguous slices of it, else ``None``."""
        bounds = getattr(self, "_bounds", None)
        if bounds is None or getattr(self, "_perm", None) is not None:
            return None
        return int(bounds[b])

    def _rows_text(self, b):
        """Batch ``b``'s rows of the data (contiguous batches), else ``""``."""
        lo = self.first_row(b)
        return "" if lo is None else f"rows {lo} to {int(self._bounds[b + 1]) - 1}"

    def __len__(self):
        return self.num_batches

    def __iter__(self):
        return (self.batch(b) for b in range(self.num_batches))


def _bounds(n, num_batches):
    """The ``num_batches + 1`` row bounds of ``num_batches`` near-equal contiguous batches of ``n`` items;
    :class:`ValueError` unless ``num_batches`` is a whole number in ``[1, n]`` (``2.9`` is not cut to 2,
    nor ``"3"`` read as 3)."""
    if n == 0:
        raise ValueError("the data are empty (N = 0): there is nothing to split into batches")
    if isinstance(num_batches, bool) or not isinstance(num_batches, numbers.Real) \
            or not float(num_batches).is_integer():
        raise ValueError(f"the number of batches must be a whole number between 1 and N = {n}; got {num_batches!r}")
    num_batches = int(num_batches)
    if not 1 <= num_batches <= n:
        raise ValueError(f"the number of batches must be between 1 and N = {n}; got {num_batches}")
    return np.linspace(0, n, num_batches + 1).round().astype(np.int64)




def batch_digest(batch):
    """A 128-bit BLAKE2 digest of a batch's contents (dtype, shape and bytes of its tensors and arrays, and
    its numbers, through tuples and lists), or ``None`` for a batch of another kind: two batches with
    the same digest hold the same items in the same order."""
    digest = hashlib.blake2b(digest_size=16)
    return digest.hexdigest() if _feed(digest, batch) else None


def _feed(digest, value):
    """Add ``value`` to ``digest``; ``False`` if it holds something ``batch_digest()`` cannot read."""
    if torch.is_tensor(value):
        value = value.detach().cpu().contiguous().numpy()
    if isinstance(value, np.ndarray):
        digest.update(f"{value.dtype.str}{value.shape}".encode())
        digest.update(np.ascontiguousarray(value).view(np.uint8).data if value.size else b"")
        return True
    if isinstance(value, (tuple, list)):
        digest.update(f"({len(value)}".encode())
        return all(_feed(digest, item) for item in value)
    if value is None or isinstance(value, numbers.Number):
        digest.update(repr(value).encode())
        return True
    return False
