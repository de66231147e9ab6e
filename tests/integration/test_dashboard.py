"""The chart's Grafana dashboard against a real Prometheus: every panel's query and every
variable's, with Grafana's variables filled in, is accepted by Prometheus and (but where
the pool has nothing to show) answers with series.

Prometheus scrapes the /metrics of a real Reconciler's registry after real passes with the
real planner (tests/exported.py), the same rendering a running operator serves. The same
check on the live closed loop is tests/e2e/test_dashboard_live.py.
"""

from __future__ import annotations

import json
import time
import urllib.error
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import start_http_server

from gpufleet.dev.prometheus import PrometheusServer, ScrapeGroup, free_port
from tests.dashboard import fill, render_dashboard, targets, unanswered, variable_values
from tests.exported import run_passes

pytestmark = [pytest.mark.prometheus, pytest.mark.timeout(120)]

NAMESPACE, POOL = "default", "llama3-8b"  # what run_passes reconciles
# The Kubernetes adapter counts API writes; the in-memory Kubernetes here has no adapter.
NO_WRITES = "gpufleet_api_writes_total"


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return render_dashboard(tmp_path_factory.mktemp("dashboard"))


@pytest.fixture(scope="module")
def prometheus() -> Iterator[PrometheusServer]:
    kube, _ = run_passes(count=3)
    port = free_port()
    server, _ = start_http_server(port, addr="127.0.0.1", registry=kube.telemetry.registry)
    prom = PrometheusServer(scrape_interval_seconds=1)
    prom.start()
    try:
        prom.set_targets([ScrapeGroup([f"127.0.0.1:{port}"], {})])
        prom.wait_for("gpufleet_pool_class_attainment_ratio")
        time.sleep(4)  # rate() and increase() need two scrapes inside their 10 s window
        yield prom
    finally:
        prom.stop()
        server.shutdown()


def test_dashboard_has_the_four_rows_and_no_unfilled_variable(dashboard: dict[str, Any]) -> None:
    rows = [p["title"] for p in dashboard["panels"] if p["type"] == "row"]
    assert rows == ["Service", "Cost", "Fleet", "Decisions"]
    for title, expr in targets(dashboard):
        assert "$" not in fill(expr, NAMESPACE, POOL), f"{title}: a variable left unfilled"


def test_every_panel_query_runs_on_prometheus(
    dashboard: dict[str, Any], prometheus: PrometheusServer
) -> None:
    assert len(targets(dashboard)) >= 20
    refused, empty = unanswered(prometheus, dashboard, NAMESPACE, POOL)
    assert refused == []
    assert [e for e in empty if NO_WRITES not in e] == [], "queries that found nothing"


def test_a_misspelt_query_is_refused() -> None:
    """The check above can fail: Prometheus refuses what does not parse."""
    with PrometheusServer(scrape_interval_seconds=1) as prom, pytest.raises(urllib.error.HTTPError):
        prom.query("sum by (tier (gpufleet_pool_replicas)")


def test_variables_list_the_pool(dashboard: dict[str, Any], prometheus: PrometheusServer) -> None:
    found = variable_values(prometheus, dashboard, NAMESPACE)
    assert found == {"namespace": [NAMESPACE], "pool": [POOL]}


def test_dashboard_file_is_the_chart_s(dashboard: dict[str, Any]) -> None:
    source = Path(__file__).resolve().parents[2] / "charts/gpufleet/dashboards/gpufleet.json"
    assert json.loads(source.read_text()) == dashboard
