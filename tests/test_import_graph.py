"""The import direction of docs/ARCHITECTURE.md's layer table, checked on the source: no
module imports (at run time, in a function or under ``TYPE_CHECKING``) one that imports it
back, and each layer imports only the layers its row allows."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "mtrl"

#: layer (package prefix) -> mtrl prefixes it must never import (docs/ARCHITECTURE.md).
FORBIDDEN = {
    "mtrl.config": (
        "mtrl.plugins",
        "mtrl.scheduler",
        "mtrl.actors",
        "mtrl.learner",
        "mtrl.tracking",
        "mtrl.train",
        "mtrl.tune",
        "mtrl.cli",
        "mtrl.anakin",
    ),
    "mtrl.learner": (
        "mtrl.plugins",
        "mtrl.scheduler",
        "mtrl.actors",
        "mtrl.tracking",
        "mtrl.train",
        "mtrl.tune",
        "mtrl.cli",
        "mtrl.anakin",
    ),
    "mtrl.scheduler": (
        "mtrl.actors",
        "mtrl.learner",
        "mtrl.tracking",
        "mtrl.train",
        "mtrl.tune",
        "mtrl.cli",
        "mtrl.anakin",
    ),
    "mtrl.tracking": (
        "mtrl.actors",
        "mtrl.learner",
        "mtrl.scheduler",
        "mtrl.train",
        "mtrl.tune",
        "mtrl.anakin",
    ),
    "mtrl.plugins": (
        "mtrl.scheduler",
        "mtrl.actors",
        "mtrl.learner",
        "mtrl.tracking",
        "mtrl.train",
        "mtrl.tune",
        "mtrl.cli",
        "mtrl.anakin",
    ),
}


def modules() -> dict[str, Path]:
    """Dotted name -> file, for every module of the ``mtrl`` package."""
    out = {}
    for f in ROOT.rglob("*.py"):
        parts = list(f.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = f
    return out


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The ``mtrl`` modules ``name`` imports anywhere in its source. ``from pkg import sub``
    counts as an import of the submodule, not of the package."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in known]
            found.update(subs if len(subs) == len(node.names) else [base, *subs])
    return {m for m in found if m in known and m != name}


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {m: imports(m, p, set(mods)) for m, p in mods.items()}


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(g):
        if root in index:
            continue
        work = [(root, iter(sorted(g[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(g[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def test_cycle_finder_sees_a_circle_of_three() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles() -> None:
    assert cycles(graph()) == []


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layer_imports_only_downwards(layer: str) -> None:
    bad = [
        f"{m} imports {dep}"
        for m, deps in sorted(graph().items())
        if m == layer or m.startswith(layer + ".")
        for dep in sorted(deps)
        if any(dep == f or dep.startswith(f + ".") for f in FORBIDDEN[layer])
    ]
    assert bad == []
