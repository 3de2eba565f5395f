"""The package's layers, checked on its import graph (docs/architecture.md).

``cli → experiments → methods → {data, hub, sites, artifacts, learners, registry} → privacy →
schema/errors``: a module may import its own layer or a lower one, never a higher one, and the
modules' imports form no cycle.  The graph is built from the source's AST: module-level and
function-level imports count (a lazy import is still a dependency), and so do imports under
``if TYPE_CHECKING:`` (a type-only import is still a dependency: the importer's annotations name
the imported module's classes, so the two cannot be understood, moved or tested apart).  Importing a package's face (its ``__init__``) from inside the
package is not counted as a cycle only when the face is the importer's own parent package.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pubsubml

ROOT = Path(pubsubml.__file__).parent

#: Rank of each top-level part of the package: an import may only go to an equal or lower rank.
RANK: dict[str, float] = {
    "__main__": 7,
    "cli": 6,
    "experiments": 5,
    "methods": 4,
    "audit": 4,
    "data": 3,
    "hub": 3,
    "sites": 3,
    "registry": 3,
    "artifacts": 2.5,
    "learners": 2.2,
    "privacy": 1,
    "schema": 0,
    "errors": 0,
    "lazy": 0,  # the package faces' lazy loading: imports nothing of the package
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imports_of(source: str) -> set[str]:
    """``pubsubml`` modules a source imports: at module level, in functions and for type checking."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "pubsubml" or node.module.startswith("pubsubml."):
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("pubsubml."))
    return found


def import_graph() -> dict[str, set[str]]:
    graph = {}
    for path in sorted(ROOT.rglob("*.py")):
        if "migrations" in path.parts:
            continue
        graph[module_name(path)] = imports_of(path.read_text(encoding="utf-8"))
    return graph


def layer(module: str) -> float | None:
    parts = module.split(".")
    return RANK.get(parts[1]) if len(parts) > 1 else None


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    bad = []
    for module, deps in graph.items():
        own = layer(module)
        for dep in deps:
            target = layer(dep)
            if own is not None and target is not None and target > own:
                bad.append(f"{module} -> {dep}")
    return sorted(bad)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Cycles found by a depth-first search (each reported once, from where it was entered)."""

    def edges(module: str) -> list[str]:
        # A module importing its own parent package's face depends on code the face imports, but
        # the face is where the package's names are assembled: not a cycle of the design.
        return [d for d in graph.get(module, ()) if d in graph and not module.startswith(d + ".")]

    state: dict[str, int] = {}
    found: list[list[str]] = []

    def visit(module: str, stack: list[str]) -> None:
        state[module] = 1
        stack.append(module)
        for dep in edges(module):
            if state.get(dep) == 1:
                found.append([*stack[stack.index(dep) :], dep])
            elif dep not in state:
                visit(dep, stack)
        stack.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [])
    return found


def test_every_part_has_a_layer() -> None:
    tops = {m.split(".")[1] for m in import_graph() if "." in m}
    assert tops <= set(RANK), f"parts without a layer: {sorted(tops - set(RANK))}"


def test_no_upward_import() -> None:
    assert upward_imports(import_graph()) == []


def test_no_import_cycle() -> None:
    assert cycles(import_graph()) == []


@pytest.mark.parametrize(
    ("graph", "upward", "n_cycles"),
    [
        ({"pubsubml.methods.a": {"pubsubml.cli"}, "pubsubml.cli": set()}, 1, 0),
        ({"pubsubml.cli": {"pubsubml.methods.a"}, "pubsubml.methods.a": set()}, 0, 0),
        (
            {"pubsubml.data.a": {"pubsubml.data.b"}, "pubsubml.data.b": {"pubsubml.data.a"}},
            0,
            1,
        ),
        ({"pubsubml.data.a": {"pubsubml.data"}, "pubsubml.data": {"pubsubml.data.a"}}, 0, 0),
    ],
)
def test_the_checks_can_fail(graph: dict[str, set[str]], upward: int, n_cycles: int) -> None:
    assert len(upward_imports(graph)) == upward
    assert len(cycles(graph)) == n_cycles


def test_type_checking_imports_are_dependencies() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "import pubsubml.data\n"
        "if TYPE_CHECKING:\n"
        "    from pubsubml.cli import app\n"
        "def f():\n"
        "    from pubsubml.methods import Customizer\n"
    )
    assert imports_of(source) == {"pubsubml.data", "pubsubml.cli", "pubsubml.methods"}


def test_a_type_only_cycle_is_a_cycle() -> None:
    a = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pubsubml.data.b import B\n"
    b = "from pubsubml.data.a import A\n"
    graph = {"pubsubml.data.a": imports_of(a), "pubsubml.data.b": imports_of(b)}
    assert len(cycles(graph)) == 1
