"""Square image patches: random zero-mean training patches (in memory, or streamed to a ``.npy`` file
chunk by chunk), and every overlapping patch of one image with the operator that puts patches back.

Notation (Zoran & Weiss 2011, §2): :math:`P_i` extracts the ``size`` x ``size`` patch at position
``i`` of an image as a vector of :math:`D = \\text{size}^2` pixels in row-major order; the
*DC component* of a patch is its mean, and a zero-mean patch is :math:`(I - \\tfrac1D 1 1^T) P_i x`.
"""

import numpy as np
import torch
import torch.nn.functional as F

from ..checks import as_positive_int, as_rng
from ..data.files import write_atomically
from .prior import MAX_ELEMENTS, GaussianMixturePrior

#: side of the patches of Hughes & Sudderth 2013 (§4.4) and Zoran & Weiss 2011 (§2)
PATCH = 8
#: patches drawn per chunk: the random stream, hence the patches, depend on it
CHUNK = 100_000


def _positions(images, size):
    """``(rows of valid positions, columns of valid positions, cumulative counts)`` per image."""
    rows = np.array([img.shape[0] - size + 1 for img in images], dtype=np.int64)
    cols = np.array([img.shape[1] - size + 1 for img in images], dtype=np.int64)
    if (rows < 1).any() or (cols < 1).any():
        raise ValueError(f"every image must be at least {size} x {size} pixels; got shapes "
                         f"{[img.shape for img in images]}")
    return rows, cols, np.concatenate([[0], np.cumsum(rows * cols)])


def _patch_dtype(dtype):
    """``dtype`` as a numpy float32 or float64 dtype, else :class:`ValueError` naming it: the patches are
    zero-mean fractions, which an integer dtype would silently truncate."""
    try:
        out = np.dtype(dtype)
    except TypeError:
        out = None
    if out not in (np.float32, np.float64):
        raise ValueError(f"dtype must be numpy float32 or float64; got {dtype!r}")
    return out


def _check_finite_images(images):
    """Raise :class:`ValueError` naming the first image with NaN or inf pixels (its patches would be NaN)."""
    for i, img in enumerate(images):
        bad = int((~np.isfinite(img)).sum())
        if bad:
            raise ValueError(f"images[{i}] has NaN or inf values in {bad} pixels")


def remove_dc(patches):
    """Zero-mean patches: each row of ``(N, D)`` ``patches`` minus its mean (its DC component)."""
    return patches - patches.mean(-1, keepdims=True)


def iter_patch_chunks(images, n, size=PATCH, seed=0, chunk=CHUNK, dtype=np.float64):
    """Yield ``n`` random zero-mean patches of ``images`` as ``(m, size**2)`` arrays of at most ``chunk`` rows.

    Every position of every image is equally likely (so a big image gives more patches), drawn with
    replacement from ``numpy.random.default_rng(seed)``; the chunks are drawn one after the other, so
    the patches depend on ``(images, n, size, seed, chunk)`` only.

    :raises ValueError: for images with NaN or inf pixels, a bad ``seed`` or a ``dtype`` other than
        float32 / float64, besides a bad ``n``, ``size`` or ``chunk``.
    """
    n, chunk, size = (as_positive_int(value, name) for value, name in
                      ((n, "the number of patches"), (chunk, "the chunk size"), (size, "the patch size")))
    dtype = _patch_dtype(dtype)
    rng = as_rng(seed)
    if isinstance(images, np.ndarray) or torch.is_tensor(images):
        raise ValueError(f"images must be a list of 2-D images; got one array of shape {tuple(images.shape)} "
                         f"(pass [image] for one image)")
    try:
        images = [np.asarray(img, dtype=np.float64) for img in images]
    except (TypeError, ValueError):
        raise ValueError("images must be a list of 2-D arrays of numbers") from None
    if not images:
        raise ValueError("no images to draw patches from")
    if any(img.ndim != 2 for img in images):
        raise ValueError(f"images must be 2-D grayscale images; got shapes {[img.shape for img in images]}")
    _check_finite_images(images)
    rows, cols, cum = _positions(images, size)
    windows = [np.lib.stride_tricks.sliding_window_view(img, (size, size)) for img in images]
    for start in range(0, n, chunk):
        flat = rng.integers(cum[-1], size=min(chunk, n - start))
        which = np.searchsorted(cum, flat, side="right") - 1
        out = np.empty((len(flat), size * size), dtype=np.float64)
        for i in np.unique(which):
            mine = which == i
            r, c = np.divmod(flat[mine] - cum[i], cols[i])
            out[mine] = windows[i][r, c].reshape(-1, size * size)
        yield remove_dc(out).astype(dtype, copy=False)


def sample_patches(images, n, size=PATCH, seed=0, chunk=CHUNK, dtype=np.float64):
    """``(n, size**2)`` random zero-mean patches of ``images`` in memory (:func:`iter_patch_chunks`)."""
    return np.concatenate(list(iter_patch_chunks(images, n, size, seed, chunk, dtype)))


