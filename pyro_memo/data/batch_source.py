"""The batch-source interface: a dataset cut into fixed batches (memoized inference caches one summary per
batch, so batch ``b`` must hold the same items on every lap)."""

import numpy as np


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

    def batch(self, b):
        """The items of batch ``b`` as an ``(n_b, D)`` array or tensor."""
        raise NotImplementedError

    def __len__(self):
        return self.num_batches

    def __iter__(self):
        return (self.batch(b) for b in range(self.num_batches))


def _bounds(n, num_batches):
    if not 1 <= num_batches <= n:
        raise ValueError(f"the number of batches must be between 1 and N = {n}; got {num_batches}")
    return np.linspace(0, n, num_batches + 1).round().astype(np.int64)


