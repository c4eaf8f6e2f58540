"""Import direction: imports inside ``pyro_memo`` only go down the layers, and no modules import each other in a circle.

Every module of the package is parsed with :mod:`ast` (nothing is imported), and every
intra-package import in it -- absolute or relative, at module level or inside a function -- is an
edge from the importing module to the imported one. ``from pkg import name`` points at the module
``pkg.name`` when there is one, otherwise at ``pkg`` (its ``__init__``).

Rules, each failing with the module, the line and the import that break it:

1. **Every module is placed.** A module belongs to the unit whose prefix in :data:`LAYERS` is the
   longest one naming it or a package holding it (the root ``pyro_memo`` matches only its own
   ``__init__``). A module in no unit fails the test, so a new package gets placed deliberately.
2. **Imports only go down.** A module may import modules of its own layer or of lower layers, never of
   a higher layer.
3. **No module cycle.** The module graph (edges as above, including a package ``__init__``'s edges to
   the submodules it re-exports) has no strongly connected component of more than one module.
   Importing ``a.b.c`` also executes ``a/__init__`` and ``a/b/__init__``; those implicit edges are
   not counted, since every package re-exporting its own submodules would otherwise be a cycle.
4. **No unit cycle.** Collapsing modules to their units (the entries of :data:`LAYERS`), units of
   the same layer may import each other only one way: the unit graph has no cycle either. This is
   what catches a package and a module importing each other through different submodules.
"""

import ast
import pathlib
from collections import defaultdict

import pytest

ROOT = "pyro_memo"
PACKAGE_DIR = pathlib.Path(__file__).resolve().parents[1] / ROOT

#: layers from low to high: layer name -> units (module prefixes). A module may import its own layer and those
#: listed before it. To place a new package, add its dotted name to the layer it belongs to.
LAYERS = {
    # argument checks every layer shares
    "checks": ["pyro_memo.checks"],
    # data in and out, no model knowledge: batches, corpora, array files, bundled downloads, synthetic generators
    "data": ["pyro_memo.data", "pyro_memo.data_sources", "pyro_memo.datasets", "pyro_memo.synthetic"],
    # pure math on arrays and tensors
    "math": ["pyro_memo.ops", "pyro_memo.families._special", "pyro_memo.metrics"],
    # conjugate observation families
    "families": ["pyro_memo.families"],
    # allocation models: DP (and HDP) sticks
    "allocation": ["pyro_memo.allocation"],
    # sufficient statistics and variational posteriors built from an allocation model and a family
    "summaries": ["pyro_memo.summaries", "pyro_memo.posterior"],
    # drivers, moves, checkpoints
    "engine": ["pyro_memo.engine", "pyro_memo.memo", "pyro_memo.inference"],
    # the HDP topic model and the HDP relational model
    "topics": ["pyro_memo.topics", "pyro_memo.relational"],
    # Pyro models and the bridge from Pyro programs to the engine; baseline methods
    "pyro": ["pyro_memo.models", "pyro_memo.bridge", "pyro_memo.baselines"],
    # applications: comparisons, image denoising, command lines, reports, and the package's public namespace
    "apps": ["pyro_memo.comparison", "pyro_memo.denoising", "pyro_memo.cli", "pyro_memo.reporting",
             "pyro_memo.estimator", "pyro_memo.model_file", "pyro_memo.topic_estimator",
             "pyro_memo.community_estimator", ROOT],
}


