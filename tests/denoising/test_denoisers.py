"""Single-pass patch MMSE and EPLL under known Gaussian patch priors, and PSNR."""

import numpy as np
import pytest
import torch
from scipy.ndimage import gaussian_filter

from pyro_memo.denoising import GaussianMixturePrior, epll_denoise, mmse_denoise, psnr

SIZE = 4  # 4 x 4 patches keep the tests fast; the math is the same for 8 x 8
WIDTH = 2.0  # the smoothing filter's standard deviation (pixels)


def _field(shape, seed):
    """A stationary Gaussian field: white noise through a Gaussian filter of std WIDTH, scaled to std ~30, plus 128."""
    white = np.random.default_rng(seed).standard_normal(shape)
    return 128.0 + 30.0 * gaussian_filter(white, WIDTH, mode="wrap") * 2 * np.sqrt(np.pi) * WIDTH


def _patch_covariance():
    """The field's zero-mean patch covariance: 900 exp(-|d|^2 / (4 WIDTH^2)) (the filter's
    autocorrelation), with each patch's mean removed, H C H."""
    grid = np.stack(np.meshgrid(np.arange(SIZE), np.arange(SIZE), indexing="ij"), -1).reshape(-1, 2)
    dist2 = ((grid[:, None, :] - grid[None, :, :]) ** 2).sum(-1)
    c = 900.0 * np.exp(-dist2 / (4 * WIDTH**2))
    h = np.eye(SIZE * SIZE) - 1.0 / SIZE**2
    return h @ c @ h


@pytest.fixture(scope="module")
def images():
    clean = _field((40, 36), seed=0)
    noisy = clean + 20.0 * np.random.default_rng(1).standard_normal(clean.shape)
    return clean, noisy


def _wiener_by_hand(noisy, cov, sigma):
    """Per-patch Wiener filter Sigma (Sigma + sigma^2 I)^-1 of the zero-mean patch, DC added back, averaged."""
    gain = cov @ np.linalg.inv(cov + sigma**2 * np.eye(len(cov)))
    out, count = np.zeros_like(noisy), np.zeros_like(noisy)
    for r in range(noisy.shape[0] - SIZE + 1):
        for c in range(noisy.shape[1] - SIZE + 1):
            y = noisy[r:r + SIZE, c:c + SIZE].ravel()
            x = gain @ (y - y.mean()) + y.mean()
            out[r:r + SIZE, c:c + SIZE] += x.reshape(SIZE, SIZE)
            count[r:r + SIZE, c:c + SIZE] += 1
    return out / count


def test_mmse_with_one_component_is_the_wiener_filter(images):
    _, noisy = images
    cov = _patch_covariance()
    one = GaussianMixturePrior([1.0], cov[None])
    expected = _wiener_by_hand(noisy, cov, 20.0)
    np.testing.assert_allclose(mmse_denoise(noisy, one, 20.0, size=SIZE), expected, rtol=1e-10)
    # chunked over patches: any chunk size gives the same image
    np.testing.assert_allclose(mmse_denoise(noisy, one, 20.0, size=SIZE, max_elements=50), expected, rtol=1e-10)
    # two copies of the component: the same prior, the same estimate (the responsibilities are 1/2 each)
    two = GaussianMixturePrior([1.0, 3.0], np.stack([cov, cov]))
    np.testing.assert_allclose(mmse_denoise(noisy, two, 20.0, size=SIZE), expected, rtol=1e-10)


def test_mmse_averages_the_two_components_by_their_posterior_probabilities():
    """A mixture of a flat and a textured component: each patch's estimate is the responsibility-weighted
    mix of the two Wiener filters (checked on an image of one patch)."""
    cov = _patch_covariance()
    covs = np.stack([0.01 * cov, cov])
    patch = np.random.default_rng(3).standard_normal((SIZE, SIZE)) * 25
    y = patch.ravel() - patch.mean()
    log_p = [np.log(w) - 0.5 * np.linalg.slogdet(c + 100 * np.eye(16))[1]
             - 0.5 * y @ np.linalg.solve(c + 100 * np.eye(16), y) for w, c in zip((0.3, 0.7), covs, strict=True)]
    p = np.exp(log_p - np.logaddexp(*log_p))
    expected = sum(pk * c @ np.linalg.solve(c + 100 * np.eye(16), y) for pk, c in zip(p, covs, strict=True))
    got = mmse_denoise(patch, GaussianMixturePrior([0.3, 0.7], covs), 10.0, size=SIZE)
    np.testing.assert_allclose(got.ravel(), expected + patch.mean(), rtol=1e-10)


