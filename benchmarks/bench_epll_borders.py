"""EPLL at the image's borders: Zoran & Weiss's uniform data weight against the per-pixel one ``epll_denoise`` uses.

EPLL's x-step is :math:`x_j = (\\lambda_j y_j + \\beta (\\sum_i P_i^T z_i)_j) / (\\lambda_j + \\beta c_j)`, with
:math:`c_j` the patches covering pixel :math:`j`. Zoran & Weiss (2011) keep :math:`\\lambda_j = D / \\sigma^2` at
every pixel; near the borders :math:`c_j < D`, so the noisy value outweighs the prior there (at a corner,
:math:`c_j = 1`, it gets half the weight at the last :math:`\\beta`, against 1/65 inside). ``epll_denoise`` counts the
data term as often as the prior counts the pixel, :math:`\\lambda_j = c_j / \\sigma^2`, which is Zoran & Weiss's
constant inside the image. This script scores both rules and the single-pass MMSE on the whole image, on its
interior and on its outer ``size - 1`` pixels, under either a fixed-K memoized prior fitted here on ``--n`` random
patches of the photographs other than the test image (``--train all``: the 16 bundled others; ``natural``: the ten
natural ones), or saved priors (``bench_denoise.py --save-priors`` files) given with ``--priors``.

    OMP_NUM_THREADS=1 python benchmarks/bench_epll_borders.py [--n 200000] [--K 50] [--train all|natural]
        [--priors A.pt B.pt] [--image camera] [--crop 256] [--sigma 25] [--noise-seeds 0,1]
"""

import os
import tempfile
import time

import numpy as np
import torch
from _common import NATURAL_PHOTOGRAPHS, make_parser

from pyro_memo.denoising import (
    BETAS,
    PATCH,
    PHOTOGRAPHS,
    GaussianMixturePrior,
    add_noise,
    center_crop,
    coverage,
    epll_denoise,
    fit_patch_mixture,
    image_patches,
    load_image,
    map_patches,
    mmse_denoise,
    put_back,
    write_patches,
)


def epll_uniform_lambda(noisy, prior, sigma, size=PATCH):
    """EPLL with Zoran & Weiss's data weight, :math:`\\lambda = D / \\sigma^2` at every pixel (their code's rule),
    from the library's patch operations (every patch of the image at once: a benchmark's memory)."""
    var = float(sigma) ** 2
    y = torch.as_tensor(np.asarray(noisy, dtype=np.float64))
    shape = tuple(y.shape)
    count = coverage(shape, size, y)
    lam, x = size * size / var, y
    for b in BETAS:
        beta = b / var
        patches = image_patches(x, size)
        dc = patches.mean(-1, keepdim=True)
        z = map_patches(patches - dc, prior, 1.0 / beta) + dc
        x = (lam * y + beta * put_back(z, shape, size)) / (lam + beta * count)
    return x.numpy()


def regions(clean, estimate, band=PATCH - 1):
    """PSNR (dB) of ``estimate`` on the whole image, its interior and its outer ``band`` pixels."""
    error = (np.asarray(clean, dtype=np.float64) - np.asarray(estimate, dtype=np.float64)) ** 2
    border = np.ones(error.shape, bool)
    border[band:-band, band:-band] = False

    def db(mse):
        return 10 * np.log10(255.0**2 / mse)

    return db(error.mean()), db(error[~border].mean()), db(error[border].mean())


def fitted_prior(args):
    """A fixed-K memoized prior on ``--n`` patches of the training photographs."""
    names = [p for p in (PHOTOGRAPHS if args.train == "all" else NATURAL_PHOTOGRAPHS) if p != args.image]
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "patches.npy")
        write_patches(path, [load_image(name) for name in names], args.n, seed=0)
        start = time.perf_counter()
        fit = fit_patch_mixture(path, K=args.K, laps=args.laps, batches=args.batches, seed=0)
    print(f"prior: fixed K = {args.K}, {args.laps} laps on {args.n} patches of {', '.join(names)}; "
          f"fit {time.perf_counter() - start:.1f} s", flush=True)
    return f"memoized fit, K = {args.K}", GaussianMixturePrior.from_posterior(fit.posterior)


def saved_prior(path):
    """A prior ``bench_denoise.py --save-priors`` wrote (``{"weights", "covariances"}``)."""
    saved = torch.load(path)
    return GaussianMixturePrior(saved["weights"], saved["covariances"])


def main():
    parser = make_parser(__doc__)
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--K", type=int, default=50)
    parser.add_argument("--laps", type=int, default=10)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--train", choices=("all", "natural"), default="all")
    parser.add_argument("--priors", nargs="*", default=None, help="saved priors instead of a fit here")
    parser.add_argument("--image", default="camera")
    parser.add_argument("--crop", type=int, default=None)
    parser.add_argument("--sigma", type=float, default=25.0)
    parser.add_argument("--noise-seeds", default="0,1")
    args = parser.parse_args()
    clean = load_image(args.image)
    clean = clean if args.crop is None else center_crop(clean, args.crop)
    print(f"{args.image} {clean.shape[0]}x{clean.shape[1]}, sigma {args.sigma:g}; torch threads "
          f"{torch.get_num_threads()}; PSNR (dB) whole / interior / outer {PATCH - 1} pixels", flush=True)
    priors = [fitted_prior(args)] if not args.priors else [(path, saved_prior(path)) for path in args.priors]
    methods = [("single pass (MMSE)", mmse_denoise), ("EPLL, uniform lambda (Z & W)", epll_uniform_lambda),
               ("EPLL, lambda_j = c_j / sigma^2", epll_denoise)]
    for name, prior in priors:
        print(f"\n[{name}] prior of {prior.K} components")
        for seed in (int(s) for s in args.noise_seeds.split(",")):
            noisy = add_noise(clean, args.sigma, seed=seed)
            scores = {}
            for label, method in methods:
                start = time.perf_counter()
                scores[label] = regions(clean, method(noisy, prior, args.sigma))
                whole, inner, outer = scores[label]
                print(f"  noise seed {seed}  {label:31s} {whole:.3f} / {inner:.3f} / {outer:.3f}  "
                      f"({time.perf_counter() - start:.1f} s)", flush=True)
            single = scores[methods[0][0]][0]
            print(f"  noise seed {seed}  EPLL - single pass: uniform {scores[methods[1][0]][0] - single:+.3f} dB, "
                  f"per pixel {scores[methods[2][0]][0] - single:+.3f} dB", flush=True)


if __name__ == "__main__":
    main()
