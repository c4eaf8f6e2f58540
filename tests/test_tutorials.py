"""Every tutorial notebook runs top to bottom in a Jupyter kernel and shows every figure it draws.

The notebooks force no matplotlib backend (so figures show inline in Jupyter); the kernel gets the
headless inline backend from its environment, as Jupyter itself would give it.
"""

import importlib.util
import os
import pathlib
import re

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = pathlib.Path(__file__).parent.parent
NOTEBOOKS = sorted((ROOT / "tutorials").glob("*.ipynb"))
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"
_SPEC = importlib.util.spec_from_file_location("executed_tutorials", ROOT / "docs" / "executed_tutorials.py")
executed_tutorials = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(executed_tutorials)

# Run first in the kernel: count every matplotlib Figure the notebook creates.
COUNT_FIGURES = """\
import matplotlib.figure as _mpl_figure
_tutorial_figures = []
_figure_init = _mpl_figure.Figure.__init__
def _counting_init(self, *args, **kwargs):
    _tutorial_figures.append(self)
    _figure_init(self, *args, **kwargs)
_mpl_figure.Figure.__init__ = _counting_init
"""
REPORT_FIGURES = "print('figures created:', len(_tutorial_figures))"
FIGURE_CALL = re.compile(r"\bplt\.(subplots|figure|subplot_mosaic)\(")


def kernel_env():
    """The kernel's environment: the headless inline backend and this checkout on the path."""
    env = dict(os.environ, MPLBACKEND=INLINE_BACKEND)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return env


def execute(path):
    """``(executed notebook, figures created)``; a cell that raises fails the test."""
    nb = nbformat.read(path, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(COUNT_FIGURES))
    nb.cells.append(nbformat.v4.new_code_cell(REPORT_FIGURES))
    client = NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}})
    client.execute(env=kernel_env())
    report = "".join(o.get("text", "") for o in nb.cells[-1].outputs)
    figures = int(re.search(r"figures created: (\d+)", report).group(1))
    return nb, figures


def png_outputs(nb):
    """Number of ``image/png`` outputs in the executed notebook."""
    return sum("image/png" in out.get("data", {}) for cell in nb.cells if cell.cell_type == "code"
               for out in cell.outputs)


def figure_calls(path):
    """Figure-creating pyplot calls in the notebook's source (a lower bound on its figures)."""
    nb = nbformat.read(path, as_version=4)
    return sum(len(FIGURE_CALL.findall(c.source)) for c in nb.cells if c.cell_type == "code")


def test_there_are_tutorials():
    assert NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_forces_no_backend(path):
    source = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code")
    assert "matplotlib.use(" not in source and "%matplotlib" not in source


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_opens_with_summary_and_ends_with_table(path):
    cells = nbformat.read(path, as_version=4).cells
    assert cells[0].cell_type == "markdown"
    assert "What it shows" in cells[0].source and "Run time" in cells[0].source
    assert cells[-1].cell_type == "code" and "|---|" in cells[-1].source


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_and_shows_its_figures(path):
    nb, figures = execute(path)
    assert figures >= max(figure_calls(path), 1)
    assert png_outputs(nb) >= figures
    table = "".join(o.get("text", "") for o in nb.cells[-2].outputs)
    assert "|---|" in table
    if os.environ.get(executed_tutorials.ENV):  # CI: the docs build shows this run instead of running it again
        executed_tutorials.save(path, nb, os.environ[executed_tutorials.ENV], added=(1, 1))


def test_an_executed_tutorial_is_handed_to_the_docs_only_while_its_source_is_unchanged(tmp_path):
    source = tmp_path / "src" / "01_x.ipynb"
    source.parent.mkdir()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# x"), nbformat.v4.new_code_cell("1 + 1")])
    nbformat.write(nb, source)
    ran = nbformat.read(source, as_version=4)
    ran.cells.insert(0, nbformat.v4.new_code_cell("counting = 1"))
    ran.cells.append(nbformat.v4.new_code_cell("report()"))
    for i, cell in enumerate(c for c in ran.cells if c.cell_type == "code"):
        cell.execution_count = i + 1
    ran.cells[2].outputs = [nbformat.v4.new_output("execute_result", {"text/plain": "2"}, execution_count=2)]
    executed_tutorials.save(source, ran, tmp_path / "executed", added=(1, 1))

    site = tmp_path / "site.ipynb"
    assert executed_tutorials.place(source, tmp_path / "executed", site)
    shown = nbformat.read(site, as_version=4)
    assert [c.source for c in shown.cells] == ["# x", "1 + 1"]  # the runner's cells are gone
    assert shown.cells[1].execution_count == 1 and shown.cells[1].outputs[0]["data"]["text/plain"] == "2"
    assert shown.metadata["mystnb"]["execution_mode"] == "off"

    nb.cells[1].source = "1 + 2"  # edited after the tests ran: the build executes the source again
    nbformat.write(nb, source)
    assert not executed_tutorials.place(source, tmp_path / "executed", site)
    assert site.read_bytes() == source.read_bytes()
    assert not executed_tutorials.place(source, None, site)
