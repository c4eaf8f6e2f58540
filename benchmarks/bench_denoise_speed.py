"""Seconds of the two denoisers, single-pass patch MMSE and EPLL, on one image under one learnt prior:
this checkout against another source tree (``--other-src DIR``, ``git worktree add DIR COMMIT``: the
code before a change), 1 and 2 threads, quiet and beside a CPU-bound process, interleaved; and the
largest difference between the two trees' images, which must be rounding.

The prior is a fixed-K memoized fit of zero-mean 8 x 8 patches of the natural photographs other than
the test image (trained once, in this process; its weights and covariances go to both trees), the test
image the central ``--crop`` square of ``camera`` with noise sigma 25.

``--max-elements 2**18,2**20,...`` runs this checkout only, once per chunk size of the denoisers
(their ``max_elements``), instead of the comparison.

    python benchmarks/bench_denoise_speed.py [--other-src DIR] [--reps 2] [--K 50] [--crop 256]
    python benchmarks/bench_denoise_speed.py --max-elements 2**18,2**19,2**20,2**21,2**22,2**24 --threads 1 --busy no
"""

import os
import sys
import tempfile

import numpy as np
from _common import NATURAL_PHOTOGRAPHS, add_condition_arguments, conditions, make_parser, run_isolated

RUN = """
import json, sys, time, numpy as np, torch
from pyro_memo.denoising import GaussianMixturePrior, epll_denoise, mmse_denoise, psnr
path, method, out = sys.argv[1], sys.argv[2], sys.argv[3]
options = {"max_elements": int(sys.argv[4])} if len(sys.argv) > 4 else {}
with np.load(path) as f:
    prior, noisy, clean = GaussianMixturePrior(f["weights"], f["covariances"]), f["noisy"], f["clean"]
start = time.perf_counter()
image = (mmse_denoise if method == "mmse" else epll_denoise)(noisy, prior, 25.0, **options)
seconds = time.perf_counter() - start
np.save(out, image)
print(json.dumps({"seconds": seconds, "psnr": psnr(clean, image)}))
"""


def main():
    parser = make_parser(__doc__)
    add_condition_arguments(parser)
    parser.add_argument("--other-src", help="also run the denoisers from this source tree")
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--K", type=int, default=50)
    parser.add_argument("--n", type=int, default=100_000, help="training patches")
    parser.add_argument("--crop", type=int, default=256)
    parser.add_argument("--methods", default="mmse,epll")
    parser.add_argument("--max-elements", help="chunk sizes to compare, comma-separated (e.g. 2**20)")
    args = parser.parse_args()
    import pyro_memo.denoising as dn

    work = tempfile.mkdtemp(prefix="bench_denoise_speed_")
    train = dn.sample_patches([dn.load_image(name) for name in NATURAL_PHOTOGRAPHS], args.n, seed=0)
    result = dn.fit_patch_mixture(train, K=args.K, laps=4, batches=10, moves="", seed=0)
    prior = dn.GaussianMixturePrior.from_posterior(result.posterior)
    clean = dn.center_crop(dn.load_image("camera"), args.crop)
    noisy = dn.add_noise(clean, 25.0, seed=0)
    path = os.path.join(work, "case.npz")
    np.savez(path, weights=prior.weights.numpy(), covariances=prior.covariances.numpy(), noisy=noisy, clean=clean)
    runs = {"pyro-memo": (RUN, [])}  # name -> (child code, its extra arguments)
    if args.max_elements:
        sizes = [2 ** int(v.split("**")[1]) if "**" in v else int(v) for v in args.max_elements.split(",")]
        runs = {f"max_elements 2**{size.bit_length() - 1}": (RUN, [str(size)]) for size in sizes}
    elif args.other_src:
        runs["pyro-memo other"] = (f"import sys; sys.path.insert(0, {os.path.abspath(args.other_src)!r})\n" + RUN, [])
    print(f"camera {args.crop}x{args.crop}, sigma 25; prior K = {prior.K} (fixed K = {args.K}, 4 laps on "
          f"{args.n} natural patches); {args.reps} interleaved repetitions")
    rows = {}
    for rep in range(args.reps):
        for threads, busy in conditions(args):
            label = f"{threads} thread{'s' if threads > 1 else ''}{', busy' if busy else ''}"
            for method in args.methods.split(","):
                for name, (code, extra) in runs.items():
                    out = os.path.join(work, f"{name.replace(' ', '_')}_{method}.npy")
                    got = run_isolated([sys.executable, "-c", code, path, method, out, *extra], threads, busy)
                    rows.setdefault((label, method, name), []).append(got)
                    print(f"  rep {rep}  {label:16s} {method:5s} {name:16s} {got['seconds']:7.2f} s  "
                          f"PSNR {got['psnr']:.4f} dB", flush=True)
                if len(runs) > 1:
                    a, b = (np.load(os.path.join(work, f"{n.replace(' ', '_')}_{method}.npy")) for n in list(runs)[:2])
                    print(f"  rep {rep}  {label:16s} {method:5s} largest pixel difference {np.abs(a - b).max():.2e}")
    print(f"\n{'condition':16s} {'method':6s} {'system':16s} {'mean s':>7s}  ratio")
    for (label, method, name), got in rows.items():
        mean = float(np.mean([g["seconds"] for g in got]))
        base = float(np.mean([g["seconds"] for g in rows.get((label, method, "pyro-memo other"), got)]))
        print(f"{label:16s} {method:6s} {name:16s} {mean:7.2f}  {base / mean:5.2f}x")
    print("\nmore threads against one (mean seconds ratio; <= 1 means never slower):")
    for (label, method, name), got in rows.items():
        one = rows.get((label.replace("2 threads", "1 thread"), method, name))
        if label.startswith("2 threads") and one:
            ratio = np.mean([g["seconds"] for g in got]) / np.mean([g["seconds"] for g in one])
            print(f"  {name} {method}: {label} / {label.replace('2 threads', '1 thread')}: {ratio:.2f}")


if __name__ == "__main__":
    main()
