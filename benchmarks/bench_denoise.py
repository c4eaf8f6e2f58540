"""Patch denoising (Hughes & Sudderth 2013, §4.4; Zoran & Weiss 2011): Gaussian-mixture priors of 8 x 8
zero-mean patches learnt three ways, each used to denoise the held-out ``camera`` photograph.

1. ``--n`` random zero-mean 8 x 8 patches (default 2,000,000) of scikit-image's bundled photographs
   other than ``camera`` are written to a .npy file on disk, chunk by chunk.
2. Priors: (a) a zero-mean DP Gaussian mixture by memoized VB with birth / merge / delete moves from
   K = 1 (or from a k-means++ start of ``--moves-K`` components), reading the .npy file batch by batch;
   (b) memoized VB with a fixed K (``--K``, default 50) and no moves, read the same way; both start from
   k-means++ on ``--init-items`` patches (default 10,000); (c) scikit-learn's
   ``GaussianMixture(n_components=K, covariance_type="full")`` by EM, which needs the patches in memory:
   it is fitted to a random subset of ``--sklearn-n`` patches when that is smaller than ``--n`` (the
   output says so); EM also learns component means, which the prior ignores (their size is printed).
3. ``camera`` plus white noise of standard deviation ``--sigma`` (default 25; noise seed
   ``--noise-seed``) is denoised under each prior by single-pass patch MMSE and by EPLL
   (half-quadratic splitting, beta = sigma^-2 [1, 4, 8, 16, 32, 64], lambda = 64 / sigma^2).

Prints the fit times and a PSNR table; ``--noise-seeds 0,1,2,3,4`` also scores every prior on those noise draws
and prints mean +- sd and the paired differences against the first prior (one noise draw moves the PSNR by
hundredths of a dB). ``--save-priors DIR`` keeps each prior. ``--prior-scale S`` multiplies the memoized fits'
Wishart scale matrix by ``S`` (``bench_denoise_validation.py`` chooses it by held-out denoising of the training
photographs, without ``camera``). ``--birth-targets T`` gives the DP fit's births ``T`` target components a lap
(``BirthMove(targets=T)``; default 1). ``--device cuda`` puts the family, the posterior,
every data batch and the denoising on the GPU.

    OMP_NUM_THREADS=1 python benchmarks/bench_denoise.py [--n 2000000] [--laps 20] [--batches 100] \\
        [--K 50] [--moves-K 1] [--init-items N] [--sklearn-n 2000000] [--device cuda] [--dir DIR] [--minutes M] \\
        [--progress [--score-every N]] [--noise-seeds 0,1,2] [--save-priors DIR] [--prior-scale S] [--birth-targets T]
"""

import os
import tempfile
import time

import numpy as np
import torch
from _common import NATURAL_PHOTOGRAPHS, make_parser
from sklearn.mixture import GaussianMixture

