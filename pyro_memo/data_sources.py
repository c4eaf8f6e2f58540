"""Old import path of :mod:`pyro_memo.data.batches` (fixed data batches), kept working."""

from .data.batches import ArrayBatches, BatchSource, FileBatches, IndexBatches, ListBatches, make_batches

__all__ = ["ArrayBatches", "BatchSource", "FileBatches", "IndexBatches", "ListBatches", "make_batches"]
