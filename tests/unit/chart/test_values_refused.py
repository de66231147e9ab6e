"""Wrong values fail at `helm install`/`helm template` with a message naming the value."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import pytest

from tests.unit.chart.helm import Helm, render_args, write_values

pytestmark = pytest.mark.timeout(30)


class Refused(NamedTuple):
    id: str
    values: dict[str, Any]
    message: str  # what helm's error must name


SCHEMA_REFUSES = [
    Refused("negative-replicas", {"replicaCount": -1}, "/replicaCount"),
    Refused("replicas-as-word", {"replicaCount": "two"}, "/replicaCount"),
    Refused("unknown-top-level-key", {"replicas": 2}, "'replicas' not allowed"),
    Refused("unknown-nested-key", {"image": {"repo": "example/gpufleet"}}, "'repo' not allowed"),
    Refused("unknown-pull-policy", {"image": {"pullPolicy": "Sometimes"}}, "/image/pullPolicy"),
    Refused("digest-not-sha256", {"image": {"digest": "latest"}}, "/image/digest"),
    Refused("namespace-not-a-dns-label", {"watchNamespaces": ["LLM_Prod"]}, "/watchNamespaces/0"),
    Refused("namespaces-not-a-list", {"watchNamespaces": "llm"}, "/watchNamespaces"),
    Refused("duplicate-namespaces", {"watchNamespaces": ["llm", "llm"]}, "/watchNamespaces"),
    Refused(
        "taint-key-with-a-space", {"interruptionTaints": ["spot notice"]}, "/interruptionTaints/0"
    ),
    Refused(
        "prometheus-url-no-scheme", {"prometheus": {"url": "prometheus:9090"}}, "/prometheus/url"
    ),
    Refused(
        "negative-queue-check",
        {"prometheus": {"queueCheckSeconds": -1}},
        "/prometheus/queueCheckSeconds",
    ),
    Refused("port-out-of-range", {"metricsPort": 70000}, "/metricsPort"),
    Refused("keep-as-string", {"crds": {"keep": "yes"}}, "/crds/keep"),
    Refused("log-format-unknown", {"log": {"format": "xml"}}, "/log/format"),
    Refused(
        "interval-without-unit",
        {"serviceMonitor": {"enabled": True, "interval": "30"}},
        "/serviceMonitor/interval",
    ),
    Refused("alerts-enabled-as-string", {"alerts": {"enabled": "yes"}}, "/alerts/enabled"),
    Refused(
        "severity-with-spaces",
        {"alerts": {"enabled": True, "pageSeverity": "wake me"}},
        "/alerts/pageSeverity",
    ),
    Refused(
        "dashboard-label-not-a-string",
        {"grafana": {"dashboards": {"enabled": True, "labels": {"grafana_dashboard": 1}}}},
        "/grafana/dashboards/labels/grafana_dashboard",
    ),
    Refused("unknown-alerts-key", {"alerts": {"runbook": "x"}}, "'runbook' not allowed"),
    Refused("negative-qps", {"kubeApi": {"qps": -1, "burst": 10}}, "/kubeApi/qps"),
    Refused("zero-burst", {"kubeApi": {"qps": 10, "burst": 0}}, "/kubeApi/burst"),
    Refused("zero-shards", {"sharding": {"shards": 0}}, "/sharding/shards"),
    Refused("too-many-shards", {"sharding": {"shards": 65}}, "/sharding/shards"),
    Refused(
        "memory-not-a-quantity",
        {"resources": {"requests": {"memory": "lots"}}},
        "/resources/requests/memory",
    ),
]

TEMPLATE_REFUSES = [
    Refused(
        "replicas-without-leader-election",
        {"replicaCount": 2, "leaderElection": {"enabled": False}},
        "replicaCount is 2 but leaderElection.enabled is false",
    ),
    Refused(
        "shards-without-leader-election",
        {"replicaCount": 1, "leaderElection": {"enabled": False}, "sharding": {"shards": 4}},
        "sharding.shards is 4 but leaderElection.enabled is false",
    ),
    Refused(
        "both-monitors",
        {"serviceMonitor": {"enabled": True}, "podMonitor": {"enabled": True}},
        "serviceMonitor.enabled and podMonitor.enabled are both true",
    ),
]


@pytest.mark.parametrize("case", SCHEMA_REFUSES, ids=lambda c: c.id)
def test_schema_refuses(case: Refused, helm: Helm, tmp_path: Path) -> None:
    values = write_values(tmp_path / "values.yaml", case.values)
    result = helm.run(*render_args("template", values), check=False)
    assert result.returncode != 0
    assert "don't meet the specifications of the schema" in result.stderr
    assert case.message in result.stderr


@pytest.mark.parametrize("case", TEMPLATE_REFUSES, ids=lambda c: c.id)
def test_template_refuses(case: Refused, helm: Helm, tmp_path: Path) -> None:
    values = write_values(tmp_path / "values.yaml", case.values)
    result = helm.run(*render_args("template", values), check=False)
    assert result.returncode != 0
    assert case.message in result.stderr


def test_a_valid_override_is_accepted(helm: Helm, tmp_path: Path) -> None:
    """The refusals above are about the values, not about passing a values file at all."""
    values = write_values(tmp_path / "values.yaml", {"replicaCount": 3, "watchNamespaces": ["llm"]})
    result = helm.run(*render_args("template", values), check=False)
    assert result.returncode == 0, result.stderr
