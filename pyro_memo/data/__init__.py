"""Data in and out, with no model knowledge: fixed batches, bag-of-words corpora, array files,
synthetic generators and downloaded datasets (``fetch_*`` downloads once, ``load_*`` reads the cache).
"""

from .batches import ArrayBatches, BatchSource, FileBatches, IndexBatches, ListBatches, make_batches
from .corpus import Corpus, from_counts, read_ldac, split_documents, split_tokens, split_types
from .datasets import BUNDLED, FASHION_MNIST_DIR, load_dataset, load_fashion_mnist
from .files import write_atomically
from .home import DATA_HOME_ENV, DataUnavailableError, get_data_home
from .synthetic import bars_corpus, crp_gaussian_mixture, dp_gaussian_mixture, edge_covariances, toy_patches
from .wikipedia import fetch_wikipedia, load_wikipedia

__all__ = [
    "ArrayBatches",
    "BUNDLED",
    "BatchSource",
    "Corpus",
    "DATA_HOME_ENV",
    "DataUnavailableError",
    "FASHION_MNIST_DIR",
    "FileBatches",
    "IndexBatches",
    "ListBatches",
    "bars_corpus",
    "crp_gaussian_mixture",
    "dp_gaussian_mixture",
    "edge_covariances",
    "fetch_wikipedia",
    "from_counts",
    "get_data_home",
    "load_dataset",
    "load_fashion_mnist",
    "load_wikipedia",
    "make_batches",
    "read_ldac",
    "split_documents",
    "split_tokens",
    "split_types",
    "toy_patches",
    "write_atomically",
]
