"""The chart's dashboard and alerts on the closed loop: the loop's Prometheus scrapes the
real operator's /metrics while the fleet twin serves a pool's load; every panel's query
(and each variable's) answers with that pool's series, every rule of the chart's
PrometheusRule parses there, its leader-only attainment finding the pool's classes, and
the key panels draw (`gpufleet.dev.dashboard`, the picture in docs) with data."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpufleet.dev.dashboard import KEY_PANELS
from gpufleet.dev.dashboard import render as draw
from gpufleet.dev.prometheus import ScrapeGroup
from tests.dashboard import render_dashboard, unanswered, variable_values
from tests.e2e.loop import Loop, closed_loop
from tests.unit.chart.helm import Helm, documents, find, find_helm, write_values

pytestmark = [pytest.mark.cluster, pytest.mark.prometheus, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def loop(plane: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Loop]:
    with closed_loop(plane, Path(tmp_path_factory.mktemp("loop"))) as running:
        # The operator's own /metrics beside the twin's targets (twin.json).
        running.prometheus.set_targets(
            [ScrapeGroup([f"127.0.0.1:{running.operator.metrics_port}"], {"job": "gpufleet"})]
        )
        yield running


def test_every_dashboard_query_answers_on_the_live_loop(
    loop: Loop, namespace: str, tmp_path: Path
) -> None:
    dashboard = render_dashboard(tmp_path)
    started = time.time()
    name = loop.apply_pool(namespace)
    loop.load(namespace, name, realtime=1500.0, batch=6000.0)
    try:
        pool = f'namespace="{namespace}",pool="{name}"'
        # The operator has read the twin's TTFT histograms and planned demand from them.
        loop.prometheus.wait_for(f"gpufleet_pool_class_attainment_ratio{{{pool}}}", 180)
        loop.prometheus.wait_for(f"gpufleet_pool_class_demand_tokens_per_second{{{pool}}}", 60)
        time.sleep(12)  # the 10 s rate windows hold two scrapes of every counter
        refused, empty = unanswered(loop.prometheus, dashboard, namespace, name)
        assert refused == []
        assert empty == [], "queries that found nothing for the live pool"
        found = variable_values(loop.prometheus, dashboard, namespace)
        assert found["pool"] == [name] and namespace in found["namespace"]
        rules = _rules(tmp_path)
        for rule in rules.values():
            loop.prometheus.query(rule)  # refused (HTTPError) unless it parses
        classes = loop.prometheus.query(rules["gpufleet:pool_class_attainment_ratio"])
        mine = {
            s["metric"]["traffic_class"]
            for s in classes
            if s["metric"].get("namespace") == namespace and s["metric"].get("pool") == name
        }
        assert mine == {"realtime", "batch"}
        # The picture docs show: each key panel drawn from its own queries, with series.
        picture = tmp_path / "dashboard.png"
        drawn = draw(
            dashboard,
            loop.prometheus.query_range,
            namespace=namespace,
            pool=name,
            start=started,
            end=time.time(),
            path=picture,
        )
        assert [d.title for d in drawn] == list(KEY_PANELS)
        assert all(d.series for d in drawn), drawn
        assert picture.stat().st_size > 10_000
    finally:
        loop.twin.set_load(namespace, name, None)


def _rules(work: Path) -> dict[str, str]:
    """Each rule's expression (by its record or alert name) as the chart renders them."""
    helm = Helm(find_helm(), work / "helm-home")
    values = write_values(work / "values.yaml", {"alerts": {"enabled": True}})
    rule = find(documents(helm.template(values)), "PrometheusRule")
    return {
        r.get("record") or r["alert"]: r["expr"] for g in rule["spec"]["groups"] for r in g["rules"]
    }
