"""The Dockerfile builds this package: what it copies exists and reaches the build context,
its Python satisfies requires-python, it installs the pinned constraints and the core only
(no extra, so no simulator or dev packages), and it starts the console script the chart's
Deployment expects.

No Docker engine runs here, so the image itself is not built by the test suite; these
checks catch the ways a Dockerfile silently drifts from the package.
"""

from __future__ import annotations

import itertools
import json
import re
import tomllib
from typing import Any, NamedTuple

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from gpufleet.cli import COMMANDS
from tests.pools import ROOT

pytestmark = pytest.mark.timeout(2)

DOCKERFILE = ROOT / "Dockerfile"
PYPROJECT: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())


class Instruction(NamedTuple):
    name: str
    args: str


def instructions() -> list[Instruction]:
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, args = line.partition(" ")
            out.append(Instruction(name.upper(), " ".join(args.split())))
    return out


def of(name: str) -> list[str]:
    return [i.args for i in instructions() if i.name == name]


def runtime_stage() -> list[Instruction]:
    all_ = instructions()
    last_from = max(i for i, ins in enumerate(all_) if ins.name == "FROM")
    return all_[last_from:]


def context_paths() -> list[str]:
    """Paths the Dockerfile reads from the build context: COPY sources and bind mounts."""
    paths = []
    for args in of("COPY"):
        words = [w for w in args.split() if not w.startswith("--")]
        if "--from=" not in args:
            paths += words[:-1]
    for args in of("RUN"):
        for mount in re.findall(r"--mount=(\S+)", args):
            options = dict(part.split("=", 1) for part in mount.split(","))
            if "from" not in options:
                paths.append(options["source"])
    return paths


def _pattern(glob: str) -> re.Pattern[str]:
    glob = glob.strip("/")
    regex = ""
    i = 0
    while i < len(glob):
        if glob.startswith("**", i):
            regex, i = regex + ".*", i + 2
        elif glob[i] == "*":
            regex, i = regex + "[^/]*", i + 1
        elif glob[i] == "?":
            regex, i = regex + "[^/]", i + 1
        else:
            regex, i = regex + re.escape(glob[i]), i + 1
    return re.compile(regex + "$")


def in_build_context(path: str) -> bool:
    """Docker's .dockerignore rule: the last pattern matching the path or a parent wins."""
    rules = []
    for line in (ROOT / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            negated = line.startswith("!")
            rules.append((negated, _pattern(line.lstrip("!"))))
    parts = path.strip("/").split("/")
    candidates = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
    included = True
    for negated, pattern in rules:
        if any(pattern.match(c) for c in candidates):
            included = negated
    return included


def test_both_stages_use_a_slim_python_that_satisfies_requires_python() -> None:
    requires = SpecifierSet(PYPROJECT["project"]["requires-python"])
    images = [args.split()[0] for args in of("FROM")]
    assert len(images) == 2, "a builder stage and a runtime stage"
    for image in images:
        match = re.fullmatch(r"python:(\d+\.\d+)-slim", image)
        assert match, f"{image} is not a python:<version>-slim image"
        assert Version(match[1]) in requires, f"{image} does not satisfy {requires}"
    assert images[0] == images[1], "build and run on the same Python"


def test_entrypoint_is_the_packages_run_command() -> None:
    (entrypoint,) = of("ENTRYPOINT")
    script, command = json.loads(entrypoint)
    assert script in PYPROJECT["project"]["scripts"]
    assert command in COMMANDS


def test_copied_files_exist_and_reach_the_build_context() -> None:
    paths = context_paths()
    assert {"pyproject.toml", "constraints.txt", "operator/"} <= set(paths)
    for path in paths:
        assert (ROOT / path).exists(), f"the Dockerfile copies {path}, which does not exist"
        assert in_build_context(path), f".dockerignore leaves {path} out of the build context"
    readme = PYPROJECT["project"]["readme"]
    assert readme in paths, "setuptools reads the readme when it builds the wheel"
    for source in sorted((ROOT / "operator" / "gpufleet").rglob("*.py")):
        relative = source.relative_to(ROOT).as_posix()
        if "__pycache__" not in relative:
            assert in_build_context(relative), relative


@pytest.mark.parametrize(
    "path", [".venv/bin/python", ".git/HEAD", "tests/pools.py", "charts/gpufleet/Chart.yaml"]
)
def test_local_state_stays_out_of_the_build_context(path: str) -> None:
    assert not in_build_context(path)


def test_installs_the_wheel_with_the_pinned_constraints_and_no_dev_tools() -> None:
    runs = of("RUN")
    assert any("pip wheel" in r and "--constraint constraints.txt" in r for r in runs)
    (install,) = [r for r in runs if "pip install" in r]
    assert "--no-index" in install, "the runtime stage installs only the builder's wheels"
    assert "--constraint /tmp/constraints.txt" in install
    assert re.search(r"pip install .* gpufleet(\s|$)", install), "installs the package by name"
    assert "[dev]" not in DOCKERFILE.read_text()
    for tool in ("pytest", "ruff", "mypy"):
        assert tool not in install


def test_installs_no_extra() -> None:
    # Only the core: the extras' packages (plots, tables, certificates, test tools) are not
    # what `gpufleet run` imports. An extra would come in as gpufleet[x] or a wheel's [x].
    pips = [r for r in of("RUN") if re.search(r"\bpip (install|wheel)\b", r)]
    assert len(pips) == 2, "the builder's pip wheel and the runtime's pip install"
    for run in pips:
        assert not re.search(r"(gpufleet|\.whl)\[", run), run
    text = DOCKERFILE.read_text()
    for extra in PYPROJECT["project"]["optional-dependencies"]:
        assert f"[{extra}]" not in text


def test_the_core_leaves_the_simulator_and_dev_packages_to_the_extras() -> None:
    core = {canonicalize_name(Requirement(d).name) for d in PYPROJECT["project"]["dependencies"]}
    assert sorted(core & {"matplotlib", "rich", "cryptography"}) == []
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert {"matplotlib", "rich"} <= {canonicalize_name(Requirement(d).name) for d in extras["sim"]}
    assert "cryptography" in {canonicalize_name(Requirement(d).name) for d in extras["dev"]}


def test_every_dependency_and_extra_is_pinned_in_constraints() -> None:
    pinned = {
        canonicalize_name(line.split("==")[0])
        for line in (ROOT / "constraints.txt").read_text().splitlines()
        if "==" in line
    }
    project = PYPROJECT["project"]
    wanted = [
        *project["dependencies"],
        *itertools.chain(*project["optional-dependencies"].values()),
    ]
    names = {canonicalize_name(Requirement(dep).name) for dep in wanted}
    unpinned = sorted(names - pinned - {canonicalize_name(project["name"])})  # gpufleet[sim]
    assert unpinned == []


def test_runs_as_the_non_root_user_the_chart_expects() -> None:
    stage = runtime_stage()
    users = [i.args for i in stage if i.name == "USER"]
    assert users == ["10001:10001"]
    deployment = (ROOT / "charts" / "gpufleet" / "templates" / "deployment.yaml").read_text()
    assert "runAsUser: 10001" in deployment
    assert "runAsGroup: 10001" in deployment
    assert [i.name for i in stage][-1] == "ENTRYPOINT"


def test_exposes_the_charts_ports() -> None:
    values = yaml.safe_load((ROOT / "charts" / "gpufleet" / "values.yaml").read_text())
    (expose,) = of("EXPOSE")
    assert sorted(int(p) for p in expose.split()) == [values["metricsPort"], values["healthPort"]]
