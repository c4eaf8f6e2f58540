"""Fixed data batches for memoized inference: in memory, on disk, or user-made.

Every source splits the data into ``num_batches`` fixed batches once; memoized
inference caches one summary per batch, so batch ``b`` must hold the same items on every
lap. Sources return raw arrays; the family validates and converts them.
"""

import mmap
import numbers
import os

import numpy as np
import torch

from ..checks import check_own_batch_count
from .batch_source import BatchSource, _bounds
from .chunked import DaskArrayBatches, ZarrBatches, is_dask_array, is_zarr_array
from .datasets import check_numeric_dtype, load_dataset


class ArrayBatches(BatchSource):
    """Batches of an in-memory tensor or array: contiguous slices, optionally of a fixed
    random permutation (``shuffle_seed``) so each batch mixes the whole dataset.

    :param data: ``(N, D)`` torch tensor or numpy array.
    :param int num_batches: ``B``.
    :param int shuffle_seed: if given, permute items once with this seed before slicing (a whole number in
        ``[0, 2**63 - 1]`` or a numpy generator, ``pyro_memo.checks.as_seed``).
    :raises ValueError: naming ``shuffle_seed`` for a negative, fractional or non-numeric seed.
    """

    held = True

    def __init__(self, data, num_batches, shuffle_seed=None):
        self.data = data
        self.num_items = int(data.shape[0])
        self._bounds = _bounds(self.num_items, num_batches)  # a whole number in [1, N]
        self.num_batches = int(num_batches)
        self._perm = None
        self._views = {}
        if shuffle_seed is not None:
            from ..checks import as_seed

            perm = np.random.default_rng(as_seed(shuffle_seed, "shuffle_seed")).permutation(self.num_items)
            self._perm = torch.as_tensor(perm) if torch.is_tensor(data) else perm

    def indices(self, b):
        """Row indices of batch ``b`` in the original data."""
        lo, hi = self._bounds[b], self._bounds[b + 1]
        if self._perm is None:
            return torch.arange(lo, hi)
        return torch.as_tensor(self._perm[lo:hi])

    def batch(self, b):
        """Batch ``b``: a slice of the data, the same view object at every call (so the products a fit
        keeps for it are found again, :data:`~pyro_memo.families.PRODUCT_CACHE`), the data
        themselves for a single batch; a fresh gather of the permuted rows with ``shuffle_seed``."""
        lo, hi = self._bounds[b], self._bounds[b + 1]
        if self._perm is not None:
            return self.data[self._perm[lo:hi]]
        if hi - lo == self.num_items:
            return self.data
        view = self._views.get(b)
        if view is None:
            view = self._views[b] = self.data[lo:hi]
        return view


class IndexBatches(BatchSource):
    """Batches given as index sets into ``data`` (e.g. the subsample indices a Pyro model's
    data plate is called with).

    The sets must partition the items ``range(N)``: each item in exactly one batch. A memoized fit's
    objective is the sum of its batches' terms, so an item left out would be silently dropped from the
    fit and one given twice counted twice, and the fit's ELBO would not be the data's.

    :raises ValueError: for no sets, ids that are not whole numbers or lie outside ``[0, N)``, or sets that
        leave items out or repeat them (saying how many).
    """

    held = True

    def __init__(self, data, index_sets):
        from ..checks import as_index_tensor

        self.data = data
        n = int(data.shape[0])
        sets = list(index_sets)
        if not sets:
            raise ValueError("batches: no index sets given; pass a list of index arrays partitioning range(N)")
        self.index_sets = [as_index_tensor(torch.as_tensor(i).reshape(-1) if np.ndim(i) == 0 else i, n,
                                           f"batches[{k}] (indices into the {n} data items)")
                           for k, i in enumerate(sets)]
        for k, i in enumerate(self.index_sets):
            if i.dim() != 1:
                raise ValueError(f"batches[{k}] must be a 1-D array of item indices; got shape {tuple(i.shape)}")
        uses = torch.bincount(torch.cat(self.index_sets), minlength=n) if n else torch.zeros(0, dtype=torch.long)
        missing, repeated = int((uses == 0).sum()), int((uses > 1).sum())
        if missing or repeated:
            problems = ([f"{missing} of the {n} items are in no batch (first {int((uses == 0).nonzero()[0])})"]
                        if missing else []) + \
                       ([f"{repeated} are in more than one (first {int((uses > 1).nonzero()[0])})"] if repeated else [])
            raise ValueError(f"batches must partition the data's items range({n}), each item in exactly one batch: "
                             f"{'; '.join(problems)}; a memoized fit would drop or double-count them")
        self.num_batches = len(self.index_sets)
        self.num_items = n

    def batch(self, b):
        return self.data[self.index_sets[b]]


