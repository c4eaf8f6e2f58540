"""Why EPLL does not beat single-pass patch denoising here (issue #16's EPLL bar): the same Gaussian-mixture
patch prior used three ways on the central ``--crop`` square of ``camera`` at sigma = 25, for priors learnt from
three training sets, including an *oracle* learnt from the clean test image itself.

For each training set, ``--n`` random zero-mean 8 x 8 patches are written to disk and a fixed-K memoized fit
(``--K``, ``--laps`` laps, ``--batches`` batches; no moves) gives the prior. Then:

* single pass, MAP component: each noisy patch Wiener-filtered by its most probable component, averaged;
* single pass, MMSE: each patch's posterior mean over all components, averaged (``mmse_denoise``);
* EPLL (``epll_denoise``: half-quadratic splitting, beta = sigma^-2 (1, 4, 8, 16, 32, 64), lambda = 64 / sigma^2)
  and variants: the z-step by the MMSE instead of the MAP component, three x/z rounds per beta, lambda halved
  and doubled, other beta schedules.

Training sets: ``all`` (the 16 bundled photographs but camera, the benchmark's default), ``natural`` (the
photographs of scenes and textures: astronaut, chelsea, coffee, rocket, brick, grass, gravel, clock, coins,
moon; no scans of text, micrographs or star fields), ``oracle`` (camera itself, clean).

With ``--objective`` each prior also scores the clean image, the single-pass MMSE estimate and EPLL's result by the
objective EPLL minimises, :math:`\\lambda/2 \\lVert x - y\\rVert^2 - \\sum_i \\log p(P_i x)`: if EPLL reaches the lowest
objective and still no higher PSNR, the splitting optimises and its optimum is the limit. ``--prior-scales`` refits
each training set's prior with the Wishart prior's scale matrix times each value (``fit_patch_mixture``'s
``prior_scale``); each fit prints its training ELBO per patch, a bound on the log evidence of the patches under
that prior, so comparing it across scales chooses the scale from the training data alone (empirical Bayes).
``--init-items`` refits with k-means++ started from each number of training patches (``MemoizedVB``'s
``init_items``; default 10,000): the local optimum it leads to decides more of the PSNR than the prior does, and
the training ELBO need not rank the optima as the PSNR does. ``--moves birth,merge,delete`` lets every fit
change K from its k-means++ start of ``--K`` components (a DP mixture whose moves see where the start put it).
The output also counts the training patches that are exactly flat (saturated regions of the photographs);
``--dequantize`` adds uniform noise U(-1/2, 1/2) to every training pixel first, so that none is (Theis, van den Oord
& Bethge 2016: a density fitted to quantised pixels can gain without bound on repeated values).

    OMP_NUM_THREADS=1 python benchmarks/bench_epll_checks.py [--n 200000] [--crop 256] [--K 50]
        [--sets all,natural,oracle] [--variants] [--objective] [--prior-scales 1,10] [--init-items 10000,100000]
        [--moves birth,merge,delete] [--dequantize]
"""

import itertools
import os
import tempfile
import time

import numpy as np
import torch
from _common import NATURAL_PHOTOGRAPHS, epll_variant, make_parser

from pyro_memo.denoising import (
    PHOTOGRAPHS,
    GaussianMixturePrior,
    add_noise,
    average_patches,
    center_crop,
    component_scores,
    epll_denoise,
    fit_patch_mixture,
    image_patches,
    load_image,
    map_patches,
    mmse_denoise,
    psnr,
    write_patches,
)

TEST_IMAGE = "camera"
SETS = {
    "all": [name for name in PHOTOGRAPHS if name != TEST_IMAGE],
    "natural": list(NATURAL_PHOTOGRAPHS),
    "oracle": [TEST_IMAGE],
}


def map_single_pass(noisy, prior, sigma):
    """Each zero-mean patch Wiener-filtered by its most probable component, averaged per pixel (EPLL's z-step at
    noise sigma, then plain averaging)."""
    y = torch.as_tensor(noisy, dtype=torch.float64)
    patches = image_patches(y)
    dc = patches.mean(-1, keepdim=True)
    return average_patches(map_patches(patches - dc, prior, sigma**2) + dc, tuple(y.shape))


def epll_objective(image, noisy, prior, sigma, chunk=4096):
    """:math:`\\lambda/2 \\lVert x - y\\rVert^2 - \\sum_i \\log p(P_i x)` with :math:`\\lambda = 64/\\sigma^2`, the
    patch prior's log density by log-sum-exp over its components (zero-mean patches, no noise)."""
    x = torch.as_tensor(image, dtype=torch.float64)
    y = torch.as_tensor(noisy, dtype=torch.float64)
    patches = image_patches(x)
    patches = patches - patches.mean(-1, keepdim=True)
    precisions, log_norms = prior.noisy_terms(1e-9)
    log_p = sum(torch.logsumexp(component_scores(patches[i:i + chunk], precisions, log_norms)[0], -1).sum().item()
                for i in range(0, len(patches), chunk))
    return 64 / sigma**2 / 2 * float(((x - y) ** 2).sum()) - log_p


