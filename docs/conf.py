"""Sphinx configuration for the pyro-memo documentation (built with ``-W``: warnings are errors)."""

import os
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

# The tutorials live in tutorials/ (the test suite executes them there); the site renders copies: those the
# tests executed and handed over (docs/executed_tutorials.py), else the sources, executed by this build.
sys.path.insert(0, str(HERE))
import executed_tutorials  # noqa: E402

for notebook in sorted((ROOT / "tutorials").glob("*.ipynb")):
    executed_tutorials.place(notebook, os.environ.get(executed_tutorials.ENV), HERE / "tutorials" / notebook.name)

# The notebooks' kernel: this checkout on the path and Jupyter's headless inline backend, so every
# figure a notebook draws becomes an image on its page.
os.environ["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)

project = "pyro-memo"
author = "the pyro-memo developers"
copyright = "2026, the pyro-memo developers"  # noqa: A001

extensions = ["myst_nb", "sphinx.ext.autodoc", "sphinx.ext.mathjax",
              "sphinx.ext.viewcode"]
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
# Every cross-reference must resolve (a reference that does not is a warning, an error under -W).
nitpicky = True
# Names from other libraries and the standard library's abc (in type hints, "Bases:" lines and docstrings)
# stay plain text: they are external types, and the build runs offline, so intersphinx cannot fetch their
# inventories.
nitpick_ignore_regex = [
    (r"py:.*", r"(torch|numpy|scipy|sklearn|skimage|pyro|networkx|dask|zarr|matplotlib|pandas|abc)(\..*)?"),
]
# Internal bases of documented classes, named on their "Bases:" lines (not in the API reference).
nitpick_ignore = [
    ("py:class", "pyro_memo.bridge.structure.ArgumentReader"),
    ("py:class", "pyro_memo.inference.dp_steps.DPMixtureSteps"),
    ("py:class", "pyro_memo.topics.memoized_hdp.HDPSteps"),
    ("py:class", "pyro_memo.relational.moves._CommunityMove"),
]

autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_typehints = "description"

myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 3

# Execute every tutorial on each build; a cell that raises fails the build.
nb_execution_mode = "force"
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_execution_timeout = 900
nb_merge_streams = True
# stderr (progress bars, library warnings) is left off the rendered pages
nb_output_stderr = "remove"

html_theme = "alabaster"
html_title = "pyro-memo"
html_theme_options = {"description": "Memoized online VI for Bayesian nonparametric models in Pyro",
                      "fixed_sidebar": True}
