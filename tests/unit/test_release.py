"""The release workflow: actionlint accepts it (and rejects a broken one), and the version
a tag publishes is pyproject.toml's, the chart's and the chart's default image tag."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.pools import ROOT

pytestmark = pytest.mark.timeout(600)  # a cold actionlint build downloads its modules

WORKFLOWS = ROOT / ".github" / "workflows"
RELEASE = WORKFLOWS / "release.yaml"
SCRIPT = ROOT / "tools" / "release_version.sh"


def _version() -> str:
    for line in (ROOT / "pyproject.toml").read_text().splitlines():
        if line.startswith("version = "):
            return line.split('"')[1]
    raise AssertionError("pyproject.toml has no version")


@pytest.fixture(scope="module")
def actionlint() -> Path:
    from gpufleet.dev import tools

    return tools.actionlint()


def test_workflows_pass_actionlint(actionlint: Path) -> None:
    files = sorted(WORKFLOWS.glob("*.y*ml"))
    assert RELEASE in files
    result = subprocess.run(
        [str(actionlint), "-no-color", *map(str, files)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_rejects_a_reference_to_a_step_that_does_not_exist(
    actionlint: Path, tmp_path: Path
) -> None:
    broken = RELEASE.read_text().replace("steps.version.outputs", "steps.versions.outputs")
    assert broken != RELEASE.read_text()
    (tmp_path / "release.yaml").write_text(broken)
    result = subprocess.run(
        [str(actionlint), "-no-color", str(tmp_path / "release.yaml")],
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0 and "versions" in result.stdout


def _release_version(tag: str, root: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), tag, str(root)], capture_output=True, text=True, timeout=10
    )


def test_a_tag_of_the_package_version_releases_it() -> None:
    result = _release_version(f"v{_version()}")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == _version()


def test_a_tag_of_another_version_is_refused() -> None:
    result = _release_version("v99.0.0")
    assert result.returncode == 1
    assert f"is not v{_version()}" in result.stderr


def test_a_chart_of_another_app_version_is_refused(tmp_path: Path) -> None:
    (tmp_path / "charts" / "gpufleet").mkdir(parents=True)
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    chart = (ROOT / "charts" / "gpufleet" / "Chart.yaml").read_text()
    stale = chart.replace(f'appVersion: "{_version()}"', 'appVersion: "0.0.9"')
    assert stale != chart
    (tmp_path / "charts" / "gpufleet" / "Chart.yaml").write_text(stale)
    result = _release_version(f"v{_version()}", tmp_path)
    assert result.returncode == 1 and "appVersion 0.0.9" in result.stderr


def test_the_release_pushes_the_image_the_chart_installs_by_default() -> None:
    workflow = yaml.safe_load(RELEASE.read_text())
    job = workflow["jobs"]["release"]
    build = next(s for s in job["steps"] if s.get("id") == "image")
    assert build["with"]["tags"] == "${{ env.IMAGE }}:${{ steps.version.outputs.version }}"
    assert set(build["with"]["platforms"].split(",")) == {"linux/amd64", "linux/arm64"}
    values = yaml.safe_load((ROOT / "charts" / "gpufleet" / "values.yaml").read_text())
    owner = values["image"]["repository"].split("/")[1]
    image = job["env"]["IMAGE"].replace("${{ github.repository_owner }}", owner)
    # The chart's default image is repository:appVersion, appVersion the package version.
    assert image == values["image"]["repository"] and values["image"]["tag"] == ""
