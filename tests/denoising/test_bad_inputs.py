"""The denoising API refuses what it cannot restore with one ValueError naming the problem, never a raw
torch error or a NaN image: non-finite pixels, an image smaller than a patch, a prior of other patches, a
noise level, beta or lambda that is not positive and finite, and PSNRs of images that are not comparable."""

import numpy as np
import pytest
from sklearn.mixture import GaussianMixture

from pyro_memo.denoising import (
    GaussianMixturePrior,
    add_noise,
    center_crop,
    epll_denoise,
    load_image,
    mmse_denoise,
    psnr,
    sample_patches,
    to_gray255,
)
from pyro_memo.denoising.images import SIGMA_RANGE

PRIOR = GaussianMixturePrior([1.0], 100 * np.eye(64)[None])
IMAGE = np.random.default_rng(0).normal(100, 10, (32, 32))
WITH_NAN = IMAGE.copy()
WITH_NAN[3, 3] = np.nan
WITH_INF = IMAGE.copy()
WITH_INF[0, 7] = np.inf


@pytest.mark.parametrize("denoise", [mmse_denoise, epll_denoise])
@pytest.mark.parametrize("call,match", [
    (lambda d: d(WITH_NAN, PRIOR, 10), "NaN or inf values in 1 pixels"),
    (lambda d: d(WITH_INF, PRIOR, 10), "NaN or inf values in 1 pixels"),
    (lambda d: d(IMAGE[:5, :20], PRIOR, 10), r"the image is \(5, 20\), smaller than one 8 x 8 patch"),
    (lambda d: d(np.empty((0, 0)), PRIOR, 10), "smaller than one 8 x 8 patch"),
    (lambda d: d(IMAGE, PRIOR, 10, size=0), "patch size must be a positive integer"),
    (lambda d: d(IMAGE, PRIOR, 10, size=6), "patches of 64 pixels; size=6 cuts patches of 36"),
    (lambda d: d(IMAGE, GaussianMixturePrior([1.0], np.eye(36)[None]), 10), "patches of 36 pixels"),
    (lambda d: d(IMAGE, PRIOR, None), "sigma must be a positive number; got None"),
    (lambda d: d(IMAGE, PRIOR, "25"), "sigma must be a positive number; got '25'"),
    (lambda d: d(np.full((10, 10), "a"), PRIOR, 10), "an image of real numbers"),
    (lambda d: d(IMAGE > 100, PRIOR, 10), "an image of real numbers; got dtype torch.bool"),
    # max_elements 0 or -1 ran silently in chunks of one patch; NaN, None, 'a': int()'s raw error
    (lambda d: d(IMAGE, PRIOR, 10, max_elements=0), "max_elements must be a positive integer; got 0"),
    (lambda d: d(IMAGE, PRIOR, 10, max_elements=-1), "max_elements must be a positive integer; got -1"),
    (lambda d: d(IMAGE, PRIOR, 10, max_elements=float("nan")), "max_elements must be a positive integer; got nan"),
    (lambda d: d(IMAGE, PRIOR, 10, max_elements=None), "max_elements must be a positive integer; got None"),
])
def test_the_denoisers_refuse_what_they_cannot_restore(denoise, call, match):
    with pytest.raises(ValueError, match=match):
        call(denoise)


@pytest.mark.parametrize("sigma", [1e160, 1e154, 1e-300, 1e-20])
@pytest.mark.parametrize("call", [lambda s: mmse_denoise(IMAGE, PRIOR, s), lambda s: epll_denoise(IMAGE, PRIOR, s),
                                  lambda s: add_noise(IMAGE, s)])
def test_a_noise_level_out_of_range_is_refused(call, sigma):
    # 1e160: OverflowError at sigma ** 2; 1e154: PSNR -inf; 1e-300: ZeroDivisionError in EPLL; 1e-20: a noisy image
    # equal to the clean one (PSNR inf)
    with pytest.raises(ValueError, match=r"sigma must lie in \[1e-06, 1e\+06\] \(a standard deviation"):
        call(sigma)