def test_mmse_and_epll_reduce_the_error(images):
    clean, noisy = images
    prior = GaussianMixturePrior([1.0], _patch_covariance()[None])
    before = psnr(clean, noisy)
    mmse = psnr(clean, mmse_denoise(noisy, prior, 20.0, size=SIZE))
    epll = psnr(clean, epll_denoise(noisy, prior, 20.0, size=SIZE))
    assert mmse > before + 3.0 and epll > before + 3.0


def test_epll_with_a_huge_lambda_returns_the_noisy_image(images):
    _, noisy = images
    prior = GaussianMixturePrior([1.0], _patch_covariance()[None])
    np.testing.assert_allclose(epll_denoise(noisy, prior, 20.0, lam=1e14, size=SIZE), noisy, rtol=1e-9)


def test_one_epll_step_without_the_data_term_is_patch_averaged_map(images):
    """lambda = 0 and one beta = sigma^-2: x = average of the z_i, and with one Gaussian component
    the MAP patch is its Wiener filter, i.e. the single-pass MMSE estimate."""
    _, noisy = images
    prior = GaussianMixturePrior([1.0], _patch_covariance()[None])
    np.testing.assert_allclose(epll_denoise(noisy, prior, 20.0, betas=[1 / 400], lam=0.0, size=SIZE),
                               mmse_denoise(noisy, prior, 20.0, size=SIZE), rtol=1e-10)


def test_an_epll_step_weighs_the_noisy_pixel_alike_everywhere_borders_included(images):
    """With the data weight counted as often as the prior counts a pixel (lambda c_j / D), one step is
    x = w y + (1 - w) (patch average of the z_i) with one w = (lambda / D) / (lambda / D + beta) at every pixel.
    Zoran & Weiss's uniform lambda gave the corners (one patch) w = 1/2 here against 1/17 inside."""
    _, noisy = images
    prior = GaussianMixturePrior([1.0], _patch_covariance()[None])
    beta, lam = 1 / 400, 16 / 400
    averaged = epll_denoise(noisy, prior, 20.0, betas=[beta], lam=0.0, size=SIZE)
    w = (lam / SIZE**2) / (lam / SIZE**2 + beta)
    np.testing.assert_allclose(epll_denoise(noisy, prior, 20.0, betas=[beta], lam=lam, size=SIZE),
                               w * noisy + (1 - w) * averaged, rtol=1e-10)


def test_epll_restores_the_borders_as_well_as_the_interior():
    """On a stationary field the outer SIZE - 1 pixels (fewer patches cover them, and fewer neighbours inform
    them) end nearly as clean as the rest: their mean squared error is 1.17 times the interior's, against 1.30
    with Zoran & Weiss's uniform lambda (deterministic: fixed seeds)."""
    clean = _field((96, 96), seed=4)
    noisy = clean + 20.0 * np.random.default_rng(5).standard_normal(clean.shape)
    prior = GaussianMixturePrior([1.0], _patch_covariance()[None])
    error = (epll_denoise(noisy, prior, 20.0, size=SIZE) - clean) ** 2
    border = np.ones(error.shape, bool)
    border[SIZE - 1:-(SIZE - 1), SIZE - 1:-(SIZE - 1)] = False
    assert error[border].mean() < 1.25 * error[~border].mean()


