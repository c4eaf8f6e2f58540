"""Every benchmark script imports cleanly, uses only the public API and does its work only when run.

Each ``benchmarks/*.py`` is imported (with the optional peers gensim, tomotopy and bnpy made
unimportable, so a top-level import of one fails), must print nothing on import, must keep its work in
``main()`` behind ``if __name__ == "__main__":``, and must answer ``--help``. Its imports from
``pyro_memo`` must name the package itself or one of its subpackages (``pyro_memo.topics``, ...), and
only names in that module's ``__all__``; ``pm.X`` with ``import pyro_memo as pm`` must be in
``pyro_memo.__all__``.
"""

import ast
import importlib
import importlib.util
import pathlib
import sys

import pytest

BENCHMARKS = pathlib.Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPTS = sorted(p for p in BENCHMARKS.glob("*.py"))
PEERS = ("gensim", "gensim.models", "tomotopy", "bnpy")
#: module-level statements a script may have besides its docstring and the main guard
ALLOWED = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign)


@pytest.fixture
def load(monkeypatch):
    """Import a benchmark script by path as its runner would (``benchmarks/`` on ``sys.path``), peers hidden."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    for peer in PEERS:
        monkeypatch.setitem(sys.modules, peer, None)
    monkeypatch.delitem(sys.modules, "_common", raising=False)

    def load(path):
        spec = importlib.util.spec_from_file_location(f"benchmark_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    yield load
    sys.modules.pop("_common", None)


def test_there_are_benchmarks_and_a_shared_helper():
    names = {p.name for p in SCRIPTS}
    assert "_common.py" in names and "bench_toy.py" in names and len(names) >= 10


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_script_imports_without_side_effects_or_peers(path, load, capsys):
    module = load(path)
    assert capsys.readouterr() == ("", "")
    if path.name == "_common.py":
        return
    tree = ast.parse(path.read_text())
    body = tree.body[1:] if ast.get_docstring(tree) else tree.body
    guard = body[-1]
    assert isinstance(guard, ast.If) and ast.unparse(guard.test) == "__name__ == '__main__'", \
        f"{path.name} must end with `if __name__ == \"__main__\": main()`"
    loose = [f"line {s.lineno}: {ast.unparse(s)[:60]}" for s in body[:-1] if not isinstance(s, ALLOWED)]
    assert not loose, f"{path.name} runs code at import time: {loose}"
    assert callable(module.main)


@pytest.mark.parametrize("path", [p for p in SCRIPTS if p.name != "_common.py"], ids=lambda p: p.name)
def test_script_answers_help(path, load, monkeypatch, capsys):
    module = load(path)
    monkeypatch.setattr(sys, "argv", [str(path), "--help"])
    with pytest.raises(SystemExit) as stop:
        module.main()
    assert stop.value.code == 0 and "usage:" in capsys.readouterr().out


def _public(name):
    """The public names of ``name`` if it is ``pyro_memo`` or a subpackage of it, else ``None``."""
    parts = name.split(".")
    if parts[0] != "pyro_memo" or len(parts) > 2:
        return None
    module = importlib.import_module(name)
    if len(parts) == 2 and not hasattr(module, "__path__"):
        return None
    return set(module.__all__)


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_script_uses_only_the_public_api(path):
    tree = ast.parse(path.read_text())
    aliases, bad = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "pyro_memo":
            public = _public(node.module)
            names = [a.name for a in node.names]
            if public is None or not set(names) <= public:
                bad.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "pyro_memo":
                    if _public(a.name) is None:
                        bad.append(f"line {node.lineno}: {ast.unparse(node)}")
                    if a.name == "pyro_memo":
                        aliases.add(a.asname or a.name)
    top = _public("pyro_memo")
    bad += [f"line {n.lineno}: {ast.unparse(n)}" for n in ast.walk(tree) if isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name) and n.value.id in aliases and n.attr not in top]
    assert not bad, f"{path.name} reaches past the public API (pyro_memo and its subpackages' __all__):\n" + \
        "\n".join(bad)


def test_the_public_api_check_can_fail():
    assert _public("pyro_memo.inference.moves.greedy_merge") is None
    assert _public("pyro_memo.datasets") is None
    assert "fetch_wikipedia" in _public("pyro_memo.data")
