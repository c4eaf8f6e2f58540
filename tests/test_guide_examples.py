"""The user guide's Python examples run as written.

Each guide page's ``python`` blocks (those at the start of a line; an indented block inside a list is a
fragment of prose) run in order in one fresh interpreter, as a reader pasting them one after another
would. A page's text assumes some names (``x``, ``texts``, ``my_posterior``); the stand-ins below give
them small data (and files: cluster.md's ``patches.npy`` and ``corpus.ldac``), before the block that first
uses them. Left out, and why: cluster.md's GPU block, denoising.md (2,000,000 patches on a GPU),
topics.md (a 50-lap fit of the Wikipedia corpus, about 17 minutes here), conventions.md (model fragments
cut with ``...``), memory_bounded.md's last block (all of Fashion-MNIST, about half an hour).
"""

import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).parent.parent
GUIDE = ROOT / "docs"

TOY = """
import torch
import pyro_memo as pm
torch.manual_seed(0)
x = torch.cat([c + torch.randn(300, 2, dtype=torch.float64)
               for c in torch.tensor([[0.0, 0.0], [9.0, 0.0], [0.0, 9.0]], dtype=torch.float64)])
"""

#: page -> {block number: the stand-in code run before it}; a page runs its blocks up to the highest
#: numbered one listed (``None``: no stand-in before that block)
PAGES = {
    "quickstart.md": {0: None},
    "guide/choosing.md": {0: TOY + "family = pm.Gaussian.from_data(x)\n", 1: None},
    "guide/cluster.md": {0: TOY + """
import numpy as np
family = pm.Gaussian.from_data(x)
np.save("patches.npy", x.numpy())
""", 1: """
rng = np.random.default_rng(0)
with open("corpus.ldac", "w") as f:
    for _ in range(300):
        ids = rng.choice(50, 8, replace=False)
        f.write(f"{len(ids)} " + " ".join(f"{i}:{rng.integers(1, 5)}" for i in ids) + "\\n")
with open("vocab.txt", "w") as f:
    f.write("\\n".join(f"w{i}" for i in range(50)) + "\\n")
"""},
    "guide/comparison.md": {0: TOY + """
labels = torch.arange(3).repeat_interleave(300)
heldout = x[::10]
methods, seeds = ["memo", "vb", "memo-moves"], [0, 1]
"""},
    "guide/engine.md": {0: """
import pyro_memo as pm
from tests.engine.test_custom_model import blobs, start
x = blobs(0)
my_posterior = start(x, 4, seed=0)
"""},
    "guide/estimator.md": {0: None, 1: """
texts = ["the cat sat on the mat", "a dog chased the cat", "stocks fell as the market slid",
         "the market rallied on bank stocks", "the dog and the cat slept"] * 20
""", 2: None},
    "guide/memory_bounded.md": {0: "import numpy as np\nx = np.random.default_rng(0).normal(size=(3000, 2))\n", 1: """
rng = np.random.default_rng(1)
groups = [rng.normal(size=(40, 3)) + 6.0 * rng.integers(3, size=(1, 3)) for _ in range(30)]
pixels = np.concatenate(groups)
total_pixels = len(pixels)
"""},
    "guide/pyro.md": {0: None, 1: None},
    "guide/relational.md": {0: None, 1: """
import torch
N = 40
first, second = torch.triu_indices(N, N, 1)
y = (torch.rand(len(first), generator=torch.Generator().manual_seed(0)) < 0.1).double()
"""},
    "guide/saving.md": {0: TOY + "family = pm.Gaussian.from_data(x)\nx_new = x[:5]\n"},
}

#: printed output a page states, checked where it runs
STATED = {"quickstart.md": "K: 3"}


def python_blocks(page):
    return re.findall(r"^```python\n(.*?)^```", (GUIDE / page).read_text(), re.S | re.M)


def program(page):
    blocks, stand_ins = python_blocks(page), PAGES[page]
    parts = []
    for number in range(max(stand_ins) + 1):
        parts += [stand_ins.get(number) or "", blocks[number]]
    return "\n".join(parts)


