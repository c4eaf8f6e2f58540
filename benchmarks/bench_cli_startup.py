"""Start-up of the command line (issue #19): ``pyro-memo fit --help``, ``pyro-memo fit --K -1`` and
``pyro-memo compare --help`` against ``python -c "import torch"``, each a fresh process, interleaved,
median of ``--reps`` runs and the ratio to importing torch. Target: at most 1.5 s. The commands run
this checkout's ``pyro_memo`` (its root goes first on ``PYTHONPATH``), whatever is installed.

A whole small command rides along: ``pyro-memo fit digits --laps 1 --quiet`` (import, read the digits,
one lap, report). ``--other-src DIR`` (``git worktree add DIR COMMIT``) runs every pyro-memo command from
that tree too, interleaved: the start-up before a change.

    python benchmarks/bench_cli_startup.py [--reps 7] [--threads 1] [--busy] [--other-src DIR]
"""

import os
import pathlib
import statistics
import subprocess
import sys
import time

from _common import make_parser

ROOT = pathlib.Path(__file__).resolve().parents[1]
#: name -> (command, its expected exit status)
RUNS = {
    "python -c 'import torch'": ([sys.executable, "-c", "import torch"], 0),
    "pyro-memo fit --help": ([sys.executable, "-m", "pyro_memo.cli", "fit", "--help"], 0),
    "pyro-memo fit --K -1": ([sys.executable, "-m", "pyro_memo.cli", "fit", "--K", "-1"], 2),
    "pyro-memo compare --help": ([sys.executable, "-m", "pyro_memo.cli", "compare", "--help"], 0),
    "pyro-memo fit digits --laps 1": ([sys.executable, "-m", "pyro_memo.cli", "fit", "digits", "--laps", "1",
                                       "--quiet"], 0),
}


def main():
    parser = make_parser(__doc__)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--busy", action="store_true", help="keep a CPU-bound process running beside")
    parser.add_argument("--other-src", help="also run the pyro-memo commands from this source tree")
    args = parser.parse_args()
    threads = dict(OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads))
    runs = {}
    for name, (argv, expected) in RUNS.items():  # each command beside its run from the other tree
        runs[name] = (argv, expected, _env(ROOT, threads))
        if args.other_src and name.startswith("pyro-memo"):
            runs[f"{name} (other)"] = (argv, expected, _env(args.other_src, threads))
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if args.busy else None
    seconds = {name: [] for name in runs}
    try:
        for _ in range(args.reps):
            for name, (argv, expected, env) in runs.items():
                start = time.perf_counter()
                done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
                seconds[name].append(time.perf_counter() - start)
                if done.returncode != expected:
                    raise SystemExit(f"{name}: exit status {done.returncode}, expected {expected}\n"
                                     + done.stderr.decode(errors="replace"))
    finally:
        if busy is not None:
            busy.kill()
    torch_median = statistics.median(seconds["python -c 'import torch'"])
    print(f"{args.threads} thread(s){', beside a CPU-bound process' if args.busy else ''}; median of {args.reps}")
    for name, values in seconds.items():
        median = statistics.median(values)
        print(f"{name:38s} {median:6.3f} s   {median / torch_median:5.2f} x import torch")


def _env(root, threads):
    """The environment of a command run from the source tree ``root``, with the thread caps."""
    path = os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))
    return dict(os.environ, PYTHONPATH=path, **threads)


if __name__ == "__main__":
    main()
