"""Image denoising with Gaussian-mixture patch priors learnt by memoized VB (Hughes & Sudderth 2013,
§4.4): zero-mean 8 x 8 training patches (in memory or streamed to a ``.npy`` file), the patch prior of
a fitted DP mixture or of scikit-learn's ``GaussianMixture``, single-pass patch MMSE denoising and EPLL
restoration by half-quadratic splitting (Zoran & Weiss 2011), and PSNR.

Reading images needs scikit-image (``pip install 'pyro-memo[denoise]'``).
"""

from .epll import BETAS, epll_denoise, map_patches
from .images import PHOTOGRAPHS, add_noise, center_crop, load_image, to_gray255
from .mmse import mmse_denoise, mmse_patches
from .patches import (
    PATCH,
    average_patches,
    coverage,
    image_patches,
    iter_patch_chunks,
    put_back,
    remove_dc,
    sample_patches,
    write_patches,
)
from .prior import GaussianMixturePrior, component_scores
from .quality import psnr
from .training import fit_patch_mixture, patch_family

__all__ = [
    "BETAS",
    "GaussianMixturePrior",
    "PATCH",
    "PHOTOGRAPHS",
    "add_noise",
    "average_patches",
    "center_crop",
    "component_scores",
    "coverage",
    "epll_denoise",
    "fit_patch_mixture",
    "image_patches",
    "iter_patch_chunks",
    "load_image",
    "map_patches",
    "mmse_denoise",
    "mmse_patches",
    "patch_family",
    "psnr",
    "put_back",
    "remove_dc",
    "sample_patches",
    "to_gray255",
    "write_patches",
]
