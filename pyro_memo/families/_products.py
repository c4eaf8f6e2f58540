"""Items' products kept across the local steps of a fit that read the same batch.

A family's per-item products (:meth:`~pyro_memo.ConjugateFamily.item_products`: for the
zero-mean Gaussian the packed :math:`x_n x_n^T`, :math:`D(D+1)/2` numbers per item) depend on the items
alone, yet a memoized fit used to form them again at every visit of a batch, and again in a delete
move's visit of the same batch and at every iteration of a birth's fresh mixture on its subsample: a
fifth of a birth/merge/delete fit on the toy data (``benchmarks/bench_moves_bnpy.py``).

:data:`~pyro_memo.families.PRODUCT_CACHE` keeps them while a fit runs
(:meth:`ProductCache.scope <pyro_memo.families.ProductCache.scope>`, which the drivers enter), keyed
by the items' tensor itself: an entry is read back only for the same tensor object at the same
version (an in-place change of the tensor, or of the tensor it views, bumps the version and the
products are formed again), and it is dropped when that tensor is freed. So batches that are formed
anew at every visit (read from disk, gathered by index) only share their products within one batch
step, and in-memory batches, which :class:`~pyro_memo.data.ArrayBatches` hands out as the same views at
every lap, keep theirs across laps when the local step takes them in one chunk
(:meth:`~pyro_memo.DPMixturePosterior.chunk_rows`: 5,592 items at K = D = 25; a batch of more is
split into chunks formed anew at every visit). Entries are kept first come, first kept, up to
``ProductCache.max_bytes``, and all are dropped when the outermost fit ends.
"""

import contextlib
import threading
import weakref

#: default budget of :data:`~pyro_memo.families.PRODUCT_CACHE`: 512 MiB (the toy data's 100,000 25-dimensional items
#: take 248 MiB, 13 times the data; 1,000,000 64-dimensional patches would take 16 GiB)
MAX_BYTES = 512 * 2**20


class ProductCache:
    """Per-tensor products kept within a byte budget while a fit runs (see the module's docstring).

    :param int max_bytes: the most bytes of products kept at once (``0``: none are kept).
    """

    def __init__(self, max_bytes=MAX_BYTES):
        self.max_bytes = int(max_bytes)
        self.nbytes = 0
        self._entries = {}  # (id(items), make) -> (weak reference to items, version, products)
        self._depth = 0
        self._lock = threading.RLock()

    @contextlib.contextmanager
    def scope(self):
        """Keep products while the block runs; drop them all when the outermost block ends (a birth's
        fresh mixture is a fit inside a fit and keeps the outer fit's entries)."""
        with self._lock:
            self._depth += 1
        try:
            yield self
        finally:
            with self._lock:
                self._depth -= 1
                if self._depth == 0:
                    self.clear()

    @property
    def active(self):
        """Whether a fit is running (:meth:`scope`): outside one nothing is kept."""
        return self._depth > 0

    def get(self, items, make, keep=True):
        """``make(items)``, read back when the same tensor at the same version was kept before in
        this fit, else formed and, with ``keep``, kept if the budget allows (a local step keeps a whole
        batch's products; readers such as the statistics of a move's visit only look them up, so a
        chunk view that lives only as long as its loop is never kept). Entries are per ``make`` (a
        module-level function such as ``packed_outer()``), so two kinds of
        products of the same items never stand in for each other."""
        key = (id(items), make)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0]() is items and entry[1] == items._version:
                return entry[2]
        products = make(items)
        if products is None or not keep or not self.active:
            return products
        size = products.element_size() * products.nelement()
        with self._lock:
            if key in self._entries:  # stale: the tensor changed in place since
                self._forget(self._entries[key][0], key)
            if self.active and self.nbytes + size <= self.max_bytes:
                ref = weakref.ref(items, lambda ref, key=key: self._forget(ref, key))
                self._entries[key] = (ref, items._version, products)
                self.nbytes += size
        return products

    def _forget(self, ref, key):
        """Drop the entry of ``key`` if it is still the one of ``ref`` (called when its tensor is freed)."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0] is ref:
                del self._entries[key]
                self.nbytes -= entry[2].element_size() * entry[2].nelement()

    def clear(self):
        """Drop every entry."""
        with self._lock:
            self._entries.clear()
            self.nbytes = 0

    def __len__(self):
        return len(self._entries)


#: the cache the drivers' fits use
PRODUCT_CACHE = ProductCache()