class ListBatches(BatchSource):
    """A sequence of ready-made batches (arrays, tensors or memory-mapped arrays)."""

    held = True

    def __init__(self, batches):
        self.batches = list(batches)
        if not self.batches:
            raise ValueError("the iterable of batches is empty")
        self.num_batches = len(self.batches)
        for b, batch in enumerate(self.batches):
            if np.ndim(batch) == 0:  # a number or a string: no items to count (a dict gives its keys)
                raise ValueError(f"each batch must be an array of items (rows); batch {b + 1} of {self.num_batches} "
                                 f"is a {type(batch).__name__}: {batch!r:.40}")
        widths = {tuple(np.shape(b)[1:]) for b in self.batches}
        if len(widths) != 1:
            raise ValueError(f"all batches must have the same item shape; found {sorted(widths)}")
        self.num_items = int(sum(np.shape(b)[0] for b in self.batches))

    def batch(self, b):
        return self.batches[b]


class FileBatches(BatchSource):
    """Contiguous row batches of an ``(N, D)`` array stored in a file, read from disk
    batch by batch with positioned reads (a Fortran-ordered array's rows through a read-only map).

    Nothing stays mapped, so a lap over a file larger than memory holds one batch at a time
    (resident memory ``O(batch size)``, not ``O(N)``). :meth:`from_npy` opens a ``.npy``
    file; :func:`~pyro_memo.make_batches` also routes memory-mapped arrays (``np.load(path,
    mmap_mode="r")``, ``np.memmap``) here.

    :param str path: the file.
    :param int offset: byte offset of the first row.
    :param dtype: numpy dtype of the entries.
    :param tuple shape: ``(N, D)``.
    :param int num_batches: ``B``.
    :param bool fortran: the array is stored column by column (``np.save`` of a Fortran-ordered array).
    """

    portable = True

    def __init__(self, path, offset, dtype, shape, num_batches, fortran=False):
        if len(shape) != 2:
            raise ValueError(f"{path}: expected a 2-D (N, D) array; got shape {tuple(shape)}")
        self.path = os.fspath(path)
        self._offset = int(offset)
        self.dtype = np.dtype(dtype)
        if self.dtype.hasobject:
            raise ValueError(f"{path}: object arrays are not supported")
        check_numeric_dtype(self.dtype, path)
        self.fortran = bool(fortran)
        self.shape = tuple(int(n) for n in shape)
        self.num_items = self.shape[0]
        needed = self._offset + self.num_items * (self.shape[1] * self.dtype.itemsize)
        size = os.path.getsize(self.path)
        if size < needed:
            raise ValueError(f"{path}: truncated: an array of shape {self.shape} and dtype {self.dtype} needs "
                             f"{needed} bytes, the file holds {size}")
        self._bounds = _bounds(self.num_items, num_batches)  # a whole number in [1, N]
        self.num_batches = int(num_batches)

    @classmethod
    def from_npy(cls, path, num_batches):
        """Batches of the 2-D array in the ``.npy`` file ``path`` (C- or Fortran-ordered)."""
        try:
            with open(path, "rb") as fh:
                version = np.lib.format.read_magic(fh)
                read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
                    np.lib.format.read_array_header_2_0
                shape, fortran, dtype = read_header(fh)
                offset = fh.tell()
        except ValueError as err:
            raise ValueError(f"{path}: not a .npy array file ({err})") from None
        return cls(path, offset, dtype, shape, num_batches, fortran=fortran)

    @classmethod
    def from_memmap(cls, array, num_batches):
        """Batches of a C-contiguous 2-D ``np.memmap`` (read from its file, not through the map)."""
        if array.ndim != 2 or not array.flags.c_contiguous or array.filename is None:
            raise ValueError("a memory-mapped array must be a C-contiguous 2-D view of a whole file region")
        return cls(array.filename, array.offset, array.dtype, array.shape, num_batches)

    def take(self, rows):
        """The rows ``rows`` (sorted indices into the whole array), read without reading the rest."""
        view = self._map()
        try:
            return np.array(view[np.asarray(rows, dtype=np.int64)], order="C")
        finally:
            del view

    def _map(self):
        return np.memmap(self.path, dtype=self.dtype, mode="r", offset=self._offset, shape=self.shape,
                         order="F" if self.fortran else "C")

    def _rows_text(self, b):
        return f"{super()._rows_text(b)} of {self.path}"

    def batch(self, b):
        lo, hi = int(self._bounds[b]), int(self._bounds[b + 1])
        if self.fortran:  # each row is strided across the columns: copied out of a map, as take does
            return self.take(np.arange(lo, hi))
        width = self.shape[1]
        offset = self._offset + lo * width * self.dtype.itemsize
        rows = np.fromfile(self.path, dtype=self.dtype, count=(hi - lo) * width, offset=offset)
        return rows.reshape(hi - lo, width)


