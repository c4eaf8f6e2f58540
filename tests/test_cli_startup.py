"""Issue #19: the command line parses and checks its options before torch, Pyro, scikit-learn and
matplotlib are imported, so ``--help`` and option errors return at once; the package's public
names are imported on first use (PEP 562)."""

import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
HEAVY = ("torch", "pyro", "sklearn", "matplotlib", "scipy")
PROBE = """
import sys
from pyro_memo.cli import main
try:
    status = main({argv!r})
except SystemExit as exit_:
    status = exit_.code
print(status, [m for m in {heavy!r} if m in sys.modules])
"""


@pytest.mark.parametrize("argv", [["fit", "--help"], ["compare", "--help"], ["fit", "--model", "hdp", "--help"],
                                  ["--help"], ["fit", "--K", "-1"], ["fit", "--laps", "0"], ["fit", "--alpha", "-1"],
                                  ["fit", "--tol", "-1"], ["fit", "--family", "cauchy"],
                                  ["fit", "--model", "hdp", "--gamma", "0"], ["compare", "--passes", "0"],
                                  ["fit", "--algo", "memo", "--moves", "split"]])
def test_help_and_option_errors_import_nothing_heavy(argv):
    done = subprocess.run([sys.executable, "-c", PROBE.format(argv=argv, heavy=HEAVY)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    status, loaded = done.stdout.strip().splitlines()[-1].split(" ", 1)
    assert status in ("0", "2"), done.stderr
    assert loaded == "[]", (argv, loaded)


def test_import_pyro_memo_is_light_and_every_public_name_resolves():
    done = subprocess.run([sys.executable, "-c", "import sys, pyro_memo; print('torch' in sys.modules)"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "False", done.stderr
    import pyro_memo

    for name in pyro_memo.__all__:
        assert getattr(pyro_memo, name) is not None
    assert set(pyro_memo.__all__) <= set(dir(pyro_memo))
    assert pyro_memo.topics.MemoizedHDP is not None  # subpackages load on access too
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        pyro_memo.nothing_here  # noqa: B018


def test_the_parse_time_names_agree_with_the_registries():
    from pyro_memo.cli.names import DATASET_NAMES, DP_MOVE_NAMES, FAMILY_NAMES
    from pyro_memo.datasets import BUNDLED
    from pyro_memo.families import FAMILIES
    from pyro_memo.inference.moves import MOVES

    assert FAMILY_NAMES == tuple(sorted(FAMILIES))
    assert DATASET_NAMES == tuple(BUNDLED)
    assert DP_MOVE_NAMES == tuple(sorted(MOVES))