def main():
    parser = make_parser(__doc__)
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--crop", type=int, default=256)
    parser.add_argument("--K", type=int, default=50)
    parser.add_argument("--laps", type=int, default=4)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--sets", default="all,natural,oracle")
    parser.add_argument("--variants", action="store_true", help="also the EPLL variants (slow)")
    parser.add_argument("--objective", action="store_true", help="also EPLL's objective of clean, MMSE and EPLL")
    parser.add_argument("--prior-scales", default="1", help="Wishart prior scales to fit each prior with")
    parser.add_argument("--init-items", default="10000", help="patches k-means++ starts each fit from")
    parser.add_argument("--moves", default="", help="moves of every fit from its K = --K start (default: none)")
    parser.add_argument("--dequantize", action="store_true",
                        help="add uniform noise U(-1/2, 1/2) to every training pixel before sampling patches")
    args = parser.parse_args()
    sigma = 25.0
    clean = center_crop(load_image(TEST_IMAGE), args.crop)
    noisy = add_noise(clean, sigma, seed=0)
    kind = f"K = {args.K} start, moves {args.moves}" if args.moves else f"fixed K = {args.K}"
    print(f"{TEST_IMAGE} {args.crop}x{args.crop}, sigma {sigma:g}, noisy {psnr(clean, noisy):.2f} dB; priors: {kind} "
          f"memoized fits on {args.n} patches; torch threads {torch.get_num_threads()}", flush=True)
    b0 = (1, 4, 8, 16, 32, 64)
    variants = [("EPLL, MMSE z-step", dict(betas=b0, zstep="mmse")),
                ("EPLL, 3 rounds per beta", dict(betas=b0, rounds=3)),
                ("EPLL, lambda x 0.5", dict(betas=b0, lam_scale=0.5)),
                ("EPLL, lambda x 2", dict(betas=b0, lam_scale=2.0)),
                ("EPLL, beta (1 .. 32)", dict(betas=(1, 4, 8, 16, 32))),
                ("EPLL, beta (0.25, 1 .. 32)", dict(betas=(0.25, 1, 4, 8, 16, 32))),
                ("EPLL, beta (1, 2 .. 128)", dict(betas=(1, 2, 4, 8, 16, 32, 64, 128)))]
    for name in args.sets.split(","):
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "patches.npy")
            images = [load_image(n) for n in SETS[name]]
            if args.dequantize:
                rng = np.random.default_rng(1)
                images = [image + rng.uniform(-0.5, 0.5, image.shape) for image in images]
            write_patches(path, images, args.n, seed=0)
            flat = float((np.load(path, mmap_mode="r") == 0).all(-1).mean())
            print(f"\n[{name}] {100 * flat:.2f}% of the training patches are exactly flat (zero after removing the DC)")
            for scale, init_items in itertools.product([float(v) for v in args.prior_scales.split(",")],
                                                       [int(v) for v in args.init_items.split(",")]):
                start = time.perf_counter()
                fit = fit_patch_mixture(path, K=args.K, laps=args.laps, batches=args.batches, moves=args.moves,
                                        seed=0, prior_scale=scale, init_items=init_items)
                prior = GaussianMixturePrior.from_posterior(fit.posterior)
                moves = f", moves {args.moves}" if args.moves else ""
                print(f"\n[{name}] {', '.join(SETS[name])}: prior_scale {scale:g}, k-means++ from {init_items} "
                      f"patches{moves}, prior K = {prior.K}, training ELBO/patch {fit.elbo / args.n:.4f}, "
                      f"fit {time.perf_counter() - start:.1f} s")
                score(prior, clean, noisy, sigma, args, variants)


def score(prior, clean, noisy, sigma, args, variants):
    """Print each method's PSNR under ``prior`` (and with ``--objective`` EPLL's objective of its result)."""
    rows = [("single pass, MAP component", lambda: map_single_pass(noisy, prior, sigma)),
            ("single pass, MMSE", lambda: mmse_denoise(noisy, prior, sigma)),
            ("EPLL (default)", lambda: epll_denoise(noisy, prior, sigma))]
    if args.variants:
        rows += [(label, lambda kw=kw: epll_variant(noisy, prior, sigma, **kw)) for label, kw in variants]
    if args.objective:
        print(f"  {'clean image':30s} {'':>10s}  EPLL objective {epll_objective(clean, noisy, prior, sigma):.6g}")
    for label, run in rows:
        start = time.perf_counter()
        estimate = run()
        seconds = time.perf_counter() - start
        extra = f"  EPLL objective {epll_objective(estimate, noisy, prior, sigma):.6g}" if args.objective else ""
        print(f"  {label:30s} {psnr(clean, estimate):7.3f} dB  ({seconds:.1f} s){extra}", flush=True)


if __name__ == "__main__":
    main()
