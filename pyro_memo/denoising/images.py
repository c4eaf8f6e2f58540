"""Grayscale images on the [0, 255] scale: scikit-image's bundled photographs or image files, and
additive white Gaussian noise.

scikit-image (the ``denoise`` extra) is imported only when an image is read.
"""

import numbers
import os
import warnings

import numpy as np

from ..checks import as_positive_int, as_rng

#: scikit-image's bundled photographs that need no download (``skimage.data.<name>()``); colour
#: ones are converted to grayscale
PHOTOGRAPHS = ("astronaut", "brick", "camera", "cell", "chelsea", "clock", "coffee", "coins", "grass", "gravel",
               "hubble_deep_field", "immunohistochemistry", "moon", "page", "retina", "rocket", "text")

#: the noise levels (standard deviations on the image's scale, grey levels 0-255 for these images) the
#: denoisers take: from a millionth of a grey level to a million grey levels. Far below, the noise is lost
#: in float64's rounding of the pixel values (noise of 1e-20 left the noisy image equal to the clean one:
#: PSNR inf) and sigma**2 underflows in EPLL's weights (1e-300: a division by zero); far above, sigma**2
#: overflows (1e160: OverflowError) and so does the PSNR's squared error (1e154: PSNR -inf).
SIGMA_RANGE = (1e-6, 1e6)
SIGMA_RANGE_WHY = ("a standard deviation on the image's scale, 0-255 grey levels: smaller noise is lost in float64's "
                   "rounding of the pixels, larger overflows sigma**2 and the PSNR's squared error")


def _skimage():
    try:
        import skimage.color
        import skimage.data
        import skimage.io
        import skimage.util
    except ImportError:
        raise ValueError("reading images needs scikit-image: pip install 'pyro-memo[denoise]'") from None
    return skimage


def to_gray255(array, name="image"):
    """``array`` (grayscale, grayscale with alpha, RGB or RGBA; any integer or float type scikit-image
    reads) as a float64 grayscale image in [0, 255] (ITU-R 601 luma of :func:`skimage.color.rgb2gray`).

    :raises ValueError: if it is neither 2-D nor an RGB / RGBA image, or its pixels are not on a scale
        scikit-image knows (``check_pixels``).
    """
    skimage = _skimage()
    array = _gray_channels_as_rgba(check_pixels(np.asarray(array), name))
    if array.ndim == 3 and array.shape[-1] == 4:
        array = skimage.color.rgba2rgb(array)
    if array.ndim == 3 and array.shape[-1] == 3:
        array = skimage.color.rgb2gray(array)
    if array.ndim != 2:
        raise ValueError(f"{name}: expected a 2-D grayscale image (or grey + alpha, RGB, RGBA); got shape "
                         f"{array.shape}")
    if min(array.shape) < 1:
        raise ValueError(f"{name}: the image is empty (shape {array.shape})")
    return 255.0 * skimage.util.img_as_float64(array)


def _gray_channels_as_rgba(array):
    """``array`` with a grayscale channel axis made plain: ``(H, W, 1)`` (a one-channel TIFF) as ``(H, W)``,
    ``(H, W, 2)`` (grey and alpha, a PNG in mode LA) as RGBA, so that its alpha is composited on white as
    an RGBA image's is; other shapes as they are."""
    if array.ndim == 3 and array.shape[-1] == 1:
        return array[..., 0]
    if array.ndim == 3 and array.shape[-1] == 2:
        gray, alpha = array[..., :1], array[..., 1:]
        return np.concatenate([gray, gray, gray, alpha], axis=-1)
    return array


def check_pixels(array, name="image"):
    """``array`` if its pixels are on one of scikit-image's scales: bool, uint8 (0-255), uint16 (0-65535), or
    floats in [0, 1]. Other integers are scaled by their type's maximum (an int64 image of grey levels 0-255
    came out near 0) and floats outside [0, 1] are taken as they are (0-255 came out 0-65025).

    :raises ValueError: naming ``name``, the dtype or the float range.
    """
    if array.dtype == bool or array.dtype in (np.uint8, np.uint16):
        return array
    if not np.issubdtype(array.dtype, np.floating):
        raise ValueError(f"{name}: pixels of dtype {array.dtype}; give bool, uint8 (0-255), uint16 (0-65535) or "
                         f"floats in [0, 1]")
    if array.size and not (np.isfinite(array).all() and 0 <= array.min() and array.max() <= 1):
        raise ValueError(f"{name}: float pixels must be finite and lie in [0, 1]; found [{np.min(array):g}, "
                         f"{np.max(array):g}] (for grey levels 0-255 give uint8, or divide by 255)")
    return array


