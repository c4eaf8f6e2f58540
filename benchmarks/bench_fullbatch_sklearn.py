"""Seconds per iteration of full-batch VB: pyro-memo's FullBatchVB against scikit-learn's BayesianGaussianMixture.

Paper 000 §4.1 toy data (N = 100,000, D = 25), K = 25 full-covariance Gaussian components with a DP prior,
one coordinate-ascent (EM) iteration at a time, from each library's k-means++ start. Every run is a fresh
process whose thread pools are capped (OMP / MKL / OpenBLAS and torch's intra-op pool); pyro-memo keeps its
default thread policy. "busy" runs a pure-Python CPU-bound process beside the fit. Runs are interleaved:
for each repetition, every condition, both libraries in turn. Per iteration = median over iterations 2..

    python benchmarks/bench_fullbatch_sklearn.py [--iters 6] [--reps 2]
"""

import os
import sys
import tempfile

import numpy as np
from _common import make_parser, run_isolated

MEMO_RUN = """
import json, sys, time, numpy as np, torch, pyro_memo as pm
path, K, iters, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
x = torch.as_tensor(np.load(path))
result = pm.FullBatchVB(pm.Gaussian.from_data(x), K, max_iter=iters, tol=0, seed=seed).fit(x)
print(json.dumps({"seconds": result.lap_seconds, "elbo": result.elbo / len(x)}))
"""

SKLEARN_RUN = """
import json, sys, time, warnings, numpy as np
from sklearn.mixture import BayesianGaussianMixture
path, K, iters, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
x = np.load(path)
bgm = BayesianGaussianMixture(n_components=K, weight_concentration_prior_type="dirichlet_process",
                              weight_concentration_prior=1.0, covariance_type="full", max_iter=1, warm_start=True,
                              init_params="k-means++", random_state=seed)
seconds = []
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    for _ in range(iters):
        start = time.perf_counter()
        bgm.fit(x)
        seconds.append(time.perf_counter() - start)
print(json.dumps({"seconds": seconds}))
"""


def main():
    parser = make_parser(__doc__)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--K", type=int, default=25)
    parser.add_argument("--iters", type=int, default=6)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--conditions", default="1,2,1-busy,2-busy", help="comma-separated THREADS or THREADS-busy")
    args = parser.parse_args()

    from pyro_memo.data import toy_patches

    conditions = [(int(c.split("-")[0]), c.endswith("-busy")) for c in args.conditions.split(",")]
    path = os.path.join(tempfile.mkdtemp(prefix="bench_fullbatch_"), "toy.npy")
    np.save(path, np.asarray(toy_patches(args.n, seed=args.seed)[0]))
    common = [path, str(args.K), str(args.iters), str(args.seed)]
    systems = {"pyro-memo FullBatchVB": [sys.executable, "-c", MEMO_RUN, *common],
               "sklearn BGM": [sys.executable, "-c", SKLEARN_RUN, *common]}
    print(f"toy data: N = {args.n}, D = 25, K = {args.K} full covariance, {args.iters} iterations per run, "
          f"{args.reps} interleaved repetitions; {os.cpu_count()} CPUs")
    per_iter = {(name, c): [] for name in systems for c in conditions}
    for rep in range(args.reps):
        for c in conditions:
            for name, command in systems.items():
                seconds = run_isolated(command, *c)["seconds"]
                per_iter[name, c].append(float(np.median(seconds[1:])))
                print(f"  rep {rep}  {name:22s} {c[0]} thread(s){' busy' if c[1] else '':5s} "
                      f"{per_iter[name, c][-1]:.3f} s/iteration", flush=True)
    print(f"\n{'condition':18s} {'pyro-memo s/it':>15s} {'sklearn s/it':>13s} {'sklearn / pyro-memo':>20s}")
    for c in conditions:
        memo = np.mean(per_iter["pyro-memo FullBatchVB", c])
        sk = np.mean(per_iter["sklearn BGM", c])
        label = f"{c[0]} thread{'s' if c[0] > 1 else ''}{', busy' if c[1] else ''}"
        print(f"{label:18s} {memo:15.3f} {sk:13.3f} {sk / memo:19.1f}x")


if __name__ == "__main__":
    main()