def module_name(path):
    """Dotted name of the module in ``path`` (a package's ``__init__`` is named by its package)."""
    parts = list(path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def parse_package():
    """``{module name: (path, ast tree)}`` for every ``.py`` file of the package."""
    return {module_name(p): (p, ast.parse(p.read_text(), str(p))) for p in sorted(PACKAGE_DIR.rglob("*.py"))}


def _resolve(name, modules):
    """The module ``name`` refers to: itself if it is one, else the longest module prefix of it."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name


def _targets(node, source, is_package, modules):
    """Intra-package modules imported by the ``Import`` / ``ImportFrom`` node ``node`` in module ``source``."""
    if isinstance(node, ast.Import):
        return [_resolve(a.name, modules) for a in node.names if a.name.split(".")[0] == ROOT]
    if node.level:
        base = source.split(".") if is_package else source.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    if target.split(".")[0] != ROOT:
        return []
    return [f"{target}.{a.name}" if f"{target}.{a.name}" in modules else _resolve(target, modules) for a in node.names]


def import_edges(modules):
    """``[(source, target, line, import text)]`` for every intra-package import (self-imports dropped)."""
    edges = []
    for source, (path, tree) in modules.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                text = ast.unparse(node)
                for target in dict.fromkeys(_targets(node, source, is_package, modules)):
                    if target != source:
                        edges.append((source, target, node.lineno, text))
    return edges


def unit_of(module):
    """``(layer index, layer name, unit)`` of ``module``, or ``None`` when no unit in :data:`LAYERS` holds it."""
    best = None
    for index, (layer, units) in enumerate(LAYERS.items()):
        for unit in units:
            hit = module == unit if unit == ROOT else module == unit or module.startswith(unit + ".")
            if hit and (best is None or len(unit) > len(best[2])):
                best = (index, layer, unit)
    return best


def cycles(graph):
    """Strongly connected components of more than one node (Tarjan 1972), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _describe(component, edges, key):
    """The import lines that close a cycle among ``component`` (nodes mapped by ``key``)."""
    inside = set(component)
    return "\n    ".join(f"{s}:{line}: {text}  [{key(s)} -> {key(t)}]" for s, t, line, text in edges
                         if key(s) in inside and key(t) in inside and key(s) != key(t))


@pytest.fixture(scope="module")
def package():
    modules = parse_package()
    return modules, import_edges(modules)


def test_the_package_is_parsed(package):
    modules, edges = package
    assert {ROOT, "pyro_memo.families", "pyro_memo.inference.memoized_vb"} <= set(modules)
    assert ("pyro_memo.allocation.dp_sticks", "pyro_memo.families._special") in {(s, t) for s, t, _, _ in edges}


def test_every_module_is_in_a_layer(package):
    modules, edges = package
    imports = defaultdict(list)
    for s, _, line, text in edges:
        imports[s].append(f"line {line}: {text}")
    unplaced = [m for m in modules if unit_of(m) is None]
    message = "\n".join(f"{m} is in no layer of LAYERS (tests/test_layering.py); its imports: "
                        f"{'; '.join(imports[m]) or 'none'}" for m in unplaced)
    assert not unplaced, message + "\nAdd the module or its package to the layer where it belongs."


def test_imports_only_go_down(package):
    _, edges = package
    upward = []
    for s, t, line, text in edges:
        src, tgt = unit_of(s), unit_of(t)
        if src and tgt and tgt[0] > src[0]:
            upward.append(f"{s}:{line}: {text}  (layer '{src[1]}' imports the higher layer '{tgt[1]}' via {t})")
    assert not upward, "upward imports:\n" + "\n".join(upward)


def test_no_module_imports_itself_through_a_cycle(package):
    modules, edges = package
    graph = defaultdict(set)
    for s, t, _, _ in edges:
        graph[s].add(t)
    found = cycles(graph)
    assert not found, "import cycles between modules:\n" + "\n".join(
        f"{' <-> '.join(c)}:\n    {_describe(c, edges, lambda m: m)}" for c in found)


def test_no_cycle_between_units(package):
    _, edges = package
    key = {}
    graph = defaultdict(set)
    for s, t, _, _ in edges:
        for m in (s, t):
            key[m] = unit_of(m)[2] if unit_of(m) else m
        if key[s] != key[t]:
            graph[key[s]].add(key[t])
    found = cycles(graph)
    assert not found, "import cycles between units of LAYERS:\n" + "\n".join(
        f"{' <-> '.join(c)}:\n    {_describe(c, edges, key.get)}" for c in found)


def test_an_unplaced_module_and_an_upward_import_are_reported():
    """The rules themselves can fail: a fake module outside every layer, and a family importing the engine."""
    assert unit_of("pyro_memo.newpackage.thing") is None
    assert unit_of("pyro_memo.cli.models.hdp")[1] == "apps" and unit_of("pyro_memo.topics.corpus")[1] == "topics"
    modules = {"pyro_memo.families.fake": (PACKAGE_DIR / "families" / "fake.py",
                                           ast.parse("def f():\n    from ..inference import MemoizedVB\n")),
               "pyro_memo.inference": (PACKAGE_DIR / "inference" / "__init__.py", ast.parse(""))}
    (edge,) = import_edges(modules)
    assert edge[:3] == ("pyro_memo.families.fake", "pyro_memo.inference", 2)
    assert unit_of(edge[1])[0] > unit_of(edge[0])[0]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