def test_one_epll_step_with_the_mmse_z_step_is_the_single_pass(images):
    """With the posterior-mean z-step, lambda = 0 and one beta = sigma^-2, EPLL is the single-pass MMSE
    under any mixture; with the MAP z-step it is not, when the patches' components are uncertain."""
    _, noisy = images
    cov = _patch_covariance()
    prior = GaussianMixturePrior([0.4, 0.6], np.stack([0.05 * cov, 2.0 * cov]))
    one_step = {"betas": [1 / 400], "lam": 0.0, "size": SIZE}
    single = mmse_denoise(noisy, prior, 20.0, size=SIZE)
    np.testing.assert_allclose(epll_denoise(noisy, prior, 20.0, z_step="mmse", **one_step), single, rtol=1e-10)
    np.testing.assert_allclose(epll_denoise(noisy, prior, 20.0, z_step="mmse", max_elements=50, **one_step), single,
                               rtol=1e-10)
    assert np.abs(epll_denoise(noisy, prior, 20.0, **one_step) - single).max() > 1e-3
    with pytest.raises(ValueError, match="'map', 'mmse'"):
        epll_denoise(noisy, prior, 20.0, z_step="mean", size=SIZE)


def test_a_tensor_gives_a_tensor_and_sigma_must_be_positive(images):
    _, noisy = images
    prior = GaussianMixturePrior([1.0], _patch_covariance()[None])
    out = epll_denoise(torch.as_tensor(noisy), prior, 20.0, size=SIZE)
    assert torch.is_tensor(out) and out.dtype == torch.float64 and out.shape == noisy.shape
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="sigma"):
            mmse_denoise(noisy, prior, bad, size=SIZE)


@pytest.mark.parametrize("denoise", [mmse_denoise, epll_denoise])
def test_the_denoisers_run_under_the_thread_policy(images, monkeypatch, denoise):
    """Each chunk of patches is a step of a thread policy capped at ``threads``: the steps run (with one
    thread or the cap), the image is the one-thread image to rounding, and torch's setting is restored."""
    import pyro_memo.engine.threads as threads_module

    _, noisy = images
    cov = _patch_covariance()
    prior = GaussianMixturePrior([0.4, 0.6], np.stack([0.05 * cov, 2.0 * cov]))
    steps = []
    original = threads_module.ThreadPolicy.step

    def counted(self):
        steps.append(self.threads)
        return original(self)

    monkeypatch.setattr(threads_module.ThreadPolicy, "step", counted)
    saved = torch.get_num_threads()
    one = denoise(noisy, prior, 20.0, size=SIZE, max_elements=4000, threads=1)
    assert steps and set(steps) == {1}
    steps.clear()
    two = denoise(noisy, prior, 20.0, size=SIZE, max_elements=4000, threads=2)
    assert steps and set(steps) == {2} and torch.get_num_threads() == saved
    np.testing.assert_allclose(two, one, rtol=1e-12)


def test_psnr():
    a = np.zeros((4, 4))
    assert psnr(a, a + 255.0) == pytest.approx(0.0)
    assert psnr(a, a + 25.5) == pytest.approx(20.0)
    assert psnr(a, a) == float("inf")
    with pytest.raises(ValueError, match="shape"):
        psnr(a, np.zeros((4, 5)))


@pytest.mark.parametrize("denoise", [mmse_denoise, epll_denoise])
def test_the_denoisers_form_patches_a_strip_at_a_time(images, denoise, monkeypatch):
    """Every overlapping patch of the image was formed at once, max_elements bounding only the log joints: a
    768 x 768 image peaked at 1.4 GB, a 12-megapixel photograph would need some 30 GB. Now no unfold or fold
    holds more than max_elements numbers (or one row of patches), with the same image out."""
    import types

    import torch.nn.functional as F

    from pyro_memo.denoising import patches

    _, noisy = images
    prior = GaussianMixturePrior([1.0, 2.0], np.stack([_patch_covariance(), 30.0 * np.eye(SIZE * SIZE)]))
    whole = denoise(noisy, prior, 20.0, size=SIZE)
    largest = []

    def spy(fn):
        def call(x, *args, **kwargs):
            out = fn(x, *args, **kwargs)
            largest.append(max(x.numel(), out.numel()) if fn is F.unfold else x.numel())
            return out
        return call

    monkeypatch.setattr(patches, "F", types.SimpleNamespace(unfold=spy(F.unfold), fold=spy(F.fold)))
    row = (noisy.shape[1] - SIZE + 1) * SIZE * SIZE  # one row of patches: 528 numbers
    strips = denoise(noisy, prior, 20.0, size=SIZE, max_elements=3 * row)
    assert largest and max(largest) <= 3 * row
    np.testing.assert_allclose(strips, whole, rtol=1e-12)
