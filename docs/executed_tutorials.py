"""Hand executed tutorials from the test suite to the docs build, so CI runs each notebook once.

The test suite executes every tutorial (tests/test_tutorials.py). With ``PYRO_MEMO_EXECUTED_TUTORIALS``
set to a folder, it also :func:`save`\\ s each executed notebook there, stamped with the SHA-256 of the source
file it ran; the docs build (docs/conf.py) then :func:`place`\\ s a stamped copy whose stamp matches the
source as it is now, with myst-nb's execution turned off for that page, and executes every other notebook
itself. Without the variable, or for a notebook edited since the tests ran, the build executes as before.
"""

import copy
import hashlib
import json
import pathlib

ENV = "PYRO_MEMO_EXECUTED_TUTORIALS"
STAMP = "pyro_memo_source_sha256"


def digest(source):
    """SHA-256 of the source notebook's bytes."""
    return hashlib.sha256(pathlib.Path(source).read_bytes()).hexdigest()


def save(source, executed, directory, added=(0, 0)):
    """Write ``executed`` (an ``nbformat`` notebook run from ``source``) to ``directory`` under the source's
    name, stamped with the source's digest; ``added = (first, last)`` cells the runner put around the source's
    cells are dropped and the execution counts renumbered from one."""
    nb = copy.deepcopy(executed)
    nb.cells = nb.cells[added[0]:len(nb.cells) - added[1]]
    count = 0
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.get("execution_count") is not None:
            count += 1
            cell.execution_count = count
            for out in cell.outputs:
                if "execution_count" in out:
                    out["execution_count"] = count
    nb.metadata[STAMP] = digest(source)
    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / pathlib.Path(source).name
    partial = target.with_suffix(".partial")
    partial.write_text(json.dumps(nb, indent=1))
    partial.replace(target)


def place(source, directory, target):
    """Copy ``source`` to ``target`` for the site: the executed copy from ``directory`` when its stamp matches
    the source (its page then is not executed again), else the source itself. Returns True for the former."""
    source, target = pathlib.Path(source), pathlib.Path(target)
    executed = pathlib.Path(directory) / source.name if directory else None
    if executed is not None and executed.is_file():
        nb = json.loads(executed.read_text())
        if nb.get("metadata", {}).get(STAMP) == digest(source):
            nb["metadata"].setdefault("mystnb", {})["execution_mode"] = "off"
            target.write_text(json.dumps(nb, indent=1))
            return True
    target.write_bytes(source.read_bytes())
    return False
