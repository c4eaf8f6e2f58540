"""Chunked out-of-core arrays as fixed batches: zarr arrays (Miles et al., zarr) and dask arrays, whose
chunks along the first axis are the batches by default.

Both read one batch at a time, so a lap over an array larger than memory holds one batch (plus the
memo), and both are *portable* (:attr:`~pyro_memo.data.BatchSource.portable`): a Dask executor
reads each batch on the worker that owns it, from the array's store, never through the driver.
"""

import os

import numpy as np

from .batch_source import BatchSource, _bounds

__all__ = ["DaskArrayBatches", "ZarrBatches", "is_dask_array", "is_zarr_array"]


def is_zarr_array(data):
    """Whether ``data`` is a ``zarr`` array (checked without importing zarr)."""
    return type(data).__module__.startswith("zarr") and hasattr(data, "chunks") and hasattr(data, "oindex")


def is_dask_array(data):
    """Whether ``data`` is a ``dask.array.Array`` (checked without importing dask)."""
    return type(data).__module__.startswith("dask.array") and hasattr(data, "blocks")


def _check_2d(shape, what):
    if len(shape) != 2:
        raise ValueError(f"{what}: expected a 2-D (N, D) array; got shape {tuple(shape)}")


def _chunk_bounds(chunk_sizes):
    return np.concatenate([[0], np.cumsum(chunk_sizes)]).astype(np.int64)


class ZarrBatches(BatchSource):
    """Row batches of a 2-D zarr array, read from its store batch by batch.

    :param data: a ``zarr`` array, or the path of one (a ``.zarr`` directory, opened read-only).
    :param int num_batches: ``B`` equal row ranges; ``None`` (default): one batch per chunk of rows.
    """

    portable = True

    def __init__(self, data, num_batches=None):
        if isinstance(data, (str, os.PathLike)):
            try:
                import zarr
            except ImportError:
                raise ImportError("reading a .zarr array needs zarr: pip install zarr") from None
            try:
                data = zarr.open_array(os.fspath(data), mode="r")
            except Exception as err:
                raise ValueError(f"{os.fspath(data)}: not a zarr array ({err})") from None
        _check_2d(data.shape, "zarr array")
        self.array = data
        self.num_items = int(data.shape[0])
        if num_batches is None and self.num_items > 0:  # no rows: _bounds names them (torch.cat's raw error later)
            self._bounds = _chunk_bounds([min(data.chunks[0], self.num_items - lo)
                                          for lo in range(0, self.num_items, data.chunks[0])])
        else:
            self._bounds = _bounds(self.num_items, num_batches)
        self.num_batches = len(self._bounds) - 1

    def batch(self, b):
        return np.asarray(self.array[int(self._bounds[b]):int(self._bounds[b + 1])])

    def take(self, rows):
        """The rows ``rows`` (sorted indices into the whole array), read without reading the rest."""
        return np.asarray(self.array.oindex[np.asarray(rows, dtype=np.int64), :])


class DaskArrayBatches(BatchSource):
    """Batches of a 2-D dask array: its chunks of rows (one batch per non-empty block along the first axis),
    each computed when read (on a Dask executor, on the worker that owns the batch).

    :param data: a ``dask.array.Array`` of shape ``(N, D)``; rechunk it along the first axis to
        choose the batches (``data.rechunk({0: rows, 1: -1})``), or give ``num_batches``.
    :param int num_batches: ``B`` equal row ranges (the array rechunked to them); ``None`` (default): one batch
        per block of rows, blocks of no rows (a filtered array's) left out.
    """

    portable = True

    def __init__(self, data, num_batches=None):
        _check_2d(data.shape, "dask array")
        if any(n != n for n in data.shape):  # unknown (NaN) sizes
            raise ValueError("the dask array has unknown chunk sizes; call compute_chunk_sizes() first")
        self.num_items = int(data.shape[0])
        rows = _row_chunks(data.chunks[0], self.num_items, num_batches)
        self.array = data.rechunk({0: rows, 1: -1}) if rows != data.chunks[0] or len(data.chunks[1]) > 1 else data
        self._bounds = _chunk_bounds(self.array.chunks[0])
        self.num_batches = len(self.array.chunks[0])

    def batch(self, b):
        return np.asarray(self.array.blocks[int(b)].compute(scheduler="sync"))


def _row_chunks(chunks, n, num_batches):
    """The row chunks of a dask array's batches: ``num_batches`` near-equal ones (``None``: ``chunks`` without
    the empty ones, each of which was a batch of no items that failed the fit's first lap).

    :raises ValueError: for an empty array or a ``num_batches`` that is not a whole number in ``[1, N]``.
    """
    if num_batches is not None or n == 0:
        return tuple(int(c) for c in np.diff(_bounds(n, 1 if num_batches is None else num_batches)))
    return tuple(c for c in chunks if c)
