"""No import cycle anywhere in gpufleet, lazy and type-checking-only imports included.

A cycle means neither module can be understood, tested or moved without the other, and a
function-local or `if TYPE_CHECKING:` import only hides it from the interpreter. Break one
by moving what both need into a module that both import, or by passing it in.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from tests.pools import ROOT
from tests.unit import importgraph

pytestmark = pytest.mark.timeout(10)


def test_no_import_cycle_in_the_package() -> None:
    graph = importgraph.build()
    found = importgraph.cycles(graph.edges())
    lines = []
    for chain in found:
        lines.append(" -> ".join(chain))
        for importer, imported in itertools.pairwise(chain):
            for i in graph.where(importer, imported):
                context = f" ({i.context})" if i.context else ""
                lines.append(f"    {i.path.relative_to(ROOT)}:{i.line}: {i.statement}{context}")
    assert not found, (
        f"{len(found)} import cycle(s) in {importgraph.PACKAGE} (every import counts, also "
        "inside a function or under TYPE_CHECKING):\n" + "\n".join(lines)
    )


def test_the_graph_sees_the_packages_own_layers() -> None:
    # A guard on the guard: an empty or partial graph would find no cycle either.
    graph = importgraph.build()
    edges = graph.edges()
    assert len(graph.modules) > 50
    assert "gpufleet.api.status" in edges["gpufleet.reconcile"]
    assert "gpufleet.reconcile" in edges["gpufleet.runtime"]


# The cycle finder on graphs made up for it --------------------------------------------


def test_finds_a_two_module_cycle() -> None:
    assert importgraph.cycles({"a": {"b"}, "b": {"a"}}) == [["a", "b", "a"]]


def test_a_dag_has_no_cycle() -> None:
    dag = {"a": {"b", "c"}, "b": {"c", "d"}, "c": {"d"}, "d": set()}
    assert importgraph.cycles(dag) == []


def test_a_module_importing_itself_is_not_a_cycle() -> None:
    assert importgraph.cycles({"a": {"a", "b"}, "b": set()}) == []


def test_every_module_of_a_component_is_on_a_reported_chain() -> None:
    # One component, two loops through a: a -> b -> a and a -> c -> d -> a; plus a
    # separate cycle x <-> y, and e hanging off the first component.
    edges = {
        "a": {"b", "c"},
        "b": {"a"},
        "c": {"d"},
        "d": {"a", "e"},
        "e": set(),
        "x": {"y"},
        "y": {"x"},
    }
    assert importgraph.cycles(edges) == [
        ["a", "b", "a"],
        ["c", "d", "a", "c"],
        ["x", "y", "x"],
    ]


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_reads_deferred_relative_and_module_imports(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "from . import lazy\n",
            "pkg/top.py": "import pkg.sub.leaf\nimport numpy as np\nimport json\n",
            "pkg/typed.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.top import X\n"
            ),
            "pkg/lazy.py": "def f():\n    from .typed import Y\n    return Y\n",
            "pkg/names.py": "from pkg.sub import missing\n",
            "pkg/sub/__init__.py": "from .. import typed\n",
            "pkg/sub/leaf.py": "from ..sub import other\n",
            "pkg/sub/other.py": "from pkg.sub import leaf\nfrom pkg.sub.leaf import name\n",
        },
    )
    graph = importgraph.build(tmp_path, "pkg")
    edges = graph.edges()
    assert edges == {
        "pkg": {"pkg.lazy"},  # `from . import module` in a package's __init__
        "pkg.top": {"pkg.sub.leaf"},  # `import a.b.c`
        "pkg.typed": {"pkg.top"},  # under TYPE_CHECKING
        "pkg.lazy": {"pkg.typed"},  # inside a function, relative
        "pkg.names": {"pkg.sub"},  # a name from a package, not a module
        "pkg.sub": {"pkg.typed"},  # `from .. import module` in a package's __init__
        "pkg.sub.leaf": {"pkg.sub.other"},  # `from ..sub import module`
        "pkg.sub.other": {"pkg.sub.leaf"},  # the module, and a name from it
    }
    assert graph.external == {"pkg.top": {"numpy"}}  # the standard library left out
    assert [i.context for i in graph.where("pkg.typed", "pkg.top")] == ["under TYPE_CHECKING"]
    assert [i.context for i in graph.where("pkg.lazy", "pkg.typed")] == ["inside a function"]
    assert [i.context for i in graph.where("pkg.top", "pkg.sub.leaf")] == [""]
    assert importgraph.cycles(edges) == [["pkg.sub.leaf", "pkg.sub.other", "pkg.sub.leaf"]]


# Modules of a few hundred lines (STYLE.md): past this a module holds more than one owner.
MAX_MODULE_LINES = 450
# Exempt: generated data, and the API's field declarations (one class per kind of object,
# each field with its description and bounds; splitting them scatters the API).
EXEMPT = {"planning/profile_data.py", "api/types.py"}


def test_no_module_of_the_package_outgrows_a_few_hundred_lines() -> None:
    package = ROOT / "operator" / "gpufleet"
    long = {
        str(path.relative_to(package)): lines
        for path in package.rglob("*.py")
        if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES
        and str(path.relative_to(package)) not in EXEMPT
    }
    assert long == {}, f"split these by owner: {long}"
