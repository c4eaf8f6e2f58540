"""Choosing the patch prior's Wishart scale by held-out denoising of the *training* photographs, never ``camera``.

The zero-mean Gaussian family's default Wishart prior has ``nu = D + 2`` and scale matrix ``B`` the patches' second
moment matrix; ``fit_patch_mixture(prior_scale=s)`` multiplies ``B`` by ``s``. The training ELBO cannot choose ``s``
for denoising: it ranks the scales the other way round from the PSNR (bench_epll_checks.txt). Choosing ``s`` by its
PSNR on ``camera`` would be tuning on the test image. This script chooses it the way a user without a test image
would, by cross-validation over the training photographs:

* the ten natural photographs of ``bench_denoise.py --train natural`` are split into ``--folds`` folds of whole
  images (in that order: astronaut + chelsea, coffee + rocket, brick + grass, gravel + clock, coins + moon);
* for each fold and each scale in ``--scales``, ``--n`` zero-mean 8 x 8 patches of the other photographs are written
  to disk and a DP mixture is fitted by memoized VB from ``--K`` components (default 1) with ``--moves`` (default
  birth, merge, delete) for ``--laps`` laps over ``--batches`` batches;
* every held-out photograph, with white noise of standard deviation 25 (seed 0), is denoised by the single-pass
  patch MMSE under that prior.

Prints each fit (K, training ELBO per patch, seconds, each held-out PSNR) and, per scale, the mean held-out PSNR
over all ten photographs and its paired difference from the first scale (mean +- sd over the photographs).

``--score-priors A.pt B.pt ...`` instead scores priors already fitted on all ten photographs (the files
``bench_denoise.py --save-priors`` writes) on three natural photographs that are in neither the training set nor
the test set: scikit-learn's bundled ``china.jpg`` and ``flower.jpg`` and the left view of scikit-image's
``stereo_motorcycle``, at sigma 25, noise seed 0, single-pass MMSE; the prior with the highest mean is the one
chosen at full size.

    OMP_NUM_THREADS=1 python benchmarks/bench_denoise_validation.py [--scales 1,3,10] [--n 50000] [--laps 15]
        [--batches 10] [--K 1] [--moves birth,merge,delete] [--folds 0,1,2,3,4] [--json FILE]
    python benchmarks/bench_denoise_validation.py --combine A.json B.json   (one table from runs over other folds)
    python benchmarks/bench_denoise_validation.py --score-priors /tmp/s30/moves.pt /tmp/s1200/moves.pt
"""

import json
import os
import statistics
import tempfile
import time

import torch
from _common import NATURAL_PHOTOGRAPHS, make_parser

from pyro_memo.denoising import (
    GaussianMixturePrior,
    add_noise,
    fit_patch_mixture,
    load_image,
    mmse_denoise,
    psnr,
    to_gray255,
    write_patches,
)

FOLDS = [NATURAL_PHOTOGRAPHS[i:i + 2] for i in range(0, len(NATURAL_PHOTOGRAPHS), 2)]
SIGMA = 25.0


def floats(text):
    return [float(v) for v in text.split(",")]


def ints(text):
    return [int(v) for v in text.split(",")]


def parse_args():
    parser = make_parser(__doc__)
    parser.add_argument("--scales", type=floats, default=[1.0, 3.0, 10.0], help="comma-separated prior scales")
    parser.add_argument("--folds", type=ints, default=list(range(len(FOLDS))), help="comma-separated fold numbers")
    parser.add_argument("--n", type=int, default=50_000, help="training patches of each fold")
    parser.add_argument("--laps", type=int, default=15)
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--K", type=int, default=1, help="components each fit starts from")
    parser.add_argument("--moves", default="birth,merge,delete", help="moves of each fit ('' for fixed K)")
    parser.add_argument("--json", help="also write the held-out scores to this JSON file")
    parser.add_argument("--combine", nargs="+", metavar="JSON",
                        help="print the table of the scores in these files (runs over other folds) and stop")
    parser.add_argument("--score-priors", nargs="+", metavar="PT",
                        help="score these saved priors on the validation photographs and stop")
    args = parser.parse_args()
    if not all(0 < s < float("inf") for s in args.scales):
        parser.error(f"--scales must be positive numbers; got {args.scales}")
    if any(f not in range(len(FOLDS)) for f in args.folds):
        parser.error(f"--folds are numbers 0 .. {len(FOLDS) - 1}")
    return args


def held_out_scores(prior, names, clean, noisy):
    """Single-pass MMSE PSNR of each held-out photograph under ``prior``."""
    return {name: psnr(clean[name], mmse_denoise(noisy[name], prior, SIGMA)) for name in names}


