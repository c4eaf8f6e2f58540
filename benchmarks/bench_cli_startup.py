"""Start-up of the command line (issue #19): ``pyro-memo fit --help``, ``pyro-memo fit --K -1`` and
``pyro-memo compare --help`` against ``python -c "import torch"``, each a fresh process, interleaved,
median of ``--reps`` runs and the ratio to importing torch. Target: at most 1.5 s. The commands run
this checkout's ``pyro_memo`` (its root goes first on ``PYTHONPATH``), whatever is installed.

    python benchmarks/bench_cli_startup.py [--reps 7] [--threads 1] [--busy]
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
}


def main():
    parser = make_parser(__doc__)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--busy", action="store_true", help="keep a CPU-bound process running beside")
    args = parser.parse_args()
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads), PYTHONPATH=path)
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if args.busy else None
    seconds = {name: [] for name in RUNS}
    try:
        for _ in range(args.reps):
            for name, (argv, expected) in RUNS.items():
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
        print(f"{name:28s} {median:6.3f} s   {median / torch_median:5.2f} x import torch")


if __name__ == "__main__":
    main()
