"""The import graph of a package, read from its source with `ast`.

Every import statement counts, wherever it stands: at the top of a module, under
`if TYPE_CHECKING:`, inside a function. A deferred import still ties two modules together
(whoever changes one has to reason about the other), and deferring it is the usual way a
cycle gets hidden rather than removed. Relative imports are resolved, and
`from package import module` is an import of that module, not of the package.
"""

from __future__ import annotations

import ast
import sys
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from tests.pools import ROOT

SOURCE = ROOT / "operator"
PACKAGE = "gpufleet"


@dataclass(frozen=True)
class Import:
    """One import of `imported` (a module of the package) by `importer`, where it stands."""

    importer: str
    imported: str
    path: Path
    line: int
    statement: str
    context: str  # "", "inside a function" or "under TYPE_CHECKING"


@dataclass
class Graph:
    modules: dict[str, Path]
    imports: list[Import] = field(default_factory=list)
    # Top-level names of modules outside the package (standard library left out), by importer.
    external: dict[str, set[str]] = field(default_factory=dict)

    def edges(self) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {name: set() for name in self.modules}
        for i in self.imports:
            out[i.importer].add(i.imported)
        return out

    def where(self, importer: str, imported: str) -> list[Import]:
        return [i for i in self.imports if (i.importer, i.imported) == (importer, imported)]

    def closure(self, roots: Iterable[str]) -> set[str]:
        """The modules `roots` import, directly or not, the roots included."""
        edges = self.edges()
        seen = set(roots)
        todo = list(seen)
        while todo:
            for imported in edges[todo.pop()] - seen:
                seen.add(imported)
                todo.append(imported)
        return seen


def modules(source: Path = SOURCE, package: str = PACKAGE) -> dict[str, Path]:
    """Module name -> file, for every module of the package (packages by their __init__)."""
    found = {}
    for path in sorted((source / package).rglob("*.py")):
        parts = path.relative_to(source).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _base(module: str | None, level: int, importer: str, is_package: bool) -> str:
    """The absolute module a `from ... import` names, relative levels resolved."""
    if level == 0:
        return module or ""
    package = importer if is_package else importer.rpartition(".")[0]
    for _ in range(level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{module}" if module else package


def build(source: Path = SOURCE, package: str = PACKAGE) -> Graph:
    graph = Graph(modules(source, package))
    for importer, path in graph.modules.items():
        text = path.read_text()
        tree = ast.parse(text, filename=str(path))
        for node, context in _imports(tree, ""):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = _base(node.module, node.level, importer, path.name == "__init__.py")
                # `from a import b` imports the module a.b when there is one, else from a.
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in graph.modules else base
                    for alias in node.names
                ]
            statement = " ".join((ast.get_source_segment(text, node) or "").split())
            for target in targets:
                _add(
                    graph, package, Import(importer, target, path, node.lineno, statement, context)
                )
    return graph


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(node: ast.AST, context: str) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
    """Every import statement under `node`, with where it stands (empty: at import time)."""
    if isinstance(node, ast.Import | ast.ImportFrom):
        yield node, context
        return
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
        context = "inside a function"
    if isinstance(node, ast.If) and _is_type_checking(node.test):
        for statement in node.body:
            yield from _imports(statement, context or "under TYPE_CHECKING")
        for statement in node.orelse:
            yield from _imports(statement, context)
        return
    for child in ast.iter_child_nodes(node):
        yield from _imports(child, context)


def _add(graph: Graph, package: str, found: Import) -> None:
    target = found.imported
    top = target.partition(".")[0]
    if top != package:
        if top not in sys.stdlib_module_names and top != "__future__":
            graph.external.setdefault(found.importer, set()).add(top)
        return
    # `import a.b.c` where c is not a module (or a module that does not exist): its nearest
    # ancestor that is one.
    while target and target not in graph.modules:
        target = target.rpartition(".")[0]
    if not target or target == found.importer:
        return
    found = replace(found, imported=target)
    if found not in graph.imports:  # `from a import b, c`: one import of a, not two
        graph.imports.append(found)


def strongly_connected(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components, each sorted, in a stable order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            components.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return sorted(components)


def _shortest_cycle(start: str, members: set[str], edges: Mapping[str, Iterable[str]]) -> list[str]:
    """start -> ... -> start, the fewest imports, staying inside `members`."""
    parent: dict[str, str] = {}
    todo = deque([start])
    while todo:
        node = todo.popleft()
        for nxt in sorted(edges.get(node, ())):
            if nxt not in members:
                continue
            if nxt == start:
                path = [node]
                while path[-1] != start:
                    path.append(parent[path[-1]])
                return [*reversed(path), start]
            if nxt not in parent:
                parent[nxt] = node
                todo.append(nxt)
    raise ValueError(f"{start} is on no cycle")  # pragma: no cover - members are an SCC


def cycles(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Import cycles as chains `a -> b -> ... -> a`: per strongly connected component of
    more than one module, a shortest cycle through each module not yet on one of them, so
    every module caught in a cycle shows up in a chain."""
    found = []
    for component in strongly_connected(edges):
        if len(component) < 2:
            continue
        members = set(component)
        covered: set[str] = set()
        for start in component:
            if start not in covered:
                chain = _shortest_cycle(start, members, edges)
                covered.update(chain)
                found.append(chain)
    return found
