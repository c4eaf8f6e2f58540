"""The README stays short, keeps CI's set-up commands, and its Python snippets run as written."""

import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()
SETUP = ('pip install torch==2.13.0 && pip install . && pyro-memo fit\n'
         'pip install torch==2.13.0 && pip install ".[test]" && python -m pytest -q\n')


def test_readme_is_at_most_10000_characters():
    assert len(README) <= 10_000, f"README.md has {len(README)} characters; move detail to docs/"


def test_readme_keeps_the_two_setup_commands():
    assert f"```bash\n{SETUP}```" in README


def test_readme_python_snippets_run_in_order():
    blocks = re.findall(r"```python\n(.*?)```", README, re.S)
    assert len(blocks) >= 3
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p),
               MPLBACKEND="Agg")
    done = subprocess.run([sys.executable, "-c", "\n".join(blocks)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "K: 3" in done.stdout
