"""Is EPLL's shortfall at sigma 25 a property of ``camera``? EPLL against the single pass on every natural
photograph, each held out in turn.

Issue #16 asks EPLL (Zoran & Weiss 2011, half-quadratic splitting) to denoise ``camera`` at sigma 25 at least 0.3 dB
better than the single-pass patch MMSE. bench_epll_checks.txt and bench_epll_noise.txt find it below the single
pass at sigma 25 under every prior tried, and above it from sigma 40 on. This script asks whether that is the test
image: each of the eleven natural photographs (camera and the ten of ``NATURAL_PHOTOGRAPHS``) is held out in turn;
``--n`` zero-mean 8 x 8 patches of the other ten train a fixed-K memoized fit (``--K``, ``--laps``, ``--batches``;
the defaults of bench_epll_checks.py), and the held-out photograph's central ``--crop`` square, with white noise of
each sigma in ``--sigmas`` (noise seed 0), is denoised by the single-pass MMSE (``mmse_denoise``) and by EPLL with
its defaults (``epll_denoise``). The table gives both PSNRs and EPLL minus single pass per image and sigma, and
their mean over the images. With ``--mmse-z`` it also gives EPLL with the z-step by each patch's posterior mean
instead of its most probable component (``epll_denoise(..., z_step="mmse")``): is EPLL's loss on some images the MAP
z-step's?

    OMP_NUM_THREADS=1 python benchmarks/bench_epll_images.py [--images camera,moon] [--sigmas 25,50] [--n 200000]
        [--mmse-z]
"""

import os
import tempfile
import time

import torch
from _common import NATURAL_PHOTOGRAPHS, make_parser

from pyro_memo.denoising import (
    GaussianMixturePrior,
    add_noise,
    center_crop,
    epll_denoise,
    fit_patch_mixture,
    load_image,
    mmse_denoise,
    psnr,
    write_patches,
)

IMAGES = ("camera", *NATURAL_PHOTOGRAPHS)


def held_out_prior(test, args):
    """The fixed-K memoized patch prior learnt from ``--n`` patches of every image of :data:`IMAGES` but ``test``."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "patches.npy")
        write_patches(path, [load_image(name) for name in IMAGES if name != test], args.n, seed=0)
        fit = fit_patch_mixture(path, K=args.K, laps=args.laps, batches=args.batches, moves="", seed=0)
    return GaussianMixturePrior.from_posterior(fit.posterior)


def main():
    parser = make_parser(__doc__)
    parser.add_argument("--images", default=",".join(IMAGES), help="the photographs to hold out, in turn")
    parser.add_argument("--sigmas", default="25,50")
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--crop", type=int, default=256)
    parser.add_argument("--K", type=int, default=50)
    parser.add_argument("--laps", type=int, default=4)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--mmse-z", action="store_true", help="also EPLL with the MMSE z-step")
    args = parser.parse_args()
    sigmas = [float(s) for s in args.sigmas.split(",")]
    print(f"torch threads {torch.get_num_threads()}; each photograph held out in turn, prior: fixed K = {args.K}, "
          f"{args.laps} laps on {args.n} patches of the other ten; test: central {args.crop} square, noise seed 0; "
          f"EPLL with its default schedule and data weight", flush=True)
    rows = []
    for name in args.images.split(","):
        start = time.perf_counter()
        prior = held_out_prior(name, args)
        print(f"{name}: prior K = {prior.K}, fit {time.perf_counter() - start:.1f} s", flush=True)
        clean = center_crop(load_image(name), args.crop)
        for sigma in sigmas:
            noisy = add_noise(clean, sigma, seed=0)
            single = psnr(clean, mmse_denoise(noisy, prior, sigma))
            epll = psnr(clean, epll_denoise(noisy, prior, sigma))
            mmse_z = psnr(clean, epll_denoise(noisy, prior, sigma, z_step="mmse")) if args.mmse_z else None
            rows.append((name, sigma, psnr(clean, noisy), single, epll, mmse_z))
            extra = f", EPLL with the MMSE z-step {mmse_z:.3f} dB" if args.mmse_z else ""
            print(f"  sigma {sigma:g}: single pass {single:.3f} dB, EPLL {epll:.3f} dB{extra}", flush=True)
    extra = f" {'MMSE-z - single':>16s}" if args.mmse_z else ""
    print(f"\n{'held out':12s} {'sigma':>5s} {'noisy dB':>9s} {'single dB':>10s} {'EPLL dB':>8s} {'EPLL-single':>12s}"
          + extra)
    for name, sigma, noisy, single, epll, mmse_z in rows:
        extra = f" {mmse_z - single:+16.3f}" if args.mmse_z else ""
        print(f"{name:12s} {sigma:5g} {noisy:9.2f} {single:10.3f} {epll:8.3f} {epll - single:+12.3f}" + extra)
    for sigma in sigmas:
        for label, column in [("EPLL", 4)] + ([("EPLL with the MMSE z-step", 5)] if args.mmse_z else []):
            gains = torch.tensor([row[column] - row[3] for row in rows if row[1] == sigma])
            print(f"sigma {sigma:g}: {label} - single pass over {len(gains)} images: mean {gains.mean():+.3f} dB, "
                  f"min {gains.min():+.3f}, max {gains.max():+.3f}")


if __name__ == "__main__":
    main()
