"""Old import path of :mod:`pyro_memo.data.datasets` (bundled datasets and array files), kept working."""

from .data.datasets import BUNDLED, FASHION_MNIST_DIR, load_dataset, load_fashion_mnist

__all__ = ["BUNDLED", "FASHION_MNIST_DIR", "load_dataset", "load_fashion_mnist"]
