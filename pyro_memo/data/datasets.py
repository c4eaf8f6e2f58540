"""Datasets: bundled ones (shipped by installed packages) and array files."""

import os

import numpy as np

from .files import DAMAGED_FILE_ERRORS
from .synthetic import toy_patches

#: bundled dataset name -> one-line description
BUNDLED = {
    "digits": "scikit-learn's handwritten digits: 1,797 images of 8x8 pixels (D = 64), 10 classes",
    "toy-patches": "Hughes & Sudderth 2013's toy data: 100,000 5x5 patches from 8 zero-mean edge-covariance Gaussians",
    "fashion-mnist": "Fashion-MNIST: 70,000 28x28 images (D = 784), 10 classes (Debian's dataset-fashion-mnist)",
}

#: where Debian's dataset-fashion-mnist package puts the files
FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"


def fashion_mnist_bytes(folder=FASHION_MNIST_DIR):
    """Fashion-MNIST train + test images as a ``(70000, 784)`` uint8 array (55 MB) and labels.

    :raises ValueError: if the files are missing (``apt-get install dataset-fashion-mnist``).
    """
    import gzip

    def read(name, offset):
        path = os.path.join(folder, name)
        if not os.path.exists(path):
            raise ValueError(f"{path} not found: install Debian's dataset-fashion-mnist package "
                             "(apt-get install dataset-fashion-mnist)")
        with gzip.open(path, "rb") as fh:
            return np.frombuffer(fh.read(), dtype=np.uint8, offset=offset)

    images = [read(f"{part}-images-idx3-ubyte.gz", 16).reshape(-1, 784) for part in ("train", "t10k")]
    labels = [read(f"{part}-labels-idx1-ubyte.gz", 8) for part in ("train", "t10k")]
    return np.concatenate(images), np.concatenate(labels).astype(np.int64)


def load_fashion_mnist(folder=FASHION_MNIST_DIR):
    """Fashion-MNIST train + test images as a ``(70000, 784)`` float64 array in [0, 1], and labels.

    :raises ValueError: if the files are missing (``apt-get install dataset-fashion-mnist``).
    """
    images, labels = fashion_mnist_bytes(folder)
    return images.astype(np.float64) / 255.0, labels


def load_digits():
    """scikit-learn's digits as a ``(1797, 64)`` float64 array (pixel values 0-16) and int labels.

    Read from the CSV file scikit-learn ships, found without importing scikit-learn: importing it
    costs about 2 s (it loads scipy.stats), five times the fit the CLI runs on these data. Where the
    file is not where scikit-learn has kept it, :func:`sklearn.datasets.load_digits` reads it.
    """
    import importlib.util

    spec = importlib.util.find_spec("sklearn")
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    path = os.path.join(folders[0], "datasets", "data", "digits.csv.gz") if folders else ""
    if not os.path.isfile(path):
        from sklearn.datasets import load_digits as sklearn_digits

        x, y = sklearn_digits(return_X_y=True)
        return x.astype(np.float64), y
    table = np.loadtxt(path, delimiter=",")
    return table[:, :-1], table[:, -1].astype(np.int64)


