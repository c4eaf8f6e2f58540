"""Data in and out, with no model knowledge: fixed batches, bag-of-words corpora, graphs, array files,
synthetic generators and downloaded datasets (``fetch_*`` downloads once, ``load_*`` reads the cache).
"""

from .batches import ArrayBatches, BatchSource, FileBatches, IndexBatches, ListBatches, make_batches
from .chunked import DaskArrayBatches, ZarrBatches
from .corpus import Corpus, from_counts, read_ldac, split_documents, split_tokens, split_types
from .corpus_shards import CorpusShards, is_corpus_shards, shard_ldac, write_corpus_shards
from .datasets import BUNDLED, FASHION_MNIST_DIR, load_dataset, load_digits, load_fashion_mnist
from .files import write_atomically
from .graphs import (
    NETWORKX_GRAPHS,
    Graph,
    assortative_graph,
    assortative_link_probability,
    from_adjacency,
    from_networkx,
    load_networkx_graph,
    read_edge_list,
    read_graph_tool,
    read_npz,
    split_pairs,
)
from .home import DATA_HOME_ENV, DataUnavailableError, get_data_home
from .pixels import COLOR_PHOTOGRAPHS, color_tiles, fashion_pixel_groups, load_color_photograph, pixel_features
from .synthetic import bars_corpus, crp_gaussian_mixture, dp_gaussian_mixture, edge_covariances, lda_corpus, toy_patches
from .wikipedia import fetch_wikipedia, load_wikipedia

__all__ = [
    "ArrayBatches",
    "BUNDLED",
    "COLOR_PHOTOGRAPHS",
    "BatchSource",
    "Corpus",
    "CorpusShards",
    "DaskArrayBatches",
    "DATA_HOME_ENV",
    "DataUnavailableError",
    "color_tiles",
    "fashion_pixel_groups",
    "load_color_photograph",
    "pixel_features",
    "FASHION_MNIST_DIR",
    "FileBatches",
    "Graph",
    "IndexBatches",
    "ListBatches",
    "NETWORKX_GRAPHS",
    "ZarrBatches",
    "assortative_graph",
    "assortative_link_probability",
    "bars_corpus",
    "lda_corpus",
    "crp_gaussian_mixture",
    "dp_gaussian_mixture",
    "edge_covariances",
    "fetch_wikipedia",
    "from_adjacency",
    "from_counts",
    "from_networkx",
    "get_data_home",
    "is_corpus_shards",
    "load_dataset",
    "load_digits",
    "load_fashion_mnist",
    "load_networkx_graph",
    "load_wikipedia",
    "make_batches",
    "read_edge_list",
    "read_graph_tool",
    "read_ldac",
    "read_npz",
    "shard_ldac",
    "split_documents",
    "split_pairs",
    "split_tokens",
    "split_types",
    "toy_patches",
    "write_atomically",
    "write_corpus_shards",
]
