"""No import cycle in skbayes: the modules form a hierarchy, imports inside functions included.

An import cycle works only while one of its imports stays inside a function
and is easy to break by moving it; it also means that two modules are one
idea split in two. The graph is read from the source (``ast``), so that the
imports inside functions count, and importing ``a.b.c`` counts as importing
the packages ``a`` and ``a.b`` too (their ``__init__`` runs first), except
those above the importing module (already being imported when it runs).
"""

import ast
import sys
from pathlib import Path

import skbayes

PACKAGE = Path(skbayes.__file__).parent


def module_files(package_dir):
    """{dotted module name: path} of every module of the package folder."""
    root = Path(package_dir)
    files = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        files[".".join(parts)] = path
    return files


def import_graph(package_dir):
    """{module: set of modules its execution may import}, imports inside functions included.

    Importing ``a.b.c`` runs ``a/__init__`` and ``a/b/__init__`` first, so the
    packages above a target count as imported too, except those above the
    importing module itself (already being imported when it runs).
    """
    files = module_files(package_dir)
    top = Path(package_dir).name

    def longest_module(name):
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name

    def ancestors(name):
        parts = name.split(".")
        return {".".join(parts[:i]) for i in range(1, len(parts))}

    graph = {}
    for module, path in files.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = package
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                source = (f"{base}.{node.module}" if node.module else base) if node.level else (node.module or "")
                names = [f"{source}.{alias.name}" for alias in node.names]
                targets.update(n if n in files else longest_module(source) for n in names)
            elif isinstance(node, ast.Import):
                targets.update(longest_module(alias.name) for alias in node.names)
        edges = set()
        for target in targets:
            if not target or not (target == top or target.startswith(top + ".")):
                continue
            edges |= {target} | (ancestors(target) - ancestors(module) - {module})
        edges.discard(module)
        graph[module] = edges - ancestors(module)
    return graph


def cycles(graph):
    """The strongly connected components of more than one module (Tarjan's algorithm), sorted."""
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
    return sorted(found)


def test_skbayes_has_no_import_cycle():
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 5000))
    graph = import_graph(PACKAGE)
    assert len(graph) == len(list(PACKAGE.rglob("*.py")))  # every module was read
    assert cycles(graph) == [], "modules that import each other (through a chain): " + "; ".join(
        " <-> ".join(component) for component in cycles(graph))


def _write_package(root, files):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_a_cycle_through_an_import_inside_a_function_is_found(tmp_path):
    package = _write_package(tmp_path / "pkg", {
        "__init__.py": "",
        "a.py": "from .b import g\n",
        "b.py": "def g():\n    from .a import f  # lazy\n    return f\n",
        "c.py": "from . import a\n",
    })
    assert cycles(import_graph(package)) == [["pkg.a", "pkg.b"]]


def test_a_cycle_through_a_package_init_is_found(tmp_path):
    # sub.x imports pkg.other.y, whose package __init__ imports pkg.sub.z: importing sub.x runs other/__init__.
    package = _write_package(tmp_path / "pkg", {
        "__init__.py": "",
        "sub/__init__.py": "from .x import X\nfrom .z import Z\n",
        "sub/x.py": "from ..other.y import Y\nX = Y\n",
        "sub/z.py": "Z = 1\n",
        "other/__init__.py": "from .y import Y\nfrom ..sub.z import Z\n",
        "other/y.py": "Y = 2\n",
    })
    assert cycles(import_graph(package)) == [["pkg.other", "pkg.sub", "pkg.sub.x"]]
    # without the package's own import of sub.z, the hierarchy is clean
    (package / "other" / "__init__.py").write_text("from .y import Y\n")
    assert cycles(import_graph(package)) == []


def test_the_torch_engines_do_not_import_scikit_learn():
    # skbayes.nn computes with torch; translating scikit-learn objects is the estimators' side.
    offenders = []
    for module, path in module_files(PACKAGE).items():
        if not module.startswith("skbayes.nn"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            offenders += [f"{module}: {name}" for name in names if name.split(".")[0] == "sklearn"]
    assert offenders == []
