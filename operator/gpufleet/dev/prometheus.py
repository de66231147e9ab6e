"""A real Prometheus on a free loopback port, for tests and the closed-loop demo.

    with PrometheusServer(scrape_interval_seconds=1) as prom:
        prom.set_targets([ScrapeGroup(["127.0.0.1:9400"], {"gpufleet_dev_pool": "llama3-8b",
                                                          "gpufleet_dev_tier": "h100",
                                                          "namespace": "llm"})])
        prom.wait_for("vllm:num_requests_running")
        PrometheusMetrics(prom.url, scrape_interval_seconds=1).read(pool, now)

Targets come from file_sd (one JSON file rewritten atomically by `set_targets`), so a
test or the fleet twin can add and remove scrape targets while Prometheus runs; their
labels play the part of the Kubernetes relabeling (`gpufleet.adapters.promql`). The
binary is Debian's `prometheus` (installed by `gpufleet.dev.tools.ensure_prometheus`).
Everything lives in a temp dir removed on stop; only the process this object started is
ever stopped.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from gpufleet.dev.tools import ensure_prometheus


@dataclass(frozen=True)
class ScrapeGroup:
    """A file_sd target group: host:port targets and the labels their series get."""

    targets: Sequence[str]
    labels: Mapping[str, str] = field(default_factory=dict)


class PrometheusError(RuntimeError):
    """Prometheus did not start or answer."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class PrometheusServer:
    """One Prometheus process; a context manager, or call start() and stop()."""

    def __init__(
        self,
        *,
        scrape_interval_seconds: float = 1.0,
        work_dir: Path | None = None,
        binary: Path | None = None,
        port: int | None = None,
    ) -> None:
        self.scrape_interval_seconds = scrape_interval_seconds
        self._given_dir = work_dir
        self._binary = binary
        self.port = port or 0
        self.work_dir = Path()
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def targets_file(self) -> Path:
        return self.work_dir / "targets" / "targets.json"

    def config(self) -> dict[str, Any]:
        interval = f"{int(self.scrape_interval_seconds * 1000)}ms"
        return {
            "global": {"scrape_interval": interval, "evaluation_interval": interval},
            "scrape_configs": [
                {
                    "job_name": "vllm",
                    "scrape_interval": interval,
                    "scrape_timeout": interval,
                    "file_sd_configs": [
                        {
                            "files": [str(self.targets_file.parent / "*.json")],
                            "refresh_interval": "1s",
                        }
                    ],
                }
            ],
        }

    def start(self, timeout_seconds: float = 30.0) -> None:
        binary = self._binary or ensure_prometheus()
        if self._given_dir is not None:
            self.work_dir = self._given_dir
            self.work_dir.mkdir(parents=True, exist_ok=True)
        else:
            self.work_dir = Path(tempfile.mkdtemp(prefix="gpufleet-prometheus-"))
        self.targets_file.parent.mkdir(parents=True, exist_ok=True)
        if not self.targets_file.exists():
            self.set_targets([])
        (self.work_dir / "prometheus.yml").write_text(json.dumps(self.config(), indent=2))
        if not self.port:
            self.port = free_port()
        log = (self.work_dir / "prometheus.log").open("wb")
        self._process = subprocess.Popen(
            [
                str(binary),
                f"--config.file={self.work_dir / 'prometheus.yml'}",
                f"--storage.tsdb.path={self.work_dir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--storage.tsdb.retention.time=2h",
                "--log.level=warn",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        log.close()
        deadline = time.monotonic() + timeout_seconds
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise PrometheusError(f"Prometheus exited at start: {self.log_tail()}")
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as answer,
            ):
                if answer.status == 200:
                    return
            time.sleep(0.2)
        self.stop()
        raise PrometheusError(f"Prometheus was not ready after {timeout_seconds:.0f} s")

    def set_targets(self, groups: Sequence[ScrapeGroup]) -> None:
        """Replace the scrape targets (Prometheus picks them up within a second or two)."""
        body = [{"targets": list(g.targets), "labels": dict(g.labels)} for g in groups]
        partial = self.targets_file.with_suffix(".tmp")
        partial.write_text(json.dumps(body))
        partial.replace(self.targets_file)

    def query(self, promql: str) -> list[dict[str, Any]]:
        """An instant query's result vector (for tests; the operator uses the adapter)."""
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        with urllib.request.urlopen(url, timeout=5) as answer:
            result: list[dict[str, Any]] = json.load(answer)["data"]["result"]
            return result

    def query_range(
        self, promql: str, start: float, end: float, step: float
    ) -> list[dict[str, Any]]:
        """A range query's matrix over [start, end] (Unix seconds) every `step` seconds."""
        params = {"query": promql, "start": start, "end": end, "step": step}
        url = f"{self.url}/api/v1/query_range?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=15) as answer:
            result: list[dict[str, Any]] = json.load(answer)["data"]["result"]
            return result

    def wait_for(self, promql: str, timeout_seconds: float = 30.0) -> list[dict[str, Any]]:
        """Poll until the query returns series; raises PrometheusError on timeout."""
        deadline = time.monotonic() + timeout_seconds
        while True:
            with contextlib.suppress(OSError, urllib.error.URLError):
                result = self.query(promql)
                if result:
                    return result
            if time.monotonic() > deadline:
                raise PrometheusError(f"No series for {promql} after {timeout_seconds:.0f} s")
            time.sleep(0.25)

    def log_tail(self, lines: int = 20) -> str:
        path = self.work_dir / "prometheus.log"
        return "\n".join(path.read_text().splitlines()[-lines:]) if path.exists() else ""

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
        if self._given_dir is None and self.work_dir != Path():
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> PrometheusServer:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()
