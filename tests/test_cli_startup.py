"""Issue #19: the command line parses and checks its options before torch, Pyro, scikit-learn and
matplotlib are imported, so ``--help`` and option errors return at once; the package's public
names are imported on first use (PEP 562)."""

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
#: the probes import this checkout, whatever is installed
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
HEAVY = ("torch", "pyro", "sklearn", "matplotlib", "scipy", "tqdm")
PROBE = """
import sys
from pyro_memo.cli import main
try:
    status = main({argv!r})
except SystemExit as exit_:
    status = exit_.code
print(status, [m for m in {heavy!r} if m in sys.modules])
"""


#: --help and pure option errors (exit status 0 or 2)
ARGVS = [["fit", "--help"], ["compare", "--help"], ["fit", "--model", "hdp", "--help"], ["--help"],
         ["fit", "--K", "-1"], ["fit", "--laps", "0"], ["fit", "--alpha", "-1"], ["fit", "--tol", "-1"],
         ["fit", "--family", "cauchy"], ["fit", "--model", "hdp", "--gamma", "0"], ["compare", "--passes", "0"],
         ["fit", "--algo", "memo", "--moves", "split"], ["fit", "--device", "cpu", "--K", "0"],
         ["compare", "--methods", "memo,adam"], ["compare", "--seeds", "0,x"],
         ["compare", "--model", "hdp", "--methods", "lda"], ["compare", "--model", "hdp", "--heldout", "1"],
         ["predict", "--help"], ["predict", "no-such-model.pt", "data.npz"], ["predict", "tests"],
         ["predict", "tests", "data.npz"], ["fit", "--model", "relational", "--help"],
         ["fit", "--model", "relational", "--eps", "0"], ["fit", "--model", "relational", "--moves", "split"],
         ["fit", "--model", "relational", "--heldout", "1.5"], ["denoise", "--help"], ["patches", "--help"],
         ["denoise", "camera", "--sigma", "0"], ["denoise", "camera", "--sigma", "1e160"],
         ["denoise", "no-such-image.png"],
         ["patches", "p.npy", "--exclude", "nothing"], ["fit", "--model", "hdp"], ["fit", "--model", "relational"],
         ["compare", "--model", "hdp"]]


@pytest.mark.parametrize("argv", ARGVS)
def test_help_and_option_errors_import_nothing_heavy(argv):
    done = subprocess.run([sys.executable, "-c", PROBE.format(argv=argv, heavy=HEAVY)], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=120)
    status, loaded = done.stdout.strip().splitlines()[-1].split(" ", 1)
    assert status == ("0" if "--help" in argv else "2"), done.stderr
    assert loaded == "[]", (argv, loaded)


LAZY = """
import sys
import pyro_memo as pm
from pyro_memo.cli.names import FAMILY_NAMES  # noqa: F401  (a light submodule)
print("heavy on import", [m for m in {heavy!r} if m in sys.modules])
print("cached before access", [n for n in pm.__all__ if n in vars(pm)])
print("missing from dir", [n for n in pm.__all__ if n not in dir(pm)])
from pyro_memo import MemoizedVB
import pyro_memo.inference
print("same object", MemoizedVB is pm.MemoizedVB is pyro_memo.inference.MemoizedVB)
print("unresolved", [n for n in pm.__all__ if getattr(pm, n, None) is None])
print("cached after access", all(n in vars(pm) for n in pm.__all__))
"""


def test_import_pyro_memo_is_light_and_every_public_name_resolves_on_first_access():
    done = subprocess.run([sys.executable, "-c", LAZY.format(heavy=HEAVY)], cwd=ROOT, env=ENV, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["heavy on import []", "cached before access []", "missing from dir []",
                                        "same object True", "unresolved []", "cached after access True"], done.stdout


def test_public_names_subpackages_and_unknown_names():
    import pyro_memo

    assert pyro_memo.__version__
    assert len(set(pyro_memo.__all__)) == len(pyro_memo.__all__)
    for name in pyro_memo.__all__:
        assert getattr(pyro_memo, name) is not None
    assert set(pyro_memo.__all__) <= set(dir(pyro_memo))
    assert pyro_memo.topics.MemoizedHDP is not None  # subpackages load on access too
    import pyro_memo.comparison
    import pyro_memo.topics  # noqa: F401

    assert pyro_memo.comparison.METHODS
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


def test_the_parse_time_photograph_names_agree_with_the_denoising_package():
    from pyro_memo.cli.names import PHOTOGRAPH_NAMES
    from pyro_memo.denoising import PHOTOGRAPHS

    assert PHOTOGRAPH_NAMES == PHOTOGRAPHS


def test_the_parse_time_noise_range_agrees_with_the_denoisers():
    from pyro_memo.cli import names
    from pyro_memo.denoising import images

    assert (names.SIGMA_RANGE, names.SIGMA_RANGE_WHY) == (images.SIGMA_RANGE, images.SIGMA_RANGE_WHY)


def test_the_parse_time_patch_side_agrees_with_the_denoisers():
    from pyro_memo.cli.names import PATCH_SIDE
    from pyro_memo.denoising import PATCH

    assert PATCH_SIDE == PATCH


def test_the_parse_time_z_steps_agree_with_epll():
    from pyro_memo.cli.names import EPLL_Z_STEPS
    from pyro_memo.denoising.epll import Z_STEPS

    assert EPLL_Z_STEPS == Z_STEPS


def test_the_parse_time_prior_names_agree_with_the_families():
    from pyro_memo.cli.names import PRIOR_NAMES, SPREAD_KEYS
    from pyro_memo.families import FAMILIES

    assert PRIOR_NAMES == {name: tuple(cls.prior_names) for name, cls in FAMILIES.items()}
    assert SPREAD_KEYS == {name: cls.spread_key for name, cls in FAMILIES.items() if cls.spread_key}


def test_the_parse_time_method_names_agree_with_the_comparison_registries():
    from pyro_memo.cli.names import DP_METHOD_NAMES, RELATIONAL_METHOD_NAMES, TOPIC_METHOD_NAMES
    from pyro_memo.comparison import METHODS, RELATIONAL_METHODS, TOPIC_METHODS

    assert DP_METHOD_NAMES == tuple(METHODS)
    assert TOPIC_METHOD_NAMES == tuple(TOPIC_METHODS)
    assert RELATIONAL_METHOD_NAMES == tuple(RELATIONAL_METHODS)


def test_load_corpus_imports_what_it_needs_by_itself():
    code = "from pyro_memo.cli.models.hdp import load_corpus; print(load_corpus('bars')[0].num_docs)"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=ENV, capture_output=True, text=True,
                          timeout=300)
    assert done.stdout.strip() == "500", done.stderr


def test_the_bundled_graph_names_agree_with_the_graph_readers():
    from pyro_memo.cli.models.relational import BUNDLED_GRAPHS
    from pyro_memo.data.graphs import NETWORKX_GRAPHS

    assert set(BUNDLED_GRAPHS) == set(NETWORKX_GRAPHS) | {"synthetic"}
