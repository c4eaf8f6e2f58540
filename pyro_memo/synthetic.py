"""Old import path of :mod:`pyro_memo.data.synthetic` (synthetic data generators), kept working."""

from .data.synthetic import bars_corpus, dp_gaussian_mixture, edge_covariances, toy_patches

__all__ = ["bars_corpus", "dp_gaussian_mixture", "edge_covariances", "toy_patches"]