def random_parts(num_items, num_batches, seed=0):
    """A fixed random partition of ``num_items`` items (documents, groups, nodes) into ``num_batches``
    sorted index arrays."""
    if isinstance(num_batches, bool) or not isinstance(num_batches, numbers.Integral) \
            or not 1 <= num_batches <= num_items:
        raise ValueError(f"num_batches must be a whole number in [1, {num_items}] (the number of documents, groups "
                         f"or nodes); got {num_batches!r}")
    order = np.random.default_rng(seed).permutation(num_items)
    return [np.sort(part) for part in np.array_split(order, int(num_batches))]


def _is_row(item):
    """Whether a list's first ``item`` is a row of items (at most 1-D), not a batch; a ragged one is a row."""
    try:
        return np.ndim(item) < 2
    except ValueError:
        return True


def _rows_as_array(rows):
    """A list of rows as one numpy array; rows of different lengths are an error that says so."""
    try:
        return np.asarray(rows)
    except ValueError as error:
        lengths = sorted({len(row) for row in rows if hasattr(row, "__len__")})
        if len(lengths) > 1:
            raise ValueError(f"data rows must all have the same length; got rows of lengths {lengths}") from None
        raise ValueError(f"data rows must make an (N, D) array of numbers: {error}") from None


def make_batches(data, num_batches=None, shuffle_seed=None):
    """Wrap ``data`` as a :class:`~pyro_memo.data.BatchSource`.

    :param data: a torch tensor or numpy array, a memory-mapped array or a path to a ``.npy``
        file (both read batch by batch from disk, see :class:`~pyro_memo.data.FileBatches`), a ``.npz`` file (key
        ``x``/``data`` or its only array), a zarr array or the path of one (``.zarr``;
        :class:`~pyro_memo.data.ZarrBatches`), a dask array (:class:`~pyro_memo.data.DaskArrayBatches`), a list of rows
        (an array), an iterable of fixed batches, or a :class:`~pyro_memo.data.BatchSource`; not a scipy sparse matrix
        (:class:`TypeError`).
    :param int num_batches: ``B``; ``None``: one batch, or one per chunk of a zarr or dask array. An iterable of
        batches or a source keeps its own batches: ``None`` or their number, another a :class:`ValueError` (it was
        ignored, silently).
    :param int shuffle_seed: permute in-memory items once before slicing (an array, a tensor, a ``.npz`` file or a
        memory-mapped array read into memory); :class:`ValueError` for data read in their own order (a ``.npy``
        path, a zarr or dask array, an iterable of batches, a source), which ignored it.
    """
    source = _source_of(data, num_batches, shuffle_seed)
    if source is data or isinstance(source, ListBatches):
        check_own_batch_count(source, num_batches)
    if shuffle_seed is not None and (source is data or not isinstance(source, ArrayBatches)):
        raise ValueError(f"shuffle_seed permutes data held in memory; {type(source).__name__} reads its batches in "
                         f"their own order (shuffle the data before writing them, or load them into an array)")
    return source


def _source_of(data, num_batches, shuffle_seed):
    """The :class:`~pyro_memo.data.BatchSource` of :func:`make_batches`."""
    if isinstance(data, BatchSource):
        return data
    if is_zarr_array(data):
        return ZarrBatches(data, num_batches)
    if is_dask_array(data):
        return DaskArrayBatches(data, num_batches)
    if isinstance(data, (str, os.PathLike)) and os.fspath(data).rstrip("/").endswith(".zarr"):
        return ZarrBatches(os.fspath(data).rstrip("/"), num_batches)
    num_batches = 1 if num_batches is None else num_batches
    if isinstance(data, (str, os.PathLike)):
        path = os.fspath(data)
        if path.endswith(".npy"):
            return FileBatches.from_npy(path, num_batches)
        if path.endswith(".npz"):
            x, _, _ = load_dataset(path)
            return ArrayBatches(x, num_batches, shuffle_seed)
        raise ValueError(f"{path}: unsupported data file; use .npy, .npz or .zarr")
    if isinstance(data, np.memmap) and shuffle_seed is None and data.ndim == 2 and data.flags.c_contiguous \
            and isinstance(data.base, mmap.mmap) and data.filename is not None:
        return FileBatches.from_memmap(data, num_batches)
    if type(data).__module__.startswith("scipy.sparse"):
        raise TypeError(f"data is a sparse {type(data).__name__}; the mixture's families need a dense (N, D) array "
                        f"(x.toarray()); the HDP topic model takes sparse counts (pyro_memo.topics.from_counts)")
    if isinstance(data, (list, tuple)) and data and _is_row(data[0]):  # rows, not batches
        data = _rows_as_array(data)
    if torch.is_tensor(data) or isinstance(data, np.ndarray):
        if data.ndim != 2:
            raise ValueError(f"data must be a 2-D (N, D) array; got shape {tuple(data.shape)}")
        return ArrayBatches(data, num_batches, shuffle_seed)
    try:
        batches = list(data)
    except TypeError:
        raise ValueError(f"cannot make batches from {type(data).__name__}") from None
    return ListBatches(batches)
