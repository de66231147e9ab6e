"""The children a pool owns, built as data."""

from typing import Any

import pytest

from gpufleet.api.constants import GPU_RESOURCE, LABEL_POOL, LABEL_TIER
from gpufleet.api.parse import parse_pool
from gpufleet.api.types import InferencePool
from gpufleet.desired import manifests
from tests.pools import load_example, pool, tier, traffic_class

pytestmark = pytest.mark.timeout(2)


def example() -> InferencePool:
    body = load_example()
    body["metadata"].update(namespace="llm", uid="uid-1")
    return parse_pool(body)


def container(deployment: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = deployment["spec"]["template"]["spec"]["containers"][0]
    return result


def test_deployment_runs_vllm_with_the_tier_settings() -> None:
    p = example()
    h100 = p.spec.tiers[0]
    d = manifests.deployment(p, h100, 3)
    assert d["metadata"]["name"] == "llama3-8b-h100"
    assert d["metadata"]["namespace"] == "llm"
    assert d["spec"]["replicas"] == 3
    c = container(d)
    assert c["args"][:6] == [
        "--model",
        "meta-llama/Meta-Llama-3-8B-Instruct",
        "--served-model-name",
        "llama3-8b",
        "--tensor-parallel-size",
        "1",
    ]
    assert c["args"][-1] == "--max-model-len=8192"
    assert c["ports"][0]["containerPort"] == 8000
    assert c["resources"]["limits"][GPU_RESOURCE] == "1"
    assert c["readinessProbe"]["httpGet"]["path"] == "/health"
    assert c["livenessProbe"]["httpGet"]["path"] == "/health"
    assert c["startupProbe"]["failureThreshold"] * c["startupProbe"]["periodSeconds"] >= 600
    assert c["env"] == [
        {"name": "HOME", "value": manifests.CACHE_DIR},
        {
            "name": "HF_TOKEN",
            "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token", "optional": True}},
        },
    ]
    pod = d["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"gpufleet.dev/accelerator": "h100"}
    assert pod["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    labels = d["spec"]["template"]["metadata"]["labels"]
    assert labels[LABEL_POOL] == "llama3-8b" and labels[LABEL_TIER] == "h100"
    assert d["spec"]["selector"]["matchLabels"] == {LABEL_POOL: "llama3-8b", LABEL_TIER: "h100"}
    annotations = d["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"


def test_owner_reference_points_at_the_pool() -> None:
    p = example()
    ref = manifests.deployment(p, p.spec.tiers[0], 1)["metadata"]["ownerReferences"][0]
    assert ref == {
        "apiVersion": "gpufleet.dev/v1alpha1",
        "kind": "InferencePool",
        "name": "llama3-8b",
        "uid": "uid-1",
        "controller": True,
        "blockOwnerDeletion": True,
    }


def test_tensor_parallel_tier_gets_gpus_and_shared_memory() -> None:
    body = pool(tiers=[tier("tp4", "RTX4090", gpusPerReplica=4, maxReplicas=2)])
    p = parse_pool(body)
    d = manifests.deployment(p, p.spec.tiers[0], 1)
    c = container(d)
    assert c["args"][c["args"].index("--tensor-parallel-size") + 1] == "4"
    assert c["resources"]["requests"][GPU_RESOURCE] == "4"
    volume = d["spec"]["template"]["spec"]["volumes"][0]
    assert volume["emptyDir"] == {"medium": "Memory", "sizeLimit": "32Gi"}


def test_cpu_and_memory_resources_come_from_the_tier() -> None:
    body = pool(
        tiers=[
            tier(
                "a",
                resources={
                    "requests": {"cpu": "8", "memory": "64Gi"},
                    "limits": {"memory": "80Gi"},
                },
            )
        ]
    )
    p = parse_pool(body)
    c = container(manifests.deployment(p, p.spec.tiers[0], 1))
    assert c["resources"] == {
        "requests": {"cpu": "8", "memory": "64Gi", GPU_RESOURCE: "1"},
        "limits": {"memory": "80Gi", GPU_RESOURCE: "1"},
    }


def test_served_model_name_defaults_to_pool_name() -> None:
    body = pool(name="chat")
    del body["spec"]["model"]["servedModelName"]
    p = parse_pool(body)
    args = container(manifests.deployment(p, p.spec.tiers[0], 1))["args"]
    assert args[args.index("--served-model-name") + 1] == "chat"


def test_service_selects_the_tier_pods() -> None:
    p = example()
    s = manifests.service(p, p.spec.tiers[1])
    assert s["metadata"]["name"] == "llama3-8b-rtx4090"
    assert s["spec"]["selector"] == {LABEL_POOL: "llama3-8b", LABEL_TIER: "rtx4090"}
    assert s["spec"]["ports"][0]["port"] == 8000


def test_route_has_a_rule_per_class_with_weights() -> None:
    p = example()
    route = manifests.http_route(
        p, {"realtime": {"h100": 100}, "batch": {"h100": 20, "rtx4090": 80}}
    )
    rules = {r["name"]: r for r in route["spec"]["rules"]}
    assert rules["realtime"]["matches"] == [
        {"headers": [{"type": "Exact", "name": "x-request-class", "value": "realtime"}]}
    ]
    assert rules["batch"]["matches"] == [{"path": {"type": "PathPrefix", "value": "/"}}]
    assert [(b["name"], b["weight"]) for b in rules["batch"]["backendRefs"]] == [
        ("llama3-8b-h100", 20),
        ("llama3-8b-rtx4090", 80),
    ]
    assert [(b["name"], b["weight"]) for b in rules["realtime"]["backendRefs"]] == [
        ("llama3-8b-h100", 100),
        ("llama3-8b-rtx4090", 0),
    ]
    assert route["spec"]["parentRefs"][0]["name"] == "inference-gateway"
    assert manifests.route_weights(route, "llama3-8b") == {
        "realtime": {"h100": 100, "rtx4090": 0},
        "batch": {"h100": 20, "rtx4090": 80},
    }


def test_only_the_classes_header_matches_are_used() -> None:
    body = pool(
        classes=[
            traffic_class("a", 100, header="a"),
            traffic_class("b", 200, header="b"),
            traffic_class("rest", 2000),
        ]
    )
    p = parse_pool(body)
    route = manifests.http_route(p, {})
    assert [r["name"] for r in route["spec"]["rules"]] == ["a", "b", "rest"]


def test_every_flag_gpufleet_sets_is_owned() -> None:
    from gpufleet.api.types import OWNED_FLAGS

    p = example()
    args = manifests.vllm_args(p, p.spec.tiers[0])
    own = args[: len(args) - len(p.spec.model.extra_args)]
    flags = {a.removeprefix("--") for a in own if a.startswith("--")}
    # The TTFT buckets are set but not owned: a pool's extraArgs may set them instead.
    assert flags - {manifests.BUCKETS_FLAG.removeprefix("--")} == set(OWNED_FLAGS)


def test_pods_meet_the_restricted_pod_security_level() -> None:
    d = manifests.deployment(example(), example().spec.tiers[0], 1)
    pod = d["spec"]["template"]["spec"]
    c = container(d)
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert c["securityContext"]["runAsUser"] != 0
    assert all("emptyDir" in v for v in pod["volumes"])  # no hostPath
    assert pod["automountServiceAccountToken"] is False


def test_service_account_token_only_when_the_pool_asks() -> None:
    body = load_example()
    body["spec"]["pods"] = {"automountServiceAccountToken": True}
    p = parse_pool(body)
    d = manifests.deployment(p, p.spec.tiers[0], 1)
    assert d["spec"]["template"]["spec"]["automountServiceAccountToken"] is True


@pytest.mark.parametrize(("billions", "seconds"), [(8, 600), (70, 1400), (2000, 40000)])
def test_startup_probe_grows_with_the_model_within_bounds(billions: int, seconds: int) -> None:
    body = load_example()
    body["spec"]["model"]["parametersBillions"] = billions
    p = parse_pool(body)
    probe = container(manifests.deployment(p, p.spec.tiers[0], 1))["startupProbe"]
    assert probe["failureThreshold"] * probe["periodSeconds"] == seconds
    assert 0 < probe["failureThreshold"] < 2**31


def test_startup_probe_is_clamped_whatever_the_size() -> None:
    p = example()
    huge = p.model_copy(
        update={
            "spec": p.spec.model_copy(
                update={"model": p.spec.model.model_copy(update={"parameters_billions": 10**12})}
            )
        }
    )
    probe = container(manifests.deployment(huge, huge.spec.tiers[0], 1))["startupProbe"]
    assert probe["failureThreshold"] * probe["periodSeconds"] == 12 * 3600
