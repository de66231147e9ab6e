"""Fixtures for the chart tests: the Helm binary, run offline."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.unit.chart.helm import Helm, find_helm


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Helm]:
    from gpufleet.dev.tools import ToolError

    try:
        binary = find_helm()
    except ToolError as exc:
        pytest.skip(f"no helm binary: {exc}")
    yield Helm(binary, tmp_path_factory.mktemp("helm-home"))


@pytest.fixture
def update_golden() -> bool:
    """UPDATE_GOLDEN=1 rewrites golden files (and the docs values table) instead of comparing."""
    return os.environ.get("UPDATE_GOLDEN") == "1"
