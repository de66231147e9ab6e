"""The chart's Grafana dashboard against a real Prometheus: every panel's query and every
variable's, with Grafana's variables filled in, is accepted by Prometheus and (but where
the pool has nothing to show) answers with series.

Prometheus scrapes the /metrics of a real Reconciler's registry after real passes with the
real planner (tests/exported.py), the same rendering a running operator serves.
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import start_http_server

from gpufleet.dev.prometheus import PrometheusServer, ScrapeGroup, free_port
from tests.exported import run_passes
from tests.unit.chart.helm import Helm, documents, find, find_helm, write_values

pytestmark = [pytest.mark.prometheus, pytest.mark.timeout(120)]

# Grafana's variables as Grafana would fill them in for the pool run_passes reconciles.
VARIABLES = {"$namespace": "default", "$pool": "llama3-8b", "$__rate_interval": "10s"}
# Panels' queries allowed to answer nothing for this pool, and why.
MAY_BE_EMPTY = {
    "gpufleet_pool_reserve_cost_per_hour_dollars": "the plan holds no burst reserve",
    "gpufleet_api_errors_total": "no API call failed",
    # The Kubernetes adapter counts its writes; the in-memory Kubernetes here does not.
    "gpufleet_api_writes_total": "no adapter between the passes and the API",
}


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    helm = Helm(find_helm(), tmp_path_factory.mktemp("helm-home"))
    values = write_values(
        tmp_path_factory.mktemp("values") / "values.yaml",
        {"grafana": {"dashboards": {"enabled": True}}},
    )
    config_map = find(documents(helm.template(values)), "ConfigMap", "gpufleet-dashboard")
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    loaded: dict[str, Any] = json.loads(config_map["data"]["gpufleet.json"])
    return loaded


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


def _fill(expr: str) -> str:
    for name, value in VARIABLES.items():
        expr = expr.replace(name, value)
    return expr


def _targets(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (panel["title"], target["expr"])
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
    ]


def _query(prom: PrometheusServer, expr: str) -> list[dict[str, Any]]:
    try:
        return prom.query(expr)
    except urllib.error.HTTPError as refused:
        pytest.fail(f"Prometheus refused {expr!r}: {refused.read().decode()}")


def test_dashboard_has_the_four_rows_and_no_unfilled_variable(dashboard: dict[str, Any]) -> None:
    rows = [p["title"] for p in dashboard["panels"] if p["type"] == "row"]
    assert rows == ["Service", "Cost", "Fleet", "Decisions"]
    for title, expr in _targets(dashboard):
        assert "$" not in _fill(expr), f"{title}: a variable Grafana fills is not in VARIABLES"


def test_every_panel_query_runs_on_prometheus(
    dashboard: dict[str, Any], prometheus: PrometheusServer
) -> None:
    targets = _targets(dashboard)
    assert len(targets) >= 20
    empty = []
    for title, expr in targets:
        result = _query(prometheus, _fill(expr))
        if not result and not any(metric in expr for metric in MAY_BE_EMPTY):
            empty.append(f"{title}: {expr}")
    assert empty == [], "queries that found nothing for the pool"


def test_a_misspelt_query_is_refused() -> None:
    """The check above can fail: Prometheus refuses what does not parse."""
    with PrometheusServer(scrape_interval_seconds=1) as prom, pytest.raises(urllib.error.HTTPError):
        prom.query("sum by (tier (gpufleet_pool_replicas)")


def test_variables_list_the_pool(dashboard: dict[str, Any], prometheus: PrometheusServer) -> None:
    found = {}
    for variable in dashboard["templating"]["list"]:
        if variable["type"] != "query":
            continue
        match = re.fullmatch(r"label_values\((.+), (\w+)\)", variable["query"]["query"])
        assert match, f"variable {variable['name']}: not label_values(selector, label)"
        selector, label = _fill(match.group(1)), match.group(2)
        url = f"{prometheus.url}/api/v1/label/{label}/values?" + urllib.parse.urlencode(
            {"match[]": selector}
        )
        with urllib.request.urlopen(url, timeout=5) as answer:
            found[variable["name"]] = json.load(answer)["data"]
    assert found == {"namespace": ["default"], "pool": ["llama3-8b"]}


def test_dashboard_file_is_the_chart_s(dashboard: dict[str, Any]) -> None:
    source = Path(__file__).resolve().parents[2] / "charts/gpufleet/dashboards/gpufleet.json"
    assert json.loads(source.read_text()) == dashboard