def test_the_ends_of_the_noise_range_are_restored():
    low, high = SIGMA_RANGE
    for sigma in (low, high):
        noisy = add_noise(IMAGE, sigma, seed=0)
        for denoise in (mmse_denoise, epll_denoise):
            assert np.isfinite(psnr(IMAGE, denoise(noisy, PRIOR, sigma)))
        assert np.isfinite(psnr(IMAGE, noisy))


@pytest.mark.parametrize("kwargs,match", [
    (dict(betas=[0.0]), "each of betas must be a positive finite number; got 0.0"),
    (dict(betas=[1.0, -1.0]), "got -1.0"), (dict(betas=[]), "betas is empty"),
    (dict(betas=1.0), "betas must be a sequence of positive numbers; got 1.0"),
    (dict(betas="48"), "betas must be a sequence of positive numbers; got '48'"),
    (dict(betas=np.float64(2.0)), "betas must be a sequence of positive numbers"),
    (dict(lam=float("nan")), "lam must be a non-negative finite number; got nan"), (dict(lam=-1), "got -1"),
])
def test_epll_refuses_a_splitting_without_positive_weights(kwargs, match):
    with pytest.raises(ValueError, match=match):
        epll_denoise(IMAGE, PRIOR, 10, **kwargs)


def test_a_prior_with_infinite_weights_or_covariances_is_refused():
    with pytest.raises(ValueError, match="nonnegative and finite"):
        GaussianMixturePrior([np.inf, 1.0], np.stack([np.eye(4)] * 2))
    with pytest.raises(ValueError, match="covariances have NaN or inf"):
        GaussianMixturePrior([1.0], np.full((1, 4, 4), np.nan))


@pytest.mark.parametrize("call,match", [
    (lambda: GaussianMixturePrior(["a"], np.eye(4)[None]), "mixture weights must be real numbers; got list"),
    (lambda: GaussianMixturePrior([1.0], np.eye(4)[None].astype(complex)),
     "mixture covariances must be real numbers; got dtype torch.complex128"),
    (lambda: GaussianMixturePrior([1.0], np.eye(4)[None], dtype="float32"),
     "dtype must be torch.float32 or torch.float64; got 'float32'"),
    (lambda: GaussianMixturePrior([1.0], np.eye(4)[None], device="tpu"), "device tpu: not a torch device"),
])
def test_a_prior_refuses_non_real_parameters_and_bad_dtypes_or_devices(call, match):
    """Used to fail with torch's raw TypeError / RuntimeError, or (complex) drop the imaginary part with a warning."""
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("args,match", [((IMAGE, WITH_NAN), "NaN or inf pixels"),
                                        ((IMAGE, IMAGE + 1, -1), "peak must be a positive number"),
                                        ((IMAGE, IMAGE + 1, 0), "peak must be a positive number"),
                                        ((np.zeros(0), np.zeros(0)), "empty")])
def test_psnr_refuses_images_it_cannot_compare(args, match):
    with pytest.raises(ValueError, match=match):
        psnr(*args)


@pytest.mark.parametrize("args,match", [
    ((IMAGE, IMAGE + 1, True), "peak must be a positive number; got True"),
    ((IMAGE, IMAGE + 1, "255"), "peak must be a positive number; got '255'"),
    ((IMAGE * 1j, IMAGE), "clean must be an image of real numbers; got dtype complex128"),
    ((IMAGE, np.full(IMAGE.shape, "a")), "estimate must be an image of real numbers; got dtype <U1"),
])
def test_psnr_refuses_a_bool_peak_and_images_not_of_real_numbers(args, match):
    """Used to accept peak=True, drop the imaginary part with a warning, or fail with numpy's "could not convert"."""
    with pytest.raises(ValueError, match=match):
        psnr(*args)