def write_patches(path, images, n, size=PATCH, seed=0, chunk=CHUNK, dtype=np.float64):
    """Write the patches :func:`sample_patches` returns for the same arguments to the ``.npy`` file
    ``path``, one chunk at a time through :func:`numpy.lib.format.open_memmap` (memory ``O(chunk)``,
    however large ``n``), atomically: a failed write leaves no partial file under ``path``.

    :returns: ``path``, for :class:`~pyro_memo.data.FileBatches` or ``MemoizedVB.fit``.
    :raises ValueError: for a bad ``n``, ``size`` or ``dtype`` before the file is made, as for :func:`sample_patches`.
    """
    n, size = as_positive_int(n, "the number of patches"), as_positive_int(size, "the patch size")
    dtype = _patch_dtype(dtype)

    def write(tmp):
        out = np.lib.format.open_memmap(tmp, mode="w+", dtype=dtype, shape=(n, size * size))
        start = 0
        for block in iter_patch_chunks(images, n, size, seed, chunk, dtype):
            out[start:start + len(block)] = block
            start += len(block)
        out.flush()
        del out

    write_atomically(path, write)
    return path


def image_patches(image, size=PATCH):
    """Every overlapping patch :math:`P_i x` of the ``(H, W)`` tensor ``image``: ``((H-size+1)(W-size+1), size**2)``,
    positions in row-major order, pixels in the order of :func:`sample_patches`."""
    return F.unfold(image[None, None], size).squeeze(0).T


def put_back(patches, shape, size=PATCH):
    """:math:`\\sum_i P_i^T z_i`: the ``(L, size**2)`` patches added into an image of ``shape``
    at the positions :func:`image_patches` took them from."""
    return F.fold(patches.T[None], shape, size).reshape(shape)


def coverage(shape, size=PATCH, like=None):
    """:math:`\\sum_i P_i^T P_i` (diagonal): how many patches cover each pixel of an image of ``shape``, the
    product of the counts along its rows and columns (no patch is formed), as a tensor like ``like``."""
    like = torch.empty(0, dtype=torch.float64) if like is None else like

    def along(n):
        """How many patch positions cover each of ``n`` pixels: min(i, n - size) - max(0, i - size + 1) + 1."""
        i = torch.arange(n)
        return (torch.clamp(i, max=n - size) - torch.clamp(i - size + 1, min=0) + 1).clamp(min=0)

    return (along(shape[0])[:, None] * along(shape[1])[None, :]).to(dtype=like.dtype, device=like.device)


def strip_rows(shape, size=PATCH, max_elements=MAX_ELEMENTS):
    """``(top, bottom)`` ranges of patch rows (positions ``top`` to ``bottom - 1`` down the image) whose patches,
    ``(bottom - top) (W - size + 1)`` of ``size**2`` pixels, hold at most ``max_elements`` numbers (one row of
    patches at least)."""
    rows, cols = shape[0] - size + 1, shape[1] - size + 1
    step = max(1, int(max_elements) // max(cols * size * size, 1))
    return [(top, min(top + step, rows)) for top in range(0, rows, step)]


def fold_strips(image, restore, size=PATCH, max_elements=MAX_ELEMENTS):
    """:math:`\\sum_i P_i^T r(P_i x)`: every overlapping patch of the ``(H, W)`` tensor ``image`` mapped by
    ``restore`` (``(n, size**2)`` patches to as many) and put back, a strip of patch rows at a time
    (:func:`strip_rows`), so that no more than ``max_elements`` numbers of patches are formed at once: all the
    patches of a 4000 x 3000 photograph are 6 GB in float64, each copy."""
    out = torch.zeros_like(image)
    for top, bottom in strip_rows(tuple(image.shape), size, max_elements):
        window = image[top:bottom + size - 1]
        out[top:bottom + size - 1] += put_back(restore(image_patches(window, size)), tuple(window.shape), size)
    return out


def average_patches(patches, shape, size=PATCH):
    """The image whose every pixel is the mean of the overlapping patch estimates covering it."""
    return put_back(patches, shape, size) / coverage(shape, size, patches)


def as_image_tensor(image, prior, size=PATCH):
    """``image`` (a 2-D array or tensor of real numbers, at least ``size`` pixels a side, finite) as a
    tensor of the prior's dtype on its device, checked against the prior's patches of ``size**2`` pixels.

    :raises ValueError: naming what does not fit.
    :raises TypeError: for a prior that is not a :class:`~pyro_memo.denoising.GaussianMixturePrior`.
    """
    if not isinstance(prior, GaussianMixturePrior):
        raise TypeError(f"prior must be a GaussianMixturePrior (from_posterior, from_sklearn); got "
                        f"{type(prior).__name__}")
    size = as_positive_int(size, "the patch size")
    if prior.dim != size * size:
        raise ValueError(f"the prior's components are patches of {prior.dim} pixels; size={size} cuts patches of "
                         f"{size * size}")
    try:
        x = image if torch.is_tensor(image) else torch.as_tensor(np.asarray(image))
    except (TypeError, ValueError, RuntimeError):
        raise ValueError(f"expected an image of real numbers; got {type(image).__name__}") from None
    if x.dim() != 2:
        raise ValueError(f"expected a 2-D grayscale image; got shape {tuple(x.shape)}")
    if x.dtype == torch.bool or x.is_complex():
        raise ValueError(f"expected an image of real numbers; got dtype {x.dtype}")
    if min(x.shape) < size:
        raise ValueError(f"the image is {tuple(x.shape)}, smaller than one {size} x {size} patch")
    x = x.to(dtype=prior.weights.dtype, device=prior.device)
    if not bool(torch.isfinite(x).all()):
        raise ValueError(f"the image has NaN or inf values in {int((~torch.isfinite(x)).sum())} pixels")
    return x


def like_input(result, image):
    """``result`` as ``image`` came: a tensor for a tensor, else a numpy array."""
    return result if torch.is_tensor(image) else result.cpu().numpy()
