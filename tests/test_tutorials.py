"""Every tutorial notebook runs top to bottom (code cells executed in order)."""

import json
import pathlib

import matplotlib
import pytest

matplotlib.use("Agg")

NOTEBOOKS = sorted((pathlib.Path(__file__).parent.parent / "tutorials").glob("*.ipynb"))


def test_there_are_tutorials():
    assert NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path):
    cells = json.loads(path.read_text())["cells"]
    namespace = {"__name__": "__tutorial__"}
    for i, cell in enumerate(cells):
        if cell["cell_type"] == "code":
            source = "".join(cell["source"])
            exec(compile(source, f"{path.name}[cell {i}]", "exec"), namespace)