def test_every_page_listed_has_the_blocks_the_stand_ins_name():
    for page, stand_ins in PAGES.items():
        assert max(stand_ins) < len(python_blocks(page)), page


@pytest.mark.parametrize("page", sorted(PAGES))
def test_the_guide_examples_of_a_page_run_in_order_in_a_fresh_process(page, tmp_path):
    env = dict(os.environ, MPLBACKEND="Agg", OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
    done = subprocess.run([sys.executable, "-c", program(page)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    if page in STATED:
        assert STATED[page] in done.stdout


#: a role in the docs, a public object and its call written after it: {class}`~pyro_memo.X` `(a, b=1, ...)`
CALL_SHAPE = re.compile(r"\{(?:class|func)\}`~?(pyro_memo[\w.]*)` `\(([^`]*)\)`")


def documented_calls():
    """``(page, dotted name, the arguments written)`` of every call shape written after a role in the docs."""
    for page in sorted([*GUIDE.glob("*.md"), *GUIDE.glob("*/*.md")]):
        text = " ".join(page.read_text().split())
        for name, arguments in CALL_SHAPE.findall(text):
            yield page.relative_to(GUIDE).as_posix(), name, arguments


def test_the_call_shapes_the_docs_write_name_real_parameters_with_their_defaults():
    """``{class}`~pyro_memo.topics.TopicMergeMove` `(pairs_per_topic=2, ...)``: each name written is a parameter
    of the object's signature and each default written (a Python literal) is the signature's."""
    import ast
    import importlib
    import inspect

    calls = list(documented_calls())
    assert len(calls) >= 20
    for page, name, arguments in calls:
        module, _, attribute = name.rpartition(".")
        parameters = inspect.signature(getattr(importlib.import_module(module), attribute)).parameters
        for argument in (a.strip() for a in arguments.split(",")):
            if argument in ("...", "*args"):
                continue
            key, equals, value = argument.partition("=")
            assert key in parameters, f"{page}: {name} has no parameter {key!r}"
            if equals and value and value != "...":  # `K=...`: a value to give, not a default
                assert parameters[key].default == ast.literal_eval(value), f"{page}: {name}'s {key}"


def test_the_installation_page_lists_every_extra_of_the_project():
    """docs/installation.md's table of optional extras has a row for each extra pyproject.toml defines."""
    section = (ROOT / "pyproject.toml").read_text().split("[project.optional-dependencies]")[1].split("\n[")[0]
    extras = re.findall(r"^([\w-]+) = \[", section, re.M)  # (tomllib is Python 3.11's; the project runs on 3.10)
    assert len(extras) >= 6
    rows = re.findall(r'^\| `pip install "\.\[([\w-]+)\]"` \|', (GUIDE / "installation.md").read_text(), re.M)
    assert sorted(rows) == sorted(extras)


def test_the_choosing_pages_prior_table_names_each_familys_hyperparameters_and_scale():
    """docs/guide/choosing.md's table: each family's ``--prior`` keys (the prior's numbers; matrices are set by the
    scale only) and the one ``--prior-scale`` multiplies (the family's ``spread_key``; ``—`` for none)."""
    import pyro_memo as pm
    from pyro_memo.cli.names import MATRIX_PRIORS

    text = (GUIDE / "guide" / "choosing.md").read_text()
    table = {}
    for names, keys, scaled in re.findall(r"^\| (`[\w-]+`(?:, `[\w-]+`)*) \| (.*?) \| (.*?) \|$", text, re.M):
        for name in re.findall(r"`([\w-]+)`", names):
            table[name] = ([a or b for a, b in re.findall(r"^`(\w+)`|, `(\w+)`", keys)], scaled)
    assert set(pm.FAMILIES) <= set(table)
    x = np.random.default_rng(0).poisson(3.0, size=(50, 3)).astype(float)
    for name in pm.FAMILIES:
        keys, scaled = table[name]
        family = pm.get_family(name).from_data(x if name != "bern" else (x > 2).astype(float))
        assert sorted(keys) == sorted(k for k in family.prior if k not in MATRIX_PRIORS), name
        assert scaled.split(" ")[0] == (f"`{family.spread_key}`" if family.spread_key else "—"), name
