"""Images as groups of pixel features, for an HDP mixture's joint segmentation (Gomes, Welling & Perona 2008,
§4.1): each tile of a colour image is a group, each pixel an item with features (x, y relative to the tile's
centre, L, a, b in CIE Lab); or each Fashion-MNIST image a group of 784 pixels with features (x, y, intensity),
streamed one image at a time (:func:`fashion_pixel_groups`).
"""

import warnings

import numpy as np

#: scikit-image's bundled colour photographs, in the order :func:`color_tiles` cuts them
COLOR_PHOTOGRAPHS = ("astronaut", "chelsea", "coffee", "rocket", "stereo_motorcycle", "immunohistochemistry",
                     "hubble_deep_field", "retina")


def _skimage():
    try:
        import skimage.color
        import skimage.data
        import skimage.transform
    except ImportError:
        raise ValueError("colour images need scikit-image: pip install 'pyro-memo[denoise]'") from None
    return skimage


def load_color_photograph(name):
    """A bundled colour photograph (:data:`COLOR_PHOTOGRAPHS`) as a float RGB array in [0, 1], ``(H, W, 3)``
    (the left view of ``stereo_motorcycle``)."""
    skimage = _skimage()
    if name not in COLOR_PHOTOGRAPHS:
        raise ValueError(f"{name!r} is not a bundled colour photograph; choose from {', '.join(COLOR_PHOTOGRAPHS)}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        image = getattr(skimage.data, name)()
    if isinstance(image, tuple):
        image = image[0]
    return np.asarray(image, dtype=np.float64)[..., :3] / 255.0


def color_tiles(count, height=160, width=200, scale=1.0, names=COLOR_PHOTOGRAPHS):
    """The first ``count`` non-overlapping ``height`` x ``width`` tiles of the photographs ``names``, each
    photograph cut row by row; ``scale < 1`` shrinks every tile afterwards (anti-aliased) for quick runs.

    :returns: a list of ``(h, w, 3)`` RGB arrays in [0, 1].
    :raises ValueError: when the photographs hold fewer than ``count`` tiles.
    """
    skimage = _skimage()
    tiles = []
    for name in names:
        image = load_color_photograph(name)
        for top in range(0, image.shape[0] - height + 1, height):
            for left in range(0, image.shape[1] - width + 1, width):
                tile = image[top:top + height, left:left + width]
                if scale != 1.0:
                    shape = (max(1, round(height * scale)), max(1, round(width * scale)))
                    tile = skimage.transform.resize(tile, shape, anti_aliasing=True)
                tiles.append(tile)
                if len(tiles) == count:
                    return tiles
    raise ValueError(f"the photographs {', '.join(names)} hold {len(tiles)} tiles of {height} x {width}; "
                     f"asked for {count}")


def pixel_features(tile):
    """``(h * w, 5)`` features of an RGB tile's pixels, row by row: x and y relative to the tile's centre (in
    pixels), then L, a, b (:func:`skimage.color.rgb2lab`)."""
    skimage = _skimage()
    tile = np.asarray(tile, dtype=np.float64)
    if tile.ndim != 3 or tile.shape[-1] != 3:
        raise ValueError(f"expected an (h, w, 3) RGB tile; got shape {tile.shape}")
    h, w = tile.shape[:2]
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    lab = skimage.color.rgb2lab(np.clip(tile, 0.0, 1.0))
    return np.column_stack([(x - (w - 1) / 2).ravel(), (y - (h - 1) / 2).ravel(), lab.reshape(-1, 3)])


def fashion_pixel_groups(images=None, folder=None):
    """Fashion-MNIST's images (train then test; the first ``images`` of the 70,000) as groups of pixels, one
    ``(784, 3)`` float64 array at a time: x and y relative to the image's centre (in pixels, y up) and the
    intensity in [0, 1]. The images are held as bytes (55 MB for all 70,000), so a stream of 55 million pixels
    never holds more than one image of features.

    :raises ValueError: if the files are missing (``apt-get install dataset-fashion-mnist``), or ``images`` is
        not in 1 .. 70,000.
    """
    from .datasets import FASHION_MNIST_DIR, fashion_mnist_bytes

    raw, _ = fashion_mnist_bytes(FASHION_MNIST_DIR if folder is None else folder)
    count = len(raw) if images is None else int(images)
    if not 1 <= count <= len(raw):
        raise ValueError(f"images must be between 1 and {len(raw)}; got {images}")
    y, x = np.mgrid[0:28, 0:28].astype(np.float64)
    coords = np.column_stack([(x - 13.5).ravel(), (13.5 - y).ravel()])
    for image in raw[:count]:
        yield np.column_stack([coords, image / 255.0])
