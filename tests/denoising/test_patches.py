"""Training patches (in memory and streamed to a .npy file) and the patch operators of one image."""

import numpy as np
import pytest
import torch

from pyro_memo.data import FileBatches
from pyro_memo.denoising import (
    average_patches,
    coverage,
    image_patches,
    put_back,
    remove_dc,
    sample_patches,
    write_patches,
)


def _images():
    rng = np.random.default_rng(1)
    return [255 * rng.random((20, 30)), 255 * rng.random((12, 9))]


def test_sampled_patches_have_the_shape_asked_and_zero_mean():
    x = sample_patches(_images(), 2_500, seed=3, chunk=1_000)
    assert x.shape == (2_500, 64) and x.dtype == np.float64
    np.testing.assert_allclose(x.mean(1), 0.0, atol=1e-10)
    assert x.std() > 10  # not all zeros: real pixels of the images


def test_a_sampled_patch_is_an_image_window_minus_its_mean():
    image = np.arange(100.0).reshape(10, 10) ** 1.5
    x = sample_patches([image], 200, size=3, seed=0)
    windows = np.lib.stride_tricks.sliding_window_view(image, (3, 3)).reshape(-1, 9)
    centred = windows - windows.mean(1, keepdims=True)
    dist = ((x[:, None, :] - centred[None]) ** 2).sum(-1).min(1)
    np.testing.assert_allclose(dist, 0.0, atol=1e-9)
    assert len(np.unique(x.round(8), axis=0)) > 20  # many positions drawn


def test_the_seed_decides_the_patches():
    a, b, c = (sample_patches(_images(), 300, seed=s) for s in (0, 0, 1))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_the_streamed_file_equals_the_in_memory_patches(tmp_path):
    path = write_patches(tmp_path / "p.npy", _images(), 2_500, seed=7, chunk=1_000)
    expected = sample_patches(_images(), 2_500, seed=7, chunk=1_000)
    np.testing.assert_array_equal(np.load(path), expected)
    source = FileBatches.from_npy(path, 4)  # what a memoized fit reads, batch by batch
    np.testing.assert_array_equal(np.concatenate(list(source)), expected)
    assert [p.name for p in tmp_path.iterdir()] == ["p.npy"]  # no temporary file left


@pytest.mark.parametrize("n", [5.5, -1, 0, "5"])
def test_writing_a_bad_number_of_patches_is_refused_and_leaves_no_file(tmp_path, n):
    """Used to fail with numpy's raw TypeError ('float' object cannot be interpreted as an integer) or
    ValueError (negative dimensions are not allowed)."""
    with pytest.raises(ValueError, match=f"number of patches must be a positive integer; got {n!r}"):
        write_patches(tmp_path / "p.npy", _images(), n)
    assert list(tmp_path.iterdir()) == []


def test_too_small_an_image_is_refused():
    with pytest.raises(ValueError, match="at least 8 x 8"):
        sample_patches([np.zeros((5, 40))], 10)


def test_remove_dc():
    x = np.array([[1.0, 2.0, 3.0], [5.0, 5.0, 5.0]])
    np.testing.assert_allclose(remove_dc(x), [[-1.0, 0.0, 1.0], [0.0, 0.0, 0.0]])


def test_image_patches_are_the_windows_in_row_major_order():
    image = torch.arange(56.0, dtype=torch.float64).reshape(7, 8)
    windows = np.lib.stride_tricks.sliding_window_view(image.numpy(), (3, 3)).reshape(-1, 9)
    np.testing.assert_array_equal(image_patches(image, 3).numpy(), windows)


def test_put_back_is_the_adjoint_of_extraction_and_averaging_inverts_it():
    gen = torch.Generator().manual_seed(0)
    image = torch.randn(9, 11, generator=gen, dtype=torch.float64)
    z = torch.randn(7 * 9, 9, generator=gen, dtype=torch.float64)
    # <P x, z> = <x, P^T z>
    torch.testing.assert_close((image_patches(image, 3) * z).sum(), (image * put_back(z, (9, 11), 3)).sum())
    torch.testing.assert_close(average_patches(image_patches(image, 3), (9, 11), 3), image)
    counts = coverage((9, 11), 3)
    assert counts[0, 0] == 1 and counts[4, 5] == 9 and counts[0, 4] == 3
