"""The closed loop's processes, for the demo and the e2e scenarios.

A real Prometheus on loopback scraping the fleet twin through file_sd, the twin, and the
real operator (`gpufleet run --prometheus-url ...`) reading that Prometheus. The control
plane and the pool are the caller's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpufleet.dev.operator import OperatorProcess
from gpufleet.dev.prometheus import PrometheusServer
from gpufleet.dev.twin import FleetTwin


@dataclass(frozen=True)
class LoopProcesses:
    prometheus: PrometheusServer
    twin: FleetTwin
    operator: OperatorProcess


@contextlib.contextmanager
def loop_processes(
    plane: Any,
    work: Path,
    *,
    scrape_interval_seconds: float,
    seed: int = 0,
    prometheus_port: int | None = None,
    prometheus_binary: Path | None = None,
) -> Iterator[LoopProcesses]:
    """Start Prometheus, the twin and the operator on `plane`; stop them in reverse order.

    `prometheus_port` fixes Prometheus's port, so that a stopped Prometheus can come back
    where the operator looks for it; `prometheus_binary` picks the server (default:
    Debian's, `gpufleet.dev.tools.ensure_prometheus`).
    """
    with contextlib.ExitStack() as stack:
        prometheus = PrometheusServer(
            scrape_interval_seconds=scrape_interval_seconds,
            work_dir=work / "prometheus",
            port=prometheus_port,
            binary=prometheus_binary,
        )
        stack.callback(prometheus.stop)
        prometheus.start()
        twin = FleetTwin(
            plane.api_client(),
            targets_file=prometheus.targets_file.parent / "twin.json",
            seed=seed,
        )
        stack.callback(twin.stop)
        twin.start()
        operator = OperatorProcess(
            plane.kubeconfig,
            work / "operator.log",
            "--no-leader-election",
            "--prometheus-url",
            prometheus.url,
            # The queue watch checks every scrape, as a production operator told its
            # Prometheus's scrape interval does.
            "--queue-check-seconds",
            str(scrape_interval_seconds),
        )
        stack.callback(operator.stop)
        operator.start()
        yield LoopProcesses(prometheus, twin, operator)
