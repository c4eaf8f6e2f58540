"""Births and merges from K = 1 on the toy data: pyro-memo against bnpy 0.1.7, side by side.

Paper 000 §4.1 toy data (N = 100,000 zero-mean 5x5 patches, 8 components; a new dataset per seed, the
same for both libraries), 100 fixed batches, from K = 1:

* pyro-memo: memoized VB with birth, merge and delete moves (``MemoizedVB(..., moves="birth,merge,delete")``),
  at most 50 laps, its default stopping rule (relative change below 1e-8 and no move left to try);
* bnpy: ``memoVB`` with ``moves="birth,merge,shuffle"`` (its paper's setting), at most 50 laps, its default
  stopping rule (counts stable and no reasonable move left).

Each run is a fresh process with its thread pools capped at ``--threads`` (pyro-memo keeps its thread
policy), beside a CPU-bound process with ``--busy``; the two libraries alternate seed by seed. A run
recovers all 8 components when Hungarian matching of the covariances of its components holding more than
1% of the data pairs every true covariance within 0.2 relative Frobenius distance and no other component
holds more than 1%. Time = the whole fit (initialisation included), measured inside each process.

    python benchmarks/bench_moves_bnpy.py [--seeds 10] [--threads 1] [--busy] [--bnpy-venv VENV]
"""

import os
import sys
import tempfile

import numpy as np
from _common import make_parser, run_isolated
from scipy.optimize import linear_sum_assignment

MEMO_RUN = """
import json, sys, time, numpy as np, torch, pyro_memo as pm
path, laps, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
x = torch.as_tensor(np.load(path))
start = time.perf_counter()
result = pm.MemoizedVB(pm.ZeroMeanGaussian.from_data(x), 1, laps=laps, moves="birth,merge,delete",
                       seed=seed).fit(x, num_batches=100)
seconds = time.perf_counter() - start
post = result.posterior
weights = post.expected_weights().cpu().numpy()
covs = post.family.point_estimates(post.component)["covariances"].cpu().numpy()
print(json.dumps({"seconds": seconds, "laps": len(result.elbo_trace), "weights": weights.tolist(),
                  "covariances": covs.tolist()}))
"""

BNPY_RUN = """
import json, sys, time, numpy as np
import bnpy_compat, bnpy
path, laps, seed, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
data = bnpy.data.XData(np.load(path))
start = time.perf_counter()
model, info = bnpy.run(data, 'DPMixtureModel', 'ZeroMeanGauss', 'memoVB', nLap=laps, nBatch=100, K=1,
                       initname='randexamples', moves='birth,merge,shuffle', output_path=out, ECovMat='eye',
                       sF=1.0, doWriteStdOut=False, printEvery=1, traceEvery=1, saveEvery=-1, nTask=1, taskID=1,
                       seed=seed + 1, dataorderseed=seed + 1)
seconds = time.perf_counter() - start
weights = model.allocModel.get_active_comp_probs()
covs = [model.obsModel.get_covar_mat_for_comp(k) for k in range(len(weights))]
print(json.dumps({"seconds": seconds, "laps": float(info['lap_history'][-1]), "weights": weights.tolist(),
                  "covariances": np.asarray(covs).tolist()}))
"""


def recovered(out, true_covs, threshold=0.2):
    """(true components matched within ``threshold``, components holding more than 1%)."""
    weights, covs = np.asarray(out["weights"]), np.asarray(out["covariances"])
    big = np.flatnonzero(weights > 0.01)
    dist = np.array([[np.linalg.norm(covs[k] - c) / np.linalg.norm(c) for k in big] for c in true_covs])
    rows, cols = linear_sum_assignment(dist)
    return int((dist[rows, cols] < threshold).sum()), len(big)


def main():
    parser = make_parser(__doc__)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--laps", type=int, default=50)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--busy", action="store_true", help="run a CPU-bound process beside every fit")
    parser.add_argument("--bnpy-venv", default=os.environ.get("BNPY_VENV", ""))
    args = parser.parse_args()

    from pyro_memo.data import toy_patches

    bnpy_python = os.path.join(args.bnpy_venv, "bin", "python") if args.bnpy_venv else ""
    if not os.path.exists(bnpy_python):
        print("bnpy skipped: no --bnpy-venv (build one with ../shared/peers/install_bnpy.sh VENV)")
        bnpy_python = ""
    work = tempfile.mkdtemp(prefix="bench_moves_bnpy_")
    print(f"toy data: N = {args.n}, 100 batches, from K = 1, at most {args.laps} laps; {args.threads} thread(s)"
          f"{', beside a CPU-bound process' if args.busy else ''}; {os.cpu_count()} CPUs")
    rows = {"pyro-memo": [], "bnpy": []}
    for seed in range(args.seeds):
        x, _, covs = toy_patches(args.n, seed=seed)
        path = os.path.join(work, f"toy{seed}.npy")
        np.save(path, np.asarray(x))
        commands = {"pyro-memo": [sys.executable, "-c", MEMO_RUN, path, str(args.laps), str(seed)]}
        if bnpy_python:
            commands["bnpy"] = [bnpy_python, "-c", BNPY_RUN, path, str(args.laps), str(seed),
                                os.path.join(work, f"bnpy{seed}")]
        for name, command in commands.items():
            out = run_isolated(command, args.threads, args.busy)
            found, big = recovered(out, covs)
            rows[name].append((found, big, out["seconds"], out["laps"]))
            print(f"  seed {seed}  {name:9s} {found}/8 recovered, {big} components > 1%, {out['seconds']:.1f} s, "
                  f"{out['laps']:g} laps", flush=True)
    print(f"\n{'library':10s} {'all 8 found':>12s} {'mean s':>8s} {'max s':>7s} {'total s':>8s}")
    for name, runs in rows.items():
        if runs:
            seconds = [r[2] for r in runs]
            all8 = sum(r[0] == 8 and r[1] == 8 for r in runs)
            print(f"{name:10s} {all8:>9d}/{len(runs):<2d} {np.mean(seconds):8.1f} {np.max(seconds):7.1f} "
                  f"{np.sum(seconds):8.1f}")
    if rows["bnpy"]:
        ratio = np.sum([r[2] for r in rows["bnpy"]]) / np.sum([r[2] for r in rows["pyro-memo"]])
        print(f"bnpy total time / pyro-memo total time: {ratio:.1f}x")


if __name__ == "__main__":
    main()
