"""Fashion-MNIST as groups of pixels (issue #18 item 4b): read from the idx files one image at a time."""

import gzip

import numpy as np
import pytest

from pyro_memo.data import fashion_pixel_groups


def write_idx(folder, images):
    """Fashion-MNIST's four idx files holding ``images`` (n, 784) uint8 as the training part, none as the test."""
    for part, data in (("train", images), ("t10k", images[:0])):
        header = np.array([2051, len(data), 28, 28], dtype=">i4").tobytes()
        with gzip.open(folder / f"{part}-images-idx3-ubyte.gz", "wb") as fh:
            fh.write(header + data.tobytes())
        with gzip.open(folder / f"{part}-labels-idx1-ubyte.gz", "wb") as fh:
            fh.write(np.array([2049, len(data)], dtype=">i4").tobytes() + np.zeros(len(data), np.uint8).tobytes())


def test_each_image_is_a_group_of_its_pixels_with_position_and_intensity(tmp_path):
    images = np.random.default_rng(0).integers(0, 256, size=(3, 784)).astype(np.uint8)
    write_idx(tmp_path, images)
    groups = list(fashion_pixel_groups(folder=str(tmp_path)))
    assert len(groups) == 3 and all(g.shape == (784, 3) for g in groups)
    np.testing.assert_allclose(groups[1][:, 2], images[1] / 255.0)
    first = groups[0]
    np.testing.assert_allclose(first[0, :2], [-13.5, 13.5])  # top left
    np.testing.assert_allclose(first[27, :2], [13.5, 13.5])  # top right
    np.testing.assert_allclose(first[783, :2], [13.5, -13.5])  # bottom right
    assert len(list(fashion_pixel_groups(2, folder=str(tmp_path)))) == 2


def test_a_bad_count_or_a_missing_folder_is_a_clear_error(tmp_path):
    write_idx(tmp_path, np.zeros((2, 784), np.uint8))
    with pytest.raises(ValueError, match="between 1 and 2"):
        next(fashion_pixel_groups(5, folder=str(tmp_path)))
    with pytest.raises(ValueError, match="dataset-fashion-mnist"):
        next(fashion_pixel_groups(folder=str(tmp_path / "missing")))
