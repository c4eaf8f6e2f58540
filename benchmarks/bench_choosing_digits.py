"""The numbers of the user guide's "Choosing K, alpha and the priors" (docs/guide/choosing.md): the default
job (digits, ``gauss``) by full-batch VB at K = 20, and memoized VB from K = 1 with birth, merge and delete
for 40 laps at alpha 0.1, 1 and 10 and prior scales 0.3, 1 and 3. Each run is ``pyro-memo fit`` in a fresh
process with one thread; the table gives the components in use, the exact ELBO per item, the NMI against
the digit labels and the seconds of the fit.

    python benchmarks/bench_choosing_digits.py
"""

import json
import os
import pathlib
import subprocess
import sys
import tempfile

from _common import make_parser

ROOT = pathlib.Path(__file__).resolve().parents[1]
MOVES = ["--algo", "memo", "--K", "1", "--moves", "birth,merge,delete", "--laps", "40"]
#: label -> the options after ``pyro-memo fit digits``
RUNS = {
    "full-batch VB, K = 20": [],
    "moves from K = 1, alpha 1, scale 1": MOVES,
    "moves, alpha 0.1": [*MOVES, "--alpha", "0.1"],
    "moves, alpha 10": [*MOVES, "--alpha", "10"],
    "moves, prior scale 0.3": [*MOVES, "--prior-scale", "0.3"],
    "moves, prior scale 3": [*MOVES, "--prior-scale", "3"],
}


def run(options, folder):
    out = pathlib.Path(folder) / "out.json"
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    subprocess.run([sys.executable, "-m", "pyro_memo.cli", "fit", "digits", *options, "--threads", "1", "--quiet",
                    "--json", str(out)], check=True, env=env, capture_output=True)
    return json.loads(out.read_text())


def main():
    make_parser(__doc__).parse_args()
    print(f"{'run':38s} {'K':>3s} {'ELBO/item':>10s} {'NMI':>6s} {'seconds':>8s}")
    with tempfile.TemporaryDirectory() as folder:
        for label, options in RUNS.items():
            r = run(options, folder)
            print(f"{label:38s} {r['K']:3d} {r['elbo'] / r['N']:10.2f} {r['nmi']:6.3f} {r['seconds']:8.1f}",
                  flush=True)


if __name__ == "__main__":
    main()
