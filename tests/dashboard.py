"""The chart's Grafana dashboard as data, and its queries as Prometheus runs them (for the
dashboard tests over recorded series and on the live closed loop)."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from gpufleet.dev.prometheus import PrometheusServer
from tests.unit.chart.helm import Helm, documents, find, find_helm, write_values

# Panels' queries that may answer nothing for a pool with no such thing to show, and why.
MAY_BE_EMPTY = {
    "gpufleet_pool_reserve_cost_per_hour_dollars": "the plan may hold no burst reserve",
    "gpufleet_api_errors_total": "no API call failed",
}


def render_dashboard(work: Path) -> dict[str, Any]:
    """The dashboard JSON of the ConfigMap the chart renders with dashboards enabled."""
    helm = Helm(find_helm(), work / "helm-home")
    values = write_values(work / "values.yaml", {"grafana": {"dashboards": {"enabled": True}}})
    config_map = find(documents(helm.template(values)), "ConfigMap", "gpufleet-dashboard")
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    loaded: dict[str, Any] = json.loads(config_map["data"]["gpufleet.json"])
    return loaded


def fill(expr: str, namespace: str, pool: str, rate_interval: str = "10s") -> str:
    """A query as Grafana sends it for one pool."""
    for name, value in (
        ("$namespace", namespace),
        ("$pool", pool),
        ("$__rate_interval", rate_interval),
    ):
        expr = expr.replace(name, value)
    return expr


def targets(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """(panel title, query) of every panel."""
    return [
        (panel["title"], target["expr"])
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
    ]


def unanswered(
    prom: PrometheusServer, dashboard: dict[str, Any], namespace: str, pool: str
) -> tuple[list[str], list[str]]:
    """(queries Prometheus refused with its message, queries that found nothing for the
    pool and are not in MAY_BE_EMPTY)."""
    refused, empty = [], []
    for title, expr in targets(dashboard):
        query = fill(expr, namespace, pool)
        try:
            result = prom.query(query)
        except urllib.error.HTTPError as error:
            refused.append(f"{title}: {query}: {error.read().decode()}")
            continue
        if not result and not any(metric in expr for metric in MAY_BE_EMPTY):
            empty.append(f"{title}: {query}")
    return refused, empty


def variable_values(
    prom: PrometheusServer, dashboard: dict[str, Any], namespace: str
) -> dict[str, list[str]]:
    """Each query variable's values, its label_values(selector, label) asked of Prometheus."""
    found = {}
    for variable in dashboard["templating"]["list"]:
        if variable["type"] != "query":
            continue
        match = re.fullmatch(r"label_values\((.+), (\w+)\)", variable["query"]["query"])
        assert match, f"variable {variable['name']}: not label_values(selector, label)"
        selector = match.group(1).replace("$namespace", namespace)
        url = f"{prom.url}/api/v1/label/{match.group(2)}/values?" + urllib.parse.urlencode(
            {"match[]": selector}
        )
        with urllib.request.urlopen(url, timeout=5) as answer:
            found[variable["name"]] = json.load(answer)["data"]
    return found
