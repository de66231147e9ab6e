"""Fixtures for tests on the real plane: the CRD and the real operator process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.harness import OperatorProcess, install_crd


@pytest.fixture(scope="session")
def crd(kube_api: Any) -> None:
    install_crd(kube_api)


@pytest.fixture(scope="module")
def running_operator(
    plane: Any, crd: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    """One real operator (`gpufleet run`) for the module's tests, without leader election."""
    log = Path(tmp_path_factory.mktemp("operator")) / "operator.log"
    process = OperatorProcess(plane.kubeconfig, log, "--no-leader-election").start()
    yield process
    process.stop()
    print(f"\nOperator log ({log}):\n{process.log_tail(60)}")