def test_psnr_of_huge_or_tiny_images_is_finite():
    """Used to be -inf: the squared differences of pixels near 1e200 overflowed."""
    assert psnr(IMAGE * 1e200, (IMAGE + 25.5) * 1e200, peak=255e200) == pytest.approx(20.0)
    assert psnr(IMAGE * 1e-200, (IMAGE + 25.5) * 1e-200, peak=255e-200) == pytest.approx(20.0)
    assert np.isfinite(psnr(IMAGE * 1e300, -IMAGE * 1e300))


def test_center_crop_refuses_a_colour_image_and_a_fractional_size():
    with pytest.raises(ValueError, match=r"2-D grayscale image .* got shape \(64, 64, 3\)"):
        center_crop(np.zeros((64, 64, 3)), 32)
    with pytest.raises(ValueError, match="crop size must be a positive integer; got 16.5"):
        center_crop(IMAGE, 16.5)
    assert center_crop(IMAGE, 16).shape == center_crop(IMAGE, 16.0).shape == (16, 16)


@pytest.mark.parametrize("call,match", [
    (lambda: sample_patches(IMAGE, 10), r"a list of 2-D images; got one array of shape \(32, 32\)"),
    (lambda: sample_patches([np.zeros((20, 20, 3))], 10), "2-D grayscale images"),
    (lambda: sample_patches([IMAGE], 10, size=0), "patch size must be a positive integer; got 0"),
    (lambda: sample_patches([IMAGE], 10.5), "number of patches must be a positive integer; got 10.5"),
    (lambda: sample_patches([IMAGE, WITH_NAN], 10), r"images\[1\] has NaN or inf values in 1 pixels"),
    (lambda: sample_patches([IMAGE], 10, seed=-1), "seed must be a whole number .*; got -1"),
    (lambda: sample_patches([IMAGE], 10, seed="a"), "seed must be a whole number .*; got 'a'"),
    (lambda: sample_patches([IMAGE], 10, dtype=np.int8), "dtype must be numpy float32 or float64"),
    (lambda: sample_patches([IMAGE], 10, dtype="nonsense"), "dtype must be numpy float32 or float64"),
    (lambda: GaussianMixturePrior.from_sklearn(GaussianMixture(2)), "not fitted"),
])
def test_patch_sampling_and_sklearn_priors_refuse_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("call,match", [
    (lambda: GaussianMixturePrior.from_posterior(None), "needs a fitted DP mixture's posterior"),
    (lambda: GaussianMixturePrior.from_posterior(GaussianMixture(2)), "from_sklearn"),
    (lambda: GaussianMixturePrior.from_sklearn(object()), "needs a fitted sklearn.mixture.GaussianMixture"),
])
def test_a_prior_from_the_wrong_object_names_the_right_constructor(call, match):
    with pytest.raises(TypeError, match=match):
        call()


@pytest.mark.parametrize("denoise", [mmse_denoise, epll_denoise])
@pytest.mark.parametrize("prior", [None, "prior", GaussianMixture(1)])
def test_the_denoisers_refuse_what_is_not_a_prior(denoise, prior):
    """Used to fail with AttributeError: '...' object has no attribute 'dim'."""
    with pytest.raises(TypeError, match=f"prior must be a GaussianMixturePrior .*; got {type(prior).__name__}"):
        denoise(IMAGE, prior, 10)


@pytest.mark.parametrize("array,match", [
    (np.full((5, 5), 200, np.int64), "pixels of dtype int64; give bool, uint8"),  # was 5.5e-15: scaled by 2**63
    (np.full((5, 5, 3), 200, np.int32), "pixels of dtype int32"),  # was 2.4e-05
    (np.full((5, 5), 200.0), r"float pixels must be finite and lie in \[0, 1\]; found \[200, 200\]"),  # was 51000
    (np.full((5, 5), -0.5), r"float pixels .* found \[-0.5, -0.5\]"),  # was -127.5
    (np.full((5, 5), np.nan), "float pixels must be finite"),  # was NaN
    (np.full((5, 5, 4), 2.0), "float pixels must be finite and lie in"),
    (np.full((5, 5), "a"), "pixels of dtype <U1"),  # was skimage's "Cannot convert from <U1 to float64."
    (np.zeros((5, 5), complex), "pixels of dtype complex128"),
])
def test_to_gray255_refuses_pixels_off_scikit_images_scales(array, match):
    with pytest.raises(ValueError, match="image: " + match):
        to_gray255(array)