def load_image(source):
    """A grayscale float64 image in [0, 255] from a bundled photograph's name (:data:`PHOTOGRAPHS`)
    or an image file (any format :func:`skimage.io.imread` reads).

    :raises ValueError: for a missing or unreadable file, or an image that is not 2-D (or grey + alpha, RGB, RGBA).
    """
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(f"source must be a bundled photograph's name or an image file's path; got "
                        f"{type(source).__name__}")
    skimage = _skimage()
    if source in PHOTOGRAPHS and not os.path.exists(source):
        return to_gray255(getattr(skimage.data, source)(), source)
    if not os.path.isfile(source):
        raise ValueError(f"{source}: no such image file (nor a bundled photograph: {', '.join(PHOTOGRAPHS)})")
    try:
        with warnings.catch_warnings():  # imageio's plugins warn about themselves while probing a file
            warnings.simplefilter("ignore", DeprecationWarning)
            array = skimage.io.imread(source)
    except Exception as err:  # the readers raise many types for a file that is not an image
        first = (str(err).strip().splitlines() or [""])[0]
        first = first if len(first) <= 160 else first[:157] + "..."
        raise ValueError(f"{source}: not a readable image ({type(err).__name__}: {first})") from None
    return to_gray255(_cmyk_as_rgb(source, array), source)


def _cmyk_as_rgb(source, array):
    """``array``, the pixels read from the file ``source``, as RGB if the file is a CMYK image (a JPEG or
    TIFF for print): the reader gives its four ink channels, which passed for RGBA (a grey CMYK JPEG came
    out all white: no black ink read as a transparent pixel); other images as they are."""
    if array.ndim != 3 or array.shape[-1] != 4:
        return array
    try:
        from PIL import Image

        with Image.open(source) as image:
            return np.asarray(image.convert("RGB")) if image.mode == "CMYK" else array
    except (ImportError, OSError, ValueError):  # not a file Pillow reads: imageio's pixels as they are
        return array


def center_crop(image, size):
    """The central ``size`` x ``size`` square of the 2-D ``image`` (the whole side where the image is smaller)."""
    size = as_positive_int(size, "crop size")
    image = image if hasattr(image, "shape") else np.asarray(image)
    if np.ndim(image) != 2:
        raise ValueError(f"expected a 2-D grayscale image (an array or tensor); got shape {np.shape(image)}")
    h, w = image.shape
    top, left = max((h - size) // 2, 0), max((w - size) // 2, 0)
    return image[top:top + size, left:left + size]


def add_noise(image, sigma, seed=0):
    """``image`` plus white Gaussian noise :math:`N(0, \\sigma^2)` per pixel (no clipping, as in
    Zoran & Weiss 2011, §4), from ``numpy.random.default_rng(seed)``.

    :raises ValueError: for a noise level off ``SIGMA_RANGE``, a bad seed, or an image that is not
        an array (or tensor) of real numbers.
    """
    check_sigma(sigma)
    image = image if hasattr(image, "shape") else np.asarray(image)
    if isinstance(image, np.ndarray) and image.dtype.kind not in "biuf":
        raise ValueError(f"expected an image of real numbers; got dtype {image.dtype}")
    return image + sigma * as_rng(seed).standard_normal(image.shape)


def check_sigma(sigma):
    """Raise :class:`ValueError` unless the noise level ``sigma`` is a positive number in ``SIGMA_RANGE``."""
    if isinstance(sigma, bool) or not isinstance(sigma, numbers.Real) or not (np.isfinite(sigma) and sigma > 0):
        raise ValueError(f"the noise level sigma must be a positive number; got {sigma!r}")
    low, high = SIGMA_RANGE
    if not low <= sigma <= high:
        raise ValueError(f"the noise level sigma must lie in [{low:g}, {high:g}] ({SIGMA_RANGE_WHY}); got {sigma!r}")
