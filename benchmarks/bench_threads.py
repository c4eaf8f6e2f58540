"""Lap time of memoized VB on the toy data: pyro-memo against bnpy 0.1.7, 1 and 2 threads, quiet and busy.

Paper 000 §4.1 toy data (N = 100,000 zero-mean 5x5 patches, 8 components), truncation K = 25, 100 fixed
batches, 10 laps, fixed K, from each library's own random start. Every run is a fresh process whose
thread pools (torch's intra-op pool, OpenMP, BLAS) are capped by OMP_NUM_THREADS / MKL_NUM_THREADS /
OPENBLAS_NUM_THREADS; pyro-memo runs with its default thread policy (each fit times one thread against the
cap and keeps the faster). "busy" runs a pure-Python CPU-bound process beside the fit for its whole
length: the state of a laptop with a browser open or of a shared server. Runs are interleaved: for each
repetition, every condition, both libraries in turn.

bnpy runs in its own environment (``../shared/peers/install_bnpy.sh VENV``, Python 3.11 with old pins);
pass ``--bnpy-venv VENV`` (or set BNPY_VENV). Without it bnpy is skipped with a message. ``--exact`` adds
pyro-memo with exact batch steps only (the schedule before over-relaxed steps became the default), side by side;
``--other-src DIR`` adds pyro-memo run from another source tree (``git worktree add DIR COMMIT``: the code
before a change), side by side.

Mean lap = mean seconds per lap over laps 2..10 (lap 1 of both includes one-time start-up work). With two or
more repetitions the thread comparison also prints each repetition's ratio and their mean with its standard error.

    python benchmarks/bench_threads.py [--reps 2] [--laps 10] [--bnpy-venv VENV] [--exact] [--other-src DIR]
"""

import os
import sys
import tempfile

import numpy as np
from _common import add_toy_arguments, make_parser, paired, run_isolated

MEMO_RUN = """
import json, sys, numpy as np, torch, pyro_memo as pm
path, K, batches, laps, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
local_dtype = "float32" if "float32" in sys.argv[6:] else None
x = torch.as_tensor(np.load(path))
driver = pm.MemoizedVB(pm.ZeroMeanGaussian.from_data(x), K, laps=laps, tol=0, seed=seed, local_dtype=local_dtype,
                       overrelax=False if "exact" in sys.argv[6:] else None,
                       threads=1 if "one-thread" in sys.argv[6:] else None)
result = driver.fit(x, num_batches=batches)
print(json.dumps({"lap_seconds": result.lap_seconds, "elbo": result.elbo / len(x),
                  "threads": driver.thread_policy.history[-1:] or [1],
                  "held": getattr(driver.thread_policy, "held", None)}))
"""

BNPY_RUN = """
import json, sys, numpy as np
import bnpy_compat, bnpy
path, K, batches, laps, seed, out = (sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]),
                                     int(sys.argv[5]), sys.argv[6])
data = bnpy.data.XData(np.load(path))
model, info = bnpy.run(data, 'DPMixtureModel', 'ZeroMeanGauss', 'memoVB', nLap=laps, nBatch=batches, K=K,
                       initname='randexamples', convergeThr=0, output_path=out, ECovMat='eye', sF=1.0,
                       doWriteStdOut=False, printEvery=1, traceEvery=1, saveEvery=-1, nTask=1, taskID=1,
                       dataorderseed=seed, seed=seed)
laps_done = np.asarray(info['lap_history']); clock = np.asarray(info['elapsed_time_sec_history'])
whole = np.isclose(laps_done, np.round(laps_done)) & (laps_done >= 1)
ends = np.concatenate([[0.0], clock[whole]])
print(json.dumps({"lap_seconds": np.diff(ends).tolist(), "elbo": -float(info['loss']),
                  "K": int(info['K_history'][-1])}))
"""