def main():
    args = parse_args()
    if args.combine:
        return report(combine(args.combine))
    if args.score_priors:
        return score_saved(args.score_priors)
    print(f"torch threads {torch.get_num_threads()}; {args.n} patches per fold, {args.laps} laps, {args.batches} "
          f"batches, K = {args.K} start, moves {args.moves or 'none'}; held-out noise sigma {SIGMA:g}", flush=True)
    clean = {name: load_image(name) for name in NATURAL_PHOTOGRAPHS}
    noisy = {name: add_noise(image, SIGMA, seed=0) for name, image in clean.items()}
    scores = {scale: {} for scale in args.scales}
    for fold in args.folds:
        held_out = FOLDS[fold]
        train = [name for name in NATURAL_PHOTOGRAPHS if name not in held_out]
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "patches.npy")
            write_patches(path, [clean[name] for name in train], args.n, seed=0)
            for scale in args.scales:
                start = time.perf_counter()
                fit = fit_patch_mixture(path, K=args.K, laps=args.laps, batches=args.batches, moves=args.moves,
                                        seed=0, prior_scale=scale)
                seconds = time.perf_counter() - start
                prior = GaussianMixturePrior.from_posterior(fit.posterior)
                fold_scores = held_out_scores(prior, held_out, clean, noisy)
                scores[scale].update(fold_scores)
                shown = ", ".join(f"{name} {value:.3f} dB" for name, value in fold_scores.items())
                print(f"fold {fold} (held out {' + '.join(held_out)}), scale {scale:g}: K = {prior.K}, training "
                      f"ELBO/patch {fit.elbo / args.n:.4f}, fit {seconds:.0f} s; {shown}", flush=True)
    if args.json:
        with open(args.json, "w") as out:
            json.dump({format(scale, "g"): values for scale, values in scores.items()}, out)
    report(scores)


def validation_photographs():
    """Natural photographs in neither the training set nor the test set, grayscale on [0, 255]."""
    import skimage.data
    from sklearn.datasets import load_sample_image

    return {"china": to_gray255(load_sample_image("china.jpg")),
            "flower": to_gray255(load_sample_image("flower.jpg")),
            "motorcycle": to_gray255(skimage.data.stereo_motorcycle()[0])}


def score_saved(paths):
    """Single-pass MMSE PSNR of each saved prior on :func:`validation_photographs` at sigma 25 (seed 0)."""
    photos = validation_photographs()
    noisy = {name: add_noise(image, SIGMA, seed=0) for name, image in photos.items()}
    print(f"validation photographs at sigma {SIGMA:g} (noise seed 0): "
          + ", ".join(f"{name} {image.shape[0]}x{image.shape[1]}" for name, image in photos.items()))
    means = {}
    for path in paths:
        saved = torch.load(path)
        prior = GaussianMixturePrior(saved["weights"], saved["covariances"])
        scores = [psnr(photos[name], mmse_denoise(noisy[name], prior, SIGMA)) for name in photos]
        means[path] = statistics.fmean(scores)
        shown = ", ".join(f"{name} {value:.3f} dB" for name, value in zip(photos, scores, strict=True))
        print(f"{path}: K = {prior.K}; {shown}; mean {means[path]:.3f} dB", flush=True)
    print(f"chosen: {max(means, key=means.get)}")


def combine(paths):
    """The scores of several ``--json`` files (runs over different folds) as one ``{scale: {photo: dB}}``."""
    scores = {}
    for path in paths:
        with open(path) as f:
            for scale, values in json.load(f).items():
                scores.setdefault(float(scale), {}).update(values)
    return scores


def report(scores):
    """Per scale: mean held-out PSNR and its paired difference from the first scale over the photographs."""
    scales = list(scores)
    names = list(scores[scales[0]])
    base = scores[scales[0]]
    print(f"\nheld-out single-pass MMSE over {len(names)} photographs ({', '.join(names)})")
    print(f"{'scale':>8s} {'mean dB':>9s} {'minus scale ' + format(scales[0], 'g'):>22s} {'photos higher':>14s}")
    for scale in scales:
        diffs = [scores[scale][name] - base[name] for name in names]
        spread = statistics.stdev(diffs) if len(diffs) > 1 else 0.0
        higher = sum(d > 0 for d in diffs)
        print(f"{scale:8g} {statistics.fmean(scores[scale].values()):9.3f} "
              f"{statistics.fmean(diffs):+13.3f} +- {spread:.3f} {higher:>8d}/{len(names)}")


if __name__ == "__main__":
    main()
