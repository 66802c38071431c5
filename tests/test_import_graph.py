"""The import direction of docs/ARCHITECTURE.md's layer table, checked on the source: the table
places every package and root module of ``mtrl`` in one row, each module imports (at run time,
in a function or under ``TYPE_CHECKING``) only the parts its row allows, and no module imports
one that imports it back. The table is read from the page itself, so the page cannot drift from
the code."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "mtrl"
PAGE = ROOT.parent / "docs" / "ARCHITECTURE.md"


@dataclass(frozen=True)
class Row:
    """One row of the layer table: the module prefixes it holds and those it may import
    (None: everything)."""

    parts: tuple[str, ...]
    allowed: frozenset[str] | None


def _dotted(cell: str) -> str:
    """```mtrl/config/``` -> ``mtrl.config``; ``mtrl/errors.py`` -> ``mtrl.errors``;
    ``mtrl/__init__.py`` -> ``mtrl``."""
    path = cell.removesuffix("/").removesuffix(".py").removesuffix("/__init__")
    return path.replace("/", ".")


def layer_table(text: str) -> list[Row]:
    """The rows of the page's ``| layer | owns | imports only |`` table."""
    lines = text.splitlines()
    head = lines.index("| layer | owns | imports only |")
    rows = []
    for line in lines[head + 2 :]:
        if not line.startswith("|"):
            break
        layer, _, imports = (c.strip() for c in line.strip("|").split("|"))
        parts = tuple(_dotted(c) for c in re.findall(r"`(mtrl/[^`]*)`", layer))
        allowed = (
            None
            if imports == "everything"
            else frozenset(f"mtrl.{name}" for name in re.findall(r"`(\w+)`", imports))
        )
        rows.append(Row(parts, allowed))
    return rows


ROWS = layer_table(PAGE.read_text(encoding="utf-8"))
LEAVES = frozenset(ROWS[0].parts)
"""The first row's modules, which every row may import."""


def row_of(module: str) -> Row | None:
    """The row holding ``module``: the longest prefix (the bare ``mtrl`` matches itself only)."""
    best: tuple[int, Row] | None = None
    for row in ROWS:
        for part in row.parts:
            inside = module == part or (part != "mtrl" and module.startswith(part + "."))
            if inside and (best is None or len(part) > best[0]):
                best = (len(part), row)
    return best[1] if best else None


def owner(module: str) -> str:
    """The part of the table ``module`` belongs to (``mtrl.config.models`` -> ``mtrl.config``)."""
    row = row_of(module)
    assert row is not None
    return max((p for p in row.parts if module == p or module.startswith(p + ".")), key=len)


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


def test_the_table_is_read_whole() -> None:
    assert len(ROWS) >= 15 and {"mtrl", "mtrl.errors"} <= LEAVES
    assert row_of("mtrl.config.models") is row_of("mtrl.config")
    assert row_of("mtrl") is ROWS[0] and row_of("mtrl.config") is not ROWS[0]
    assert owner("mtrl.algorithms.sac.learner") == "mtrl.algorithms"


def test_every_module_sits_in_one_row() -> None:
    unplaced = sorted(m for m in modules() if row_of(m) is None)
    assert unplaced == [], f"place these in docs/ARCHITECTURE.md's layer table: {unplaced}"
    parts = [p for row in ROWS for p in row.parts]
    assert len(parts) == len(set(parts)), "a part in two rows"


CHECKED = [r for r in ROWS if r.allowed is not None]
"""The rows with a limit (the ``mtrl`` command's may import everything)."""


@pytest.mark.parametrize("row", CHECKED, ids=[", ".join(r.parts) for r in CHECKED])
def test_each_row_imports_only_what_the_table_allows(row: Row) -> None:
    assert row.allowed is not None
    allowed = row.allowed | LEAVES
    bad = [
        f"{m} imports {dep}"
        for m, deps in sorted(graph().items())
        if row_of(m) is row
        for dep in sorted(deps)
        if row_of(dep) is not row and owner(dep) not in allowed
    ]
    assert bad == []


def test_an_import_the_table_does_not_allow_is_found() -> None:
    """The check itself: a config module importing the plugins is outside its row."""
    config = row_of("mtrl.config")
    assert config is not None and config.allowed is not None
    assert owner("mtrl.plugins.manager") not in config.allowed | LEAVES