from pyro_memo.denoising import (
    PHOTOGRAPHS,
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

TEST_IMAGE = "camera"


def parse_args():
    parser = make_parser(__doc__)
    parser.add_argument("--n", type=int, default=2_000_000, help="training patches written to disk")
    parser.add_argument("--dir", default=None, help="folder of the patch file (default: a temporary folder, removed)")
    parser.add_argument("--laps", type=int, default=20, help="laps of each memoized fit")
    parser.add_argument("--batches", type=int, default=100, help="batches of each memoized fit")
    parser.add_argument("--K", type=int, default=50, help="components of the fixed-K and scikit-learn fits")
    parser.add_argument("--sklearn-n", type=int, default=None, help="patches scikit-learn fits (default: --n)")
    parser.add_argument("--sklearn-iter", type=int, default=100, help="EM iterations of scikit-learn")
    parser.add_argument("--sigma", type=float, default=25.0)
    parser.add_argument("--noise-seed", type=int, default=0)
    parser.add_argument("--noise-seeds", default=None, type=lambda text: [int(v) for v in text.split(",")],
                        help="comma-separated noise seeds to score every prior at as well (paired table at the end)")
    parser.add_argument("--save-priors", default=None,
                        help="folder to write each prior to (torch.save of its weights and covariances)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the patches and of every fit")
    parser.add_argument("--crop", type=int, default=None, help="denoise the central CROP x CROP square of camera")
    parser.add_argument("--device", default="cpu", help="torch device of the memoized fits and the denoising")
    parser.add_argument("--local-dtype", default=None, choices=("float32", "float64"),
                        help="precision of the memoized fits' local step (globals, memo and ELBO stay float64)")
    parser.add_argument("--minutes", type=float, default=None,
                        help="stop each memoized fit after the first lap that ends past this many minutes")
    parser.add_argument("--progress", action="store_true", help="print each lap of the memoized fits")
    parser.add_argument("--score-every", type=int, default=0,
                        help="with --progress, also the single-pass MMSE PSNR of the prior every this many laps")
    parser.add_argument("--moves-K", type=int, default=1, help="components the DP fit with moves starts from")
    parser.add_argument("--init-items", type=int, default=None,
                        help="patches k-means++ starts the memoized fits from (MemoizedVB's init_items; "
                             "default 10,000)")
    parser.add_argument("--prior-scale", type=float, default=1.0,
                        help="the memoized fits' Wishart prior scale (fit_patch_mixture's prior_scale; "
                             "bench_denoise_validation.py chooses it without camera)")
    parser.add_argument("--birth-targets", type=int, default=1,
                        help="target components of the DP fit's births per lap (BirthMove's targets)")
    parser.add_argument("--skip", default="", help="comma-separated fits to skip: moves, fixed, sklearn")
    parser.add_argument("--train", default="all", choices=("all", "natural"),
                        help="training photographs: all bundled but camera, or the natural scenes and textures "
                             "(no scanned text, micrographs or star fields)")
    args = parser.parse_args()
    if not 0 < args.prior_scale < float("inf"):
        parser.error(f"--prior-scale must be a positive number; got {args.prior_scale}")
    if args.birth_targets < 1:
        parser.error(f"--birth-targets must be at least 1; got {args.birth_targets}")
    return args


def write_training_patches(path, args):
    names = ([name for name in PHOTOGRAPHS if name != TEST_IMAGE] if args.train == "all"
             else list(NATURAL_PHOTOGRAPHS))
    start = time.perf_counter()
    write_patches(path, [load_image(name) for name in names], args.n, seed=args.seed)
    print(f"{args.n} zero-mean 8x8 patches of {len(names)} photographs ({', '.join(names)}) written to "
          f"{path} ({os.path.getsize(path) / 1e9:.2f} GB) in {time.perf_counter() - start:.1f} s", flush=True)


def memoized_prior(path, K, moves, args, clean, noisy, **options):
    """``(prior, seconds)`` of a memoized fit reading ``path`` batch by batch; the seconds leave out the
    scoring of ``--score-every``."""
    start, scoring = time.perf_counter(), 0.0

    def lap_done(lap, elbo, posterior):
        nonlocal scoring
        seconds = time.perf_counter() - start - scoring
        if args.progress:
            score = ""
            if args.score_every and (lap + 1) % args.score_every == 0:
                db, score_seconds = run_denoiser(mmse_denoise, GaussianMixturePrior.from_posterior(posterior),
                                                 clean, noisy, args)
                score, scoring = f", single-pass MMSE {db:.3f} dB", scoring + score_seconds
            print(f"    lap {lap + 1}: ELBO/patch {elbo / args.n:.4f}, K = {posterior.K}, {seconds:.0f} s{score}",
                  flush=True)
        return args.minutes is not None and seconds > 60 * args.minutes

    result = fit_patch_mixture(path, K=K, laps=args.laps, batches=args.batches, moves=moves, seed=args.seed,
                               prior_scale=args.prior_scale, device=args.device, local_dtype=args.local_dtype,
                               callback=lap_done, **options)
    sync(args.device)
    seconds = time.perf_counter() - start - scoring
    prior = GaussianMixturePrior.from_posterior(result.posterior)
    print(f"  {len(result.elbo_trace)} laps, ELBO/patch {result.elbo_trace[-1] / args.n:.4f}, K = {prior.K}, "
          f"{seconds:.1f} s", flush=True)
    return prior, seconds


def sklearn_prior(path, args):
    """``(prior, seconds)`` of scikit-learn's EM on ``--sklearn-n`` patches held in memory."""
    m = min(args.sklearn_n or args.n, args.n)
    patches = np.load(path, mmap_mode="r")
    if m < args.n:
        rows = np.sort(np.random.default_rng(args.seed).choice(args.n, m, replace=False))
        x = np.asarray(patches[rows])
        print(f"  scikit-learn is fitted to a random subset of {m} of the {args.n} patches (in memory)")
    else:
        x = np.asarray(patches)
    start = time.perf_counter()
    gmm = GaussianMixture(n_components=args.K, covariance_type="full", max_iter=args.sklearn_iter,
                          random_state=args.seed).fit(x)
    seconds = time.perf_counter() - start
    print(f"  {gmm.n_iter_} EM iterations (converged: {gmm.converged_}), {seconds:.1f} s; EM learnt means the "
          f"prior ignores: largest |mean| entry {np.abs(gmm.means_).max():.2f}, RMS mean entry "
          f"{np.sqrt((gmm.means_**2).mean()):.2f} (pixel values 0-255)", flush=True)
    return GaussianMixturePrior.from_sklearn(gmm, device=args.device), seconds


def sync(device):
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def run_denoiser(method, prior, clean, noisy, args):
    """``(PSNR, seconds)`` of the denoiser ``method`` (``mmse_denoise`` or ``epll_denoise``) under ``prior``."""
    start = time.perf_counter()
    estimate = method(torch.as_tensor(noisy, device=args.device), prior, args.sigma)
    sync(args.device)
    return psnr(clean, estimate), time.perf_counter() - start


def denoise(prior, clean, noisy, args):
    """``{method: (PSNR, seconds)}`` of single-pass MMSE and EPLL under ``prior``."""
    return {name: run_denoiser(method, prior, clean, noisy, args)
            for name, method in (("mmse", mmse_denoise), ("epll", epll_denoise))}


def main():
    args = parse_args()
    clean = load_image(TEST_IMAGE)
    if args.crop:
        clean = center_crop(clean, args.crop)
    noisy = add_noise(clean, args.sigma, seed=args.noise_seed)
    print(f"device {args.device}, torch threads {torch.get_num_threads()}; test image {TEST_IMAGE} "
          f"{clean.shape[0]}x{clean.shape[1]}, sigma {args.sigma:g}, noisy PSNR {psnr(clean, noisy):.2f} dB; "
          f"memoized fits' Wishart prior scale {args.prior_scale:g}", flush=True)
    with tempfile.TemporaryDirectory(dir=args.dir) as folder:
        path = os.path.join(folder, "patches.npy")
        write_training_patches(path, args)
        rows, seeded, skip = [], {}, set(args.skip.split(","))
        init = {"init_items": args.init_items} if args.init_items else {}
        tag = f" init {args.init_items}" if args.init_items else ""
        fits = (("moves", "(a) DP mixture, memoized VB, birth/merge/delete from K = {M}, {b} batches from disk:",
                 f"DP memo + moves (K={args.moves_K} start)" + (tag if args.moves_K > 1 else ""),
                 lambda: memoized_prior(path, args.moves_K, "birth,merge,delete", args, clean, noisy,
                                        move_options={"birth": {"targets": args.birth_targets}}, **init)),
                ("fixed", "(b) memoized VB, fixed K = {K}, no moves, {b} batches from disk:",
                 f"memo fixed K={args.K}" + tag,
                 lambda: memoized_prior(path, args.K, "", args, clean, noisy, **init)),
                ("sklearn", "(c) scikit-learn GaussianMixture(n_components={K}, covariance_type='full'), EM:",
                 f"sklearn GMM K={args.K}", lambda: sklearn_prior(path, args)))
        for key, heading, name, fit in fits:
            if key in skip:
                continue
            print(heading.format(b=args.batches, K=args.K, M=args.moves_K), flush=True)
            prior, seconds = fit()
            scores = denoise(prior, clean, noisy, args)  # scored at once: a run cut short keeps its rows
            rows.append((name, prior.K, seconds, scores))
            print(f"  denoised: MMSE {scores['mmse'][0]:.3f} dB, EPLL {scores['epll'][0]:.3f} dB", flush=True)
            if args.save_priors:
                os.makedirs(args.save_priors, exist_ok=True)
                torch.save({"weights": prior.weights.cpu(), "covariances": prior.covariances.cpu()},
                           os.path.join(args.save_priors, f"{key}.pt"))
            if args.noise_seeds:
                seeded[name] = seed_scores(prior, clean, args, scores)
    width = max([30] + [len(row[0]) for row in rows])
    print(f"\n{'prior':{width}s} {'K':>4s} {'fit s':>8s} {'MMSE dB':>8s} {'EPLL dB':>8s} {'EPLL-MMSE':>9s} "
          f"{'MMSE s':>7s} {'EPLL s':>7s}")
    for name, K, seconds, scores in rows:
        (mmse, mmse_s), (epll, epll_s) = scores["mmse"], scores["epll"]
        print(f"{name:{width}s} {K:4d} {seconds:8.1f} {mmse:8.3f} {epll:8.3f} {epll - mmse:+9.3f} "
              f"{mmse_s:7.1f} {epll_s:7.1f}", flush=True)
    if seeded:
        print_seeded(seeded, width)


def seed_scores(prior, clean, args, done):
    """``{method: [PSNR per noise seed of --noise-seeds]}`` of single-pass MMSE and EPLL under ``prior``;
    ``done`` holds the scores at ``--noise-seed``, which are not computed again."""
    scores = {"mmse": [], "epll": []}
    for seed in args.noise_seeds:
        results = (done if seed == args.noise_seed
                   else denoise(prior, clean, add_noise(clean, args.sigma, seed=seed), args))
        for method, (db, _) in results.items():
            scores[method].append(db)
        print(f"  noise seed {seed}: MMSE {scores['mmse'][-1]:.3f} dB, EPLL {scores['epll'][-1]:.3f} dB", flush=True)
    return scores


def print_seeded(seeded, width):
    """Mean and standard deviation over the noise seeds of each prior's PSNRs, of EPLL - MMSE, and of each
    prior's PSNR minus the first prior's on the same noisy images (paired differences)."""
    def stats(values):
        values = np.asarray(values)
        return f"{values.mean():8.3f} +- {values.std(ddof=1) if len(values) > 1 else 0.0:.3f}"

    first_name, first = next(iter(seeded.items()))
    print(f"\nover {len(first['mmse'])} noise seeds (mean +- sd); paired differences against {first_name}")
    print(f"{'prior':{width}s} {'MMSE dB':>16s} {'EPLL dB':>16s} {'EPLL-MMSE':>16s} {'MMSE - first':>16s} "
          f"{'EPLL - first':>16s}")
    for name, scores in seeded.items():
        mmse, epll = np.asarray(scores["mmse"]), np.asarray(scores["epll"])
        print(f"{name:{width}s} {stats(mmse)} {stats(epll)} {stats(epll - mmse)} "
              f"{stats(mmse - np.asarray(first['mmse']))} {stats(epll - np.asarray(first['epll']))}", flush=True)


if __name__ == "__main__":
    main()
