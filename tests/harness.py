"""Helpers for tests against the real plane: the CRD, the real operator process, waits."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gpufleet.api.constants import GROUP, PLURAL, VERSION

ROOT = Path(__file__).resolve().parent.parent
CRD_FILE = ROOT / "crds" / "inferencepools.gpufleet.dev.yaml"
GPUFLEET = Path(sys.executable).parent / "gpufleet"

T = TypeVar("T")


def wait_for(
    what: str, check: Callable[[], T | None], timeout_s: float = 60, every_s: float = 0.5
) -> T:
    """Poll until `check` returns something truthy; fail with `what` after the timeout."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except ApiException as error:
            last = f"{error.status} {error.reason}"
        if last:
            return last  # type: ignore[no-any-return]
        time.sleep(every_s)
    raise AssertionError(f"Timed out after {timeout_s}s waiting for {what} (last: {last!r})")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def install_crd(api: client.ApiClient) -> None:
    """Apply the committed CRD (server-side) and wait until it is Established."""
    body = yaml.safe_load(CRD_FILE.read_text())
    ext = client.ApiextensionsV1Api(api)
    try:
        ext.create_custom_resource_definition(body)
    except ApiException as error:
        if error.status != 409:
            raise
        ext.patch_custom_resource_definition(
            body["metadata"]["name"],
            body,
            field_manager="tests",
            force=True,
            _content_type="application/apply-patch+yaml",
        )

    def established() -> bool:
        crd = ext.read_custom_resource_definition(body["metadata"]["name"])
        return any(
            c.type == "Established" and c.status == "True" for c in crd.status.conditions or []
        )

    wait_for("the InferencePool CRD to be Established", established, 30)


def custom(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


def create_pool(api: client.ApiClient, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = custom(api).create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, body
    )
    return result


def get_pool(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    result: dict[str, Any] = custom(api).get_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, name
    )
    return result


def condition(pool: dict[str, Any], type_: str) -> dict[str, Any] | None:
    for c in pool.get("status", {}).get("conditions", []):
        if c["type"] == type_:
            return dict(c)
    return None


def tier_status(pool: dict[str, Any], name: str) -> dict[str, Any]:
    for t in pool.get("status", {}).get("tiers", []):
        if t["name"] == name:
            return dict(t)
    return {}


class OperatorProcess:
    """The real operator (`gpufleet run`) as a subprocess against a kubeconfig."""

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

    def start(self) -> OperatorProcess:
        args = [
            str(GPUFLEET),
            "run",
            "--bind-address",
            "127.0.0.1",
            "--metrics-port",
            str(self.metrics_port),
            "--health-port",
            str(self.health_port),
            *self.extra,
        ]
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig), **self.env}
        self._log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            args, stdout=self._log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        wait_for("the operator's health endpoint", self._healthy, 30, 0.2)
        return self

    def _healthy(self) -> bool:
        if self.proc is None or self.proc.poll() is not None:
            raise AssertionError(f"operator exited early:\n{self.log_tail()}")
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
            if not line.startswith(name + "{") and not line.startswith(name + " "):
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

    def kill(self) -> None:
        """SIGKILL: no cleanup, as a crash or an OOM kill."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()
        with contextlib.suppress(Exception):
            self._log.close()

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@contextlib.contextmanager
def operator(kubeconfig: Path, log_path: Path, *extra: str) -> Iterator[OperatorProcess]:
    process = OperatorProcess(kubeconfig, log_path, *extra).start()
    try:
        yield process
    finally:
        process.stop()


def kubectl(plane: Any, *args: str, check: bool = True, stdin: str | None = None) -> str:
    """Run the project's kubectl against the plane; returns stdout (stderr on failure)."""
    from gpufleet.dev import tools

    result = subprocess.run(
        [str(tools.kubectl()), "--kubeconfig", str(plane.kubeconfig), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if check and result.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed: {result.stderr}")
    return result.stdout if result.returncode == 0 else result.stderr


def as_json(text: str) -> Any:
    return json.loads(text)
