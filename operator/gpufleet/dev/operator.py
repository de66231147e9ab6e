"""The real operator (`gpufleet run`) as a subprocess, for the demo, the tests and benchmarks.

It listens on free loopback ports, logs to a file, dies with the process that started it,
and exposes what a test checks from outside: its /healthz, its own /metrics, its log.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from gpufleet.dev.clusterprocs import die_with_parent
from gpufleet.dev.prometheus import free_port


class OperatorProcess:
    """`gpufleet run --bind-address 127.0.0.1 ... <extra>` against a kubeconfig."""

    def __init__(
        self,
        kubeconfig: Path,
        log_path: Path,
        *extra: str,
        env: dict[str, str] | None = None,
    ) -> None:
        self.kubeconfig = kubeconfig
        self.log_path = log_path
        self.extra = list(extra)
        self.env = env or {}
        self.metrics_port = free_port()
        self.health_port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_seconds: float = 60.0) -> OperatorProcess:
        """Start it and wait for /healthz; RuntimeError with the log's tail if it fails."""
        argv = [
            sys.executable,
            "-m",
            "gpufleet.cli",
            "run",
            "--bind-address",
            "127.0.0.1",
            "--metrics-port",
            str(self.metrics_port),
            "--health-port",
            str(self.health_port),
            *self.extra,
        ]
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, "KUBECONFIG": str(self.kubeconfig), **self.env},
                start_new_session=True,
                preexec_fn=die_with_parent,
            )
        deadline = time.monotonic() + timeout_seconds
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"The operator exited at start:\n{self.log_tail()}")
            if self._healthy():
                return self
            time.sleep(0.2)
        raise RuntimeError(f"The operator was not healthy after {timeout_seconds:.0f} s")

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{self.health_port}/healthz", timeout=1
            ) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    def metric(self, name: str, **labels: str) -> float:
        """Sum of a metric's samples matching the labels, from the operator's /metrics."""
        with urllib.request.urlopen(
            f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5
        ) as response:
            text = response.read().decode()
        total = 0.0
        for line in text.splitlines():
            if not line.startswith((name + "{", name + " ")):
                continue
            if all(f'{k}="{v}"' in line for k, v in labels.items()):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def pool_writes(self) -> float:
        """API writes to anything but the leader Lease."""
        return self.metric("gpufleet_api_writes_total") - self.metric(
            "gpufleet_api_writes_total", resource="leases"
        )

    def log_tail(self, lines: int = 40) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return ""

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: no cleanup, as a crash or an OOM kill."""
        if self.running and self.proc is not None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 15 s."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)