def load_dataset(source):
    """Load data for fitting.

    :param str source: a bundled dataset name (see :data:`BUNDLED`) or a path to a
        ``.npy`` file (an ``(N, D)`` array) or ``.npz`` file (key ``x`` or ``data``, else
        its only array; an optional ``labels`` / ``y`` array is used for scoring).
    :returns: ``(x, labels, description)`` with ``x`` an ``(N, D)`` numeric numpy array (a file's in its
        stored dtype, booleans too, the bundled sets' float64) and ``labels`` an ``(N,)`` int64 array or ``None``.
    :raises ValueError: for an unknown name, a missing or unreadable file, data that are not an ``(N, D)``
        array of real numbers (``check_numeric_dtype()``), a saved scipy sparse matrix, or labels that are
        not ``N`` whole numbers.
    """
    if not isinstance(source, (str, os.PathLike)):
        raise ValueError(f"a dataset is a bundled name ({', '.join(BUNDLED)}) or a file path; got "
                         f"{type(source).__name__}")
    source = os.fspath(source)
    if source in BUNDLED:
        if source == "digits":
            return (*load_digits(), BUNDLED[source])
        if source == "fashion-mnist":
            x, y = load_fashion_mnist()
            return x, y, BUNDLED[source]
        if source == "toy-patches":
            x, y, _ = toy_patches()
            return x, y, BUNDLED[source]
    if not os.path.exists(source):
        raise ValueError(f"'{source}' is neither a bundled dataset ({', '.join(BUNDLED)}) nor an existing file")
    ext = os.path.splitext(source)[1].lower()
    try:
        if ext == ".npy":
            x, labels = np.load(source, allow_pickle=False), None
        elif ext == ".npz":
            with np.load(source, allow_pickle=False) as archive:
                keys = list(archive.keys())
                if {"format", "shape", "data"} <= set(keys) and ({"indptr", "indices"} <= set(keys) or
                                                                 {"row", "col"} <= set(keys) or "offsets" in keys):
                    raise ValueError(f"{source}: holds a scipy sparse matrix (scipy.sparse.save_npz), not an (N, D) "
                                     f"array; save the dense x.toarray() (the HDP topic model, --model hdp, reads "
                                     f"sparse counts)")
                data_keys = [k for k in ("x", "data") if k in keys] or [k for k in keys if k not in ("labels", "y")]
                if len(data_keys) != 1:
                    raise ValueError(
                        f"{source}: expected an array named 'x' or 'data' (or a single array); found {keys}"
                    )
                x = archive[data_keys[0]]
                label_keys = [k for k in ("labels", "y") if k in keys]
                labels = archive[label_keys[0]] if label_keys else None
        else:
            raise ValueError(f"{source}: unsupported file type '{ext}'; use .npy or .npz")
    except ValueError as err:
        message = str(err)
        raise ValueError(message if message.startswith(source) else f"{source}: cannot read array file ({message})") \
            from err
    except (OSError, *DAMAGED_FILE_ERRORS) as err:
        raise ValueError(f"{source}: cannot read array file, damaged or truncated? ({type(err).__name__}: "
                         f"{str(err)[:160]})") from err
    check_numeric_dtype(x.dtype, source)
    if x.ndim != 2:
        raise ValueError(f"{source}: data must be an (N, D) array; got shape {x.shape}")
    return x, _checked_labels(labels, len(x), source), f"{os.path.basename(source)}: array of shape {x.shape}"


def check_numeric_dtype(dtype, source):
    """Raise :class:`ValueError` naming ``source`` unless arrays of ``dtype`` are real numbers: integers,
    floats or booleans (read as 0 / 1); not strings, dates, objects or records, nor complex numbers, whose
    imaginary part a conversion to the fits' real dtype would drop."""
    dtype = np.dtype(dtype)
    if np.issubdtype(dtype, np.complexfloating):
        raise ValueError(f"{source}: data must be real numbers; got complex dtype {dtype} (save x.real, x.imag "
                         f"or abs(x), whichever the data mean)")
    if not (np.issubdtype(dtype, np.number) or dtype == np.bool_):
        raise ValueError(f"{source}: data must be numeric; got dtype {dtype}")


def _checked_labels(labels, n, source):
    """``labels`` as ``(n,)`` int64, or ``None``; :class:`ValueError` for another length or non-whole values."""
    if labels is None:
        return None
    labels = np.asarray(labels)
    if labels.shape != (n,):
        raise ValueError(f"{source}: labels must have shape ({n},), one per row of the data; got {labels.shape}")
    if not (np.issubdtype(labels.dtype, np.integer) or
            (np.issubdtype(labels.dtype, np.floating) and np.all(labels == np.round(labels)))):
        raise ValueError(f"{source}: labels must be whole numbers (class ids); got dtype {labels.dtype}")
    return labels.astype(np.int64)