def main():
    parser = add_toy_arguments(make_parser(__doc__))
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--conditions", default="1,2,1-busy,2-busy",
                        help="comma-separated THREADS or THREADS-busy")
    parser.add_argument("--bnpy-venv", default=os.environ.get("BNPY_VENV", ""))
    parser.add_argument("--float32-local", action="store_true",
                        help="also run pyro-memo with local_dtype='float32' (float64 globals, memo and ELBO)")
    parser.add_argument("--exact", action="store_true",
                        help="also run pyro-memo with exact batch steps only (overrelax=False: the schedule before "
                             "issue #13's over-relaxed steps)")
    parser.add_argument("--one-thread", action="store_true",
                        help="also run pyro-memo with threads=1 (no thread policy, no probes) under each cap")
    parser.add_argument("--other-src", default=None,
                        help="also run pyro-memo from this source tree (a checkout of another commit: "
                             "git worktree add DIR COMMIT), side by side")
    args = parser.parse_args()

    from pyro_memo.data import toy_patches

    bnpy_python = os.path.join(args.bnpy_venv, "bin", "python") if args.bnpy_venv else ""
    if not os.path.exists(bnpy_python):
        print("bnpy skipped: no --bnpy-venv (build one with ../shared/peers/install_bnpy.sh VENV)")
        bnpy_python = ""
    conditions = [(int(c.split("-")[0]), c.endswith("-busy")) for c in args.conditions.split(",")]
    work = tempfile.mkdtemp(prefix="bench_threads_")
    path = os.path.join(work, "toy.npy")
    np.save(path, np.asarray(toy_patches(args.n, seed=args.seed)[0]))
    common = [path, str(args.K), str(args.batches), str(args.laps), str(args.seed)]
    systems = {"pyro-memo": [sys.executable, "-c", MEMO_RUN, *common]}
    if args.float32_local:
        systems["pyro-memo f32"] = [sys.executable, "-c", MEMO_RUN, *common, "float32"]
    if args.exact:
        systems["pyro-memo exact"] = [sys.executable, "-c", MEMO_RUN, *common, "exact"]
    if args.one_thread:
        systems["pyro-memo threads=1"] = [sys.executable, "-c", MEMO_RUN, *common, "one-thread"]
    if args.other_src:
        other = f"import sys; sys.path.insert(0, {os.path.abspath(args.other_src)!r})\n" + MEMO_RUN
        systems["pyro-memo other"] = [sys.executable, "-c", other, *common]
    if bnpy_python:
        systems["bnpy"] = [bnpy_python, "-c", BNPY_RUN, *common, os.path.join(work, "bnpy-out")]
    print(f"toy data: N = {args.n}, D = 25, K = {args.K}, {args.batches} batches, {args.laps} laps, fixed K; "
          f"{args.reps} interleaved repetitions; {os.cpu_count()} CPUs")
    laps = {(name, c): [] for name in systems for c in conditions}
    notes = {}
    for rep in range(args.reps):
        for condition in conditions:
            for name, command in systems.items():
                out = run_isolated(command, *condition)
                laps[name, condition].append(float(np.mean(out["lap_seconds"][1:])))
                notes[name, condition] = out
                extra = f"  chose {out['threads'][0]} thread(s)" if "threads" in out else f"  K {out.get('K')}"
                if out.get("held") is not None:
                    extra += f", {out['held']} probe(s) held by the load"
                print(f"  rep {rep}  {name:19s} {condition[0]} thread(s){' busy' if condition[1] else '':5s} "
                      f"mean lap {laps[name, condition][-1]:.3f} s  objective/item {out['elbo']:.4f}{extra}",
                      flush=True)

    def label(condition):
        return f"{condition[0]} thread{'s' if condition[0] > 1 else ''}{', busy' if condition[1] else ''}"

    memos = [name for name in systems if name != "bnpy"]
    print(f"\n{'condition':18s} {'system':19s} {'s/lap':>7s} {'bnpy / it':>10s}")
    for c in conditions:
        for name in systems:
            mean = np.mean(laps[name, c])
            vs = f"{np.mean(laps['bnpy', c]) / mean:9.1f}x" if bnpy_python and name != "bnpy" else ""
            print(f"{label(c):18s} {name:19s} {mean:7.3f} {vs:>10s}")
    print("\npyro-memo, more threads against one (mean lap ratio; <= 1 means never slower):")
    for name in memos:
        for busy in (False, True):
            for c in conditions:
                if c[1] == busy and c[0] > 1 and (1, busy) in conditions:
                    ratio = np.mean(laps[name, c]) / np.mean(laps[name, (1, busy)])
                    spread = paired(laps[name, c], laps[name, (1, busy)])
                    print(f"  {name}: {label(c)} / {label((1, busy))}: {ratio:.2f}{spread}")


if __name__ == "__main__":
    main()
