"""Run the Helm binary against charts/gpufleet, offline: render, lint, read NOTES."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from tests.pools import ROOT

CHART = ROOT / "charts" / "gpufleet"
RELEASE = "gpufleet"
NAMESPACE = "gpufleet-system"
CRD_SOURCE = "# Source: gpufleet/templates/crd.yaml"
CRD_SPEC_PLACEHOLDER = (
    "spec: {}  # generated from the models: test_rendered_crd_is_the_generated_crd compares it"
)


def find_helm() -> Path:
    """$GPUFLEET_HELM, else helm v4 from the local control plane's Go build (built on first
    use, then cached: the same binary the integration tests install the chart with)."""
    if env := os.environ.get("GPUFLEET_HELM"):
        return Path(env)
    from gpufleet.dev import tools

    return tools.helm()


class Helm:
    def __init__(self, binary: Path, home: Path, kubeconfig: Path | None = None) -> None:
        self.binary = binary
        self.env = {
            **os.environ,
            "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_CONFIG_HOME": str(home / "config"),
            "HELM_DATA_HOME": str(home / "data"),
            # Rendering must never reach a cluster; installs name theirs explicitly.
            "KUBECONFIG": str(kubeconfig) if kubeconfig else os.devnull,
        }

    def run(
        self, *args: str, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [str(self.binary), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"helm {' '.join(args)} failed ({result.returncode}):\n{result.stderr}"
            )
        return result

    def template(self, values_file: Path | None = None, *extra: str) -> str:
        return self.run(*render_args("template", values_file), *extra).stdout

    def notes(self, values_file: Path | None = None) -> str:
        """NOTES.txt as `helm install` prints it (a client-side dry run)."""
        out = self.run(*render_args("install", values_file), "--dry-run=client", "-o", "json")
        notes: str = json.loads(out.stdout)["info"].get("notes", "")
        return notes


def render_args(command: str, values_file: Path | None) -> list[str]:
    args = [command, RELEASE, str(CHART), "--namespace", NAMESPACE]
    if values_file is not None:
        args += ["--values", str(values_file)]
    return args


def write_values(path: Path, values: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(values, sort_keys=False))
    return path


def documents(manifest: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(manifest) if d]


def find(docs: Sequence[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    matches = [
        d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)
    ]
    assert len(matches) == 1, f"expected one {kind} {name or ''}, found {len(matches)}"
    return matches[0]


def without_crd_spec(manifest: str) -> str:
    """The manifest with the CRD's generated schema cut out, so golden files show what the
    chart's values change and a model change does not touch every one of them."""
    parts = manifest.split("\n---\n")
    for i, part in enumerate(parts):
        if CRD_SOURCE in part:
            head, _, _ = part.partition("\nspec:\n")
            parts[i] = f"{head}\n{CRD_SPEC_PLACEHOLDER}\n"
    return "\n---\n".join(parts)


def write_or_compare(path: Path, text: str, update: bool) -> None:
    """UPDATE_GOLDEN=1 rewrites a golden file; otherwise the text must equal it."""
    if update:
        path.write_text(text)
        return
    assert path.exists(), f"{path.name} is missing: run with UPDATE_GOLDEN=1 and review the diff"
    assert path.read_text() == text, (
        f"{path.name} differs from what the chart renders: if the change is intended, run "
        "UPDATE_GOLDEN=1 pytest tests/unit/chart and review the diff"
    )
