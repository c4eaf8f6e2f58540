"""EPLL's gain over the single-pass patch MMSE across noise levels, under priors saved by ``bench_denoise.py``.

Issue #16 asks EPLL (Zoran & Weiss 2011, half-quadratic splitting) to denoise ``camera`` at sigma 25 at least
0.3 dB better than the single pass. bench_epll_checks.txt finds it at or below the single pass at sigma 25 under
every prior tried. This script asks whether that is a property of the noise level or of the implementation: for
each saved prior (``bench_denoise.py --save-priors`` files, ``{"weights", "covariances"}``) and each sigma in
``--sigmas``, the held-out ``camera`` (512 x 512, or its central ``--crop`` square) with white noise of that
standard deviation (``--noise-seed``) is denoised by the single-pass MMSE and by EPLL with its defaults; the
table gives both PSNRs and EPLL minus single pass.

    OMP_NUM_THREADS=1 python benchmarks/bench_epll_noise.py --priors /tmp/priors/moves.pt /tmp/priors/sklearn.pt
        [--sigmas 15,25,50,75] [--crop 256] [--noise-seed 0]
"""

import os
import time

import torch
from _common import make_parser

from pyro_memo.denoising import (
    GaussianMixturePrior,
    add_noise,
    center_crop,
    epll_denoise,
    load_image,
    mmse_denoise,
    psnr,
)


def parse_args():
    parser = make_parser(__doc__)
    parser.add_argument("--priors", nargs="+", required=True, help="saved priors (bench_denoise.py --save-priors)")
    parser.add_argument("--sigmas", default="15,25,50,75", help="comma-separated noise standard deviations")
    parser.add_argument("--crop", type=int, default=None, help="denoise the central CROP x CROP square of camera")
    parser.add_argument("--noise-seed", type=int, default=0)
    args = parser.parse_args()
    try:
        args.sigmas = [float(v) for v in args.sigmas.split(",")]
    except ValueError:
        parser.error(f"--sigmas takes comma-separated numbers; got {args.sigmas!r}")
    if not all(0 < s < float("inf") for s in args.sigmas):
        parser.error(f"--sigmas must be positive numbers; got {args.sigmas}")
    missing = [path for path in args.priors if not os.path.isfile(path)]
    if missing:
        parser.error(f"no prior file at {', '.join(missing)}")
    return args


def main():
    args = parse_args()
    clean = load_image("camera")
    if args.crop:
        clean = center_crop(clean, args.crop)
    print(f"torch threads {torch.get_num_threads()}; camera {clean.shape[0]}x{clean.shape[1]}, noise seed "
          f"{args.noise_seed}; EPLL with its default schedule and data weight", flush=True)
    rows = []
    for path in args.priors:
        saved = torch.load(path)
        prior = GaussianMixturePrior(saved["weights"], saved["covariances"])
        for sigma in args.sigmas:
            noisy = add_noise(clean, sigma, seed=args.noise_seed)
            start = time.perf_counter()
            single = psnr(clean, mmse_denoise(noisy, prior, sigma))
            middle = time.perf_counter()
            epll = psnr(clean, epll_denoise(noisy, prior, sigma))
            end = time.perf_counter()
            rows.append((path, prior.K, sigma, psnr(clean, noisy), single, epll))
            print(f"{path} (K = {prior.K}), sigma {sigma:g}: single pass {single:.3f} dB ({middle - start:.0f} s), "
                  f"EPLL {epll:.3f} dB ({end - middle:.0f} s)", flush=True)
    print(f"\n{'prior':40s} {'K':>4s} {'sigma':>6s} {'noisy dB':>9s} {'single dB':>10s} {'EPLL dB':>8s} "
          f"{'EPLL-single':>12s}")
    for path, K, sigma, noisy, single, epll in rows:
        print(f"{path:40s} {K:4d} {sigma:6g} {noisy:9.2f} {single:10.3f} {epll:8.3f} {epll - single:+12.3f}")


if __name__ == "__main__":
    main()
