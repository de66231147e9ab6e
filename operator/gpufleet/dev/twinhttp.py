"""How Prometheus reaches the fleet twin: its HTTP endpoints and its file_sd targets.

Nothing may connect to a pod IP, so every pod the twin plays is scraped at the twin's one
address on 127.0.0.1, at `/pods/<namespace>/<pod>/metrics` (vLLM's series), and the gateway
at `/gateway/metrics`. The file_sd target groups name each pod's path in
`__metrics_path__` and carry the labels the operator's PromQL needs (`namespace`, `pod`,
`gpufleet_dev_pool`, `gpufleet_dev_tier`; see `gpufleet.adapters.promql`). The text itself
is rendered by `gpufleet.dev.twinmetrics`.
"""

from __future__ import annotations

from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Protocol

from gpufleet.dev.twinworld import PodInfo

__all__ = ["MetricsSource", "handler", "target_groups", "write_atomically"]


class MetricsSource(Protocol):
    def gateway_metrics(self) -> str: ...

    def pod_metrics(self, namespace: str, name: str) -> str | None: ...


def handler(source: MetricsSource) -> type[BaseHTTPRequestHandler]:
    """The request handler serving `source`'s metrics (and /healthz); 404 for the rest."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            body: str | None
            if path == "/gateway/metrics":
                body = source.gateway_metrics()
            elif path == "/healthz":
                body = "ok\n"
            else:
                parts = path.strip("/").split("/")
                body = None
                if len(parts) == 4 and parts[0] == "pods" and parts[3] == "metrics":
                    body = source.pod_metrics(parts[1], parts[2])
            if body is None:
                self.send_error(404)
                return
            data = body.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Handler


def target_groups(address: str, pods: Iterable[PodInfo]) -> list[dict[str, Any]]:
    """The file_sd groups: the gateway, then each pod, all at `address` (host:port)."""
    groups: list[dict[str, Any]] = [
        {
            "targets": [address],
            "labels": {"__metrics_path__": "/gateway/metrics", "component": "gateway"},
        }
    ]
    for info in pods:
        groups.append(
            {
                "targets": [address],
                "labels": {
                    "__metrics_path__": f"/pods/{info.namespace}/{info.name}/metrics",
                    "namespace": info.namespace,
                    "pod": info.name,
                    "gpufleet_dev_pool": info.pool,
                    "gpufleet_dev_tier": info.tier,
                },
            }
        )
    return groups


def write_atomically(path: Path, text: str) -> None:
    """Prometheus re-reads file_sd files on change: it must never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".tmp")
    partial.write_text(text)
    partial.replace(path)
