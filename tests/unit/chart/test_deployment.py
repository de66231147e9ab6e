"""The operator Deployment: hardened, probed, and started with flags `gpufleet run` accepts."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from tests.unit.chart.cases import CASES
from tests.unit.chart.helm import NAMESPACE, Helm, documents, find, write_values

pytestmark = pytest.mark.timeout(30)


def deployment(helm: Helm, tmp_path: Path, values: dict[str, Any]) -> dict[str, Any]:
    docs = documents(helm.template(write_values(tmp_path / "values.yaml", values)))
    return find(docs, "Deployment")


def container(deploy: dict[str, Any]) -> dict[str, Any]:
    (only,) = deploy["spec"]["template"]["spec"]["containers"]
    result: dict[str, Any] = only
    return result


def test_two_replicas_with_leader_election_by_default(helm: Helm, tmp_path: Path) -> None:
    deploy = deployment(helm, tmp_path, {})
    assert deploy["spec"]["replicas"] == 2
    assert deploy["spec"]["strategy"]["type"] == "RollingUpdate"
    args = container(deploy)["args"]
    assert "--leader-election" in args
    assert f"--lease-namespace={NAMESPACE}" in args
    assert not any(a.startswith(("--namespace", "--prometheus-url")) for a in args)


def test_without_leader_election_one_pod_at_a_time(helm: Helm, tmp_path: Path) -> None:
    deploy = deployment(helm, tmp_path, {"replicaCount": 1, "leaderElection": {"enabled": False}})
    assert deploy["spec"]["replicas"] == 1
    assert deploy["spec"]["strategy"]["type"] == "Recreate"
    assert "--no-leader-election" in container(deploy)["args"]


def test_security_context_is_restricted(helm: Helm, tmp_path: Path) -> None:
    deploy = deployment(helm, tmp_path, {})
    pod = deploy["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    context = container(deploy)["securityContext"]
    assert context["allowPrivilegeEscalation"] is False
    assert context["readOnlyRootFilesystem"] is True
    assert context["capabilities"] == {"drop": ["ALL"]}
    mounts = {m["mountPath"]: m["name"] for m in container(deploy)["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes[mounts["/tmp"]]


def test_probes_and_ports_follow_the_values(helm: Helm, tmp_path: Path) -> None:
    main = container(deployment(helm, tmp_path, {"metricsPort": 9090, "healthPort": 9091}))
    ports = {p["name"]: p["containerPort"] for p in main["ports"]}
    assert ports == {"metrics": 9090, "health": 9091}
    assert main["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert main["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert {"--metrics-port=9090", "--health-port=9091"} <= set(main["args"])


def test_pod_namespace_comes_from_the_downward_api(helm: Helm, tmp_path: Path) -> None:
    env = {e["name"]: e for e in container(deployment(helm, tmp_path, {}))["env"]}
    assert env["POD_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}


def test_options_become_flags(helm: Helm, tmp_path: Path) -> None:
    values = {
        "watchNamespaces": ["llm", "batch"],
        "prometheus": {"url": "http://prometheus.monitoring.svc:9090"},
        "log": {"format": "text", "verbose": True},
    }
    args = container(deployment(helm, tmp_path, values))["args"]
    assert args[:4] == [
        "--namespace=llm",
        "--namespace=batch",
        "--prometheus-url=http://prometheus.monitoring.svc:9090",
        "--prometheus-scrape-interval=15",
    ]
    assert {"--log-format=text", "-v"} <= set(args)


@pytest.mark.parametrize(
    ("values", "image"),
    [
        ({}, "ghcr.io/gpufleet/gpufleet:0.1.0"),
        ({"image": {"tag": "dev"}}, "ghcr.io/gpufleet/gpufleet:dev"),
        (
            {
                "image": {
                    "repository": "r.example/gpufleet",
                    "digest": CASES["image-digest"]["image"]["digest"],
                }
            },
            f"r.example/gpufleet@{CASES['image-digest']['image']['digest']}",
        ),
    ],
    ids=["app-version", "tag", "digest-wins"],
)
def test_image_reference(values: dict[str, Any], image: str, helm: Helm, tmp_path: Path) -> None:
    assert container(deployment(helm, tmp_path, values))["image"] == image


def test_metrics_service_selects_the_operator_pods(helm: Helm, tmp_path: Path) -> None:
    docs = documents(helm.template())
    service = find(docs, "Service")
    pod_labels = find(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert service["spec"]["ports"][0]["targetPort"] == "metrics"


@pytest.mark.parametrize("case", CASES, ids=str)
def test_gpufleet_run_accepts_the_rendered_args(case: str, helm: Helm, tmp_path: Path) -> None:
    if importlib.util.find_spec("gpufleet.commands.run") is None:
        pytest.skip("gpufleet run is not written yet")
    from gpufleet.cli import build_parser

    args = container(deployment(helm, tmp_path, CASES[case]))["args"]
    parsed = build_parser(["run"]).parse_args(["run", *args])
    assert parsed.command == "run"


def test_sharded_replicas_get_the_shard_count(helm: Helm, tmp_path: Path) -> None:
    from gpufleet.cli import build_parser

    rendered = deployment(helm, tmp_path, {"replicaCount": 3, "sharding": {"shards": 6}})
    assert rendered["spec"]["replicas"] == 3
    args = container(rendered)["args"]
    assert "--shards=6" in args
    assert build_parser(["run"]).parse_args(["run", *args]).shards == 6
    one = container(deployment(helm, tmp_path, {}))["args"]
    assert not [a for a in one if a.startswith("--shards")]  # one leader, as before