def test_to_gray255_reads_the_scales_it_knows():
    for array in (np.full((5, 5), 255, np.uint8), np.full((5, 5), 65535, np.uint16), np.ones((5, 5), bool),
                  np.ones((5, 5)), np.full((5, 5, 4), 255, np.uint8), np.ones((5, 5, 3), np.float32)):
        np.testing.assert_allclose(to_gray255(array), 255.0, rtol=1e-6)


def test_grayscale_files_with_alpha_or_one_channel_axis_are_read(tmp_path):
    """A grey + alpha PNG (mode LA, read as (H, W, 2)) and a one-channel TIFF (read as (H, W, 1)) were refused
    as "expected a 2-D grayscale image"; they are read as the grey image they hold, the alpha composited on
    white as an RGBA image's is."""
    import imageio.v3 as iio
    from PIL import Image

    gray = np.random.default_rng(1).integers(0, 256, (12, 10)).astype(np.uint8)
    alpha = np.full_like(gray, 255)
    alpha[0, 0] = 0  # transparent: white, as rgba2rgb composites
    Image.fromarray(np.dstack([gray, alpha]), mode="LA").save(tmp_path / "la.png")
    iio.imwrite(tmp_path / "one.tiff", gray[..., None])
    expected = gray.astype(float)
    np.testing.assert_allclose(load_image(str(tmp_path / "one.tiff")), expected, atol=1e-9)
    expected[0, 0] = 255.0
    np.testing.assert_allclose(load_image(str(tmp_path / "la.png")), expected, atol=1e-9)


def test_cmyk_files_are_read_as_their_colours_not_as_rgba(tmp_path):
    """A CMYK TIFF or JPEG is read as four ink channels, which passed for RGBA: a grey image without black ink
    came out all 255 (its K channel of zeros read as transparent)."""
    from PIL import Image

    gray = np.random.default_rng(2).integers(0, 256, (12, 10)).astype(np.uint8)
    cmyk = Image.fromarray(np.dstack([gray, gray, gray])).convert("CMYK")
    cmyk.save(tmp_path / "cmyk.tif")
    cmyk.save(tmp_path / "cmyk.jpg", quality=100)
    np.testing.assert_allclose(load_image(str(tmp_path / "cmyk.tif")), gray, atol=1e-9)
    assert np.abs(load_image(str(tmp_path / "cmyk.jpg")) - gray).mean() < 3  # JPEG's loss, not 255 everywhere


@pytest.mark.parametrize("call,error,match", [
    # an AttributeError ('list' object has no attribute 'shape'), numpy's "expected non-negative integer",
    # a UFuncTypeError and os.stat's TypeError before
    (lambda: add_noise(IMAGE, 10, seed=-1), ValueError, "seed must be a whole number"),
    (lambda: add_noise(np.full((4, 4), "a"), 10), ValueError, "an image of real numbers; got dtype <U1"),
    (lambda: load_image(None), TypeError, "source must be a bundled photograph's name or an image file's path"),
    (lambda: load_image(["camera"]), TypeError, "got list"),
])
def test_noise_and_image_reading_refuse_bad_arguments(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_add_noise_and_center_crop_take_nested_lists():
    np.testing.assert_array_equal(add_noise(IMAGE.tolist(), 10, seed=3), add_noise(IMAGE, 10, seed=3))
    np.testing.assert_array_equal(center_crop(IMAGE.tolist(), 8), center_crop(IMAGE, 8))
