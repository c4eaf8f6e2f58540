"""The README stays short, keeps CI's set-up commands, and its Python snippets run as written."""

import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()
SETUP = ('pip install torch==2.13.0 && pip install . && pyro-memo fit\n'
         'pip install torch==2.13.0 && pip install ".[test]" && python -m pytest -q -n auto\n')


def test_readme_is_at_most_10000_characters():
    assert len(README) <= 10_000, f"README.md has {len(README)} characters; move detail to docs/"


def test_readme_keeps_the_two_setup_commands():
    assert f"```bash\n{SETUP}```" in README


def python_blocks():
    return re.findall(r"```python\n(.*?)```", README, re.S)


@pytest.mark.parametrize("number", range(len(python_blocks())))
def test_each_readme_python_block_runs_as_written_in_a_fresh_process(number):
    """Every block is a whole program: copied alone into a fresh interpreter it runs (no block leans on
    names another block defined)."""
    block = python_blocks()[number]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p),
               MPLBACKEND="Agg", OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", block], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    if number == 0:
        assert "K: 3" in done.stdout


def test_the_readme_has_its_three_examples():
    assert len(python_blocks()) >= 3
