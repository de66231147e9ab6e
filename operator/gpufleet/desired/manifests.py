"""The objects a pool owns, as data: a Deployment and a Service per tier, one HTTPRoute.

Pure builders (STYLE: a pure function computes the plan, a separate step executes it).
Everything here is applied with server-side apply under one field manager, so a builder
states only the fields gpufleet owns; whatever the apiserver defaults is left alone.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from itertools import pairwise
from typing import Any

from gpufleet.api.constants import (
    API_VERSION,
    DEFAULT_IMAGE,
    GPU_RESOURCE,
    KIND,
    LABEL_MANAGED_BY,
    LABEL_POOL,
    LABEL_TIER,
    MANAGED_BY,
    VLLM_PORT,
)
from gpufleet.api.flags import flag_value
from gpufleet.api.types import InferencePool, ResourceList, Tier, TrafficClass
from gpufleet.desired import drain, leaving
from gpufleet.desired.sli import sli_buckets

Manifest = dict[str, Any]

GATEWAY_GROUP = "gateway.networking.k8s.io"
HTTPROUTE_API_VERSION = f"{GATEWAY_GROUP}/v1"

# How long a replica may take to load its model before the startup probe gives up, by size.
# A 70B model pulled from a hub and loaded over PCIe takes many minutes.
_STARTUP_SECONDS_PER_BILLION = 20
_STARTUP_MIN_SECONDS = 600
# A replica that has not loaded in 12 hours never will; also keeps failureThreshold an int32.
_STARTUP_MAX_SECONDS = 12 * 3600
_STARTUP_PERIOD_SECONDS = 10

# The vLLM pods meet the Pod Security Standards' `restricted` level (docs/install.md): no
# root, no privilege escalation, no capabilities, the runtime's seccomp profile. vLLM's
# image runs as root by default, so the user is set; it writes its caches (Hugging Face
# downloads, compiled kernels) under $HOME, an emptyDir here.
VLLM_UID = 1000
CACHE_DIR = "/home/vllm"


def child_name(pool: InferencePool, tier: Tier | str) -> str:
    """`<pool>-<tier>`: the name of a tier's Deployment and Service."""
    name = tier if isinstance(tier, str) else tier.name
    return f"{pool.metadata.name}-{name}"


def selector_labels(pool: InferencePool, tier: Tier) -> dict[str, str]:
    return {LABEL_POOL: pool.metadata.name, LABEL_TIER: tier.name}


def labels(pool: InferencePool, tier: Tier | None = None) -> dict[str, str]:
    result = {
        "app.kubernetes.io/name": "vllm",
        "app.kubernetes.io/instance": pool.metadata.name,
        "app.kubernetes.io/part-of": "gpufleet",
        LABEL_MANAGED_BY: MANAGED_BY,
        LABEL_POOL: pool.metadata.name,
    }
    if tier is not None:
        result["app.kubernetes.io/component"] = tier.name
        result[LABEL_TIER] = tier.name
    return result


def owner_reference(pool: InferencePool) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": pool.metadata.name,
        "uid": pool.metadata.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _metadata(pool: InferencePool, name: str, tier: Tier | None) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": pool.metadata.namespace,
        "labels": labels(pool, tier),
        "ownerReferences": [owner_reference(pool)],
    }


# vLLM's --custom-histogram-buckets (vllm/config/observability.py in 0.33.0): a JSON map of
# bucket family to bounds, a family's list replacing its defaults. Verified in vLLM 0.33.0;
# an image whose tag names an older or no vLLM version does not get it, as an unknown
# flag stops vLLM at start.
BUCKETS_FLAG = "--custom-histogram-buckets"
BUCKETS_SINCE = (0, 33)
_BUCKETS = re.compile(r"^--custom[-_]histogram[-_]buckets(?:=(.*))?$")
_VLLM_TAG = re.compile(r"vllm[^:/@]*:v?(\d+)\.(\d+)(?:\.\d+)?(?:[-.+][^@]*)?(?:@.*)?$")


def ttft_buckets(pool: InferencePool) -> list[float] | None:
    """The TTFT bucket bounds gpufleet asks the pool's vLLM for: vLLM's defaults plus a bound
    at each class objective, so each class's attainment is read at its objective exactly
    (gpufleet.desired.sli). None where the image may not know the flag, or where extraArgs
    set the buckets themselves (theirs win)."""
    image = pool.spec.model.image or DEFAULT_IMAGE
    version = _VLLM_TAG.search(image)
    if version is None or (int(version[1]), int(version[2])) < BUCKETS_SINCE:
        return None
    flag = BUCKETS_FLAG.removeprefix("--")
    if any(
        re.match(f"^--?{flag.replace('-', '[-_]')}([= ]|$)", a) for a in pool.spec.model.extra_args
    ):
        return None
    # Every tier gets every objective: overflow may send any class to any tier, and one
    # set of bounds for the pool makes one rollout when an objective changes.
    return sli_buckets(c.objective_seconds for c in pool.spec.traffic_classes)


def ttft_buckets_in(args: Sequence[str]) -> list[float] | None:
    """The TTFT bounds a vLLM command line sets with BUCKETS_FLAG, as `--flag VALUE` or
    `--flag=VALUE` (None: vLLM's defaults, or a value vLLM would refuse)."""
    value = flag_value(args, _BUCKETS)
    if value is None:
        return None
    try:
        bounds = json.loads(value).get("time_to_first_token")
    except (ValueError, AttributeError):
        return None
    if not isinstance(bounds, list) or not bounds:
        return None
    try:
        floats = [float(b) for b in bounds]
    except (TypeError, ValueError):
        return None
    # vLLM refuses bounds that are not strictly increasing, positive and finite.
    if any(not math.isfinite(b) or b <= 0 for b in floats):
        return None
    if any(a >= b for a, b in pairwise(floats)):
        return None
    return floats


def vllm_args(pool: InferencePool, tier: Tier) -> list[str]:
    """vLLM's flags: the ones gpufleet owns (api.types.OWNED_FLAGS, refused in extraArgs),
    the TTFT histogram's buckets (`ttft_buckets`), then the pool's extraArgs."""
    model = pool.spec.model
    buckets = ttft_buckets(pool)
    histogram = (
        [BUCKETS_FLAG, json.dumps({"time_to_first_token": buckets}, separators=(",", ":"))]
        if buckets is not None
        else []
    )
    return [
        "--model",
        model.name,
        "--served-model-name",
        model.served_model_name or pool.metadata.name,
        "--tensor-parallel-size",
        str(tier.gpus_per_replica),
        "--host",
        "0.0.0.0",
        "--port",
        str(VLLM_PORT),
        *histogram,
        # Finish the requests in flight on SIGTERM instead of aborting them (desired.drain).
        "--shutdown-timeout",
        str(drain.drain_seconds(pool)),
        *model.extra_args,
    ]


def _resources(tier: Tier) -> dict[str, Any]:
    gpus = str(tier.gpus_per_replica)

    def quantities(values: ResourceList | None) -> dict[str, str]:
        if values is None:
            return {}
        return {k: v for k, v in (("cpu", values.cpu), ("memory", values.memory)) if v}

    requests = quantities(tier.resources.requests if tier.resources else None)
    limits = quantities(tier.resources.limits if tier.resources else None)
    return {
        "requests": {**requests, GPU_RESOURCE: gpus},
        "limits": {**limits, GPU_RESOURCE: gpus},
    }


def shm_size(tier: Tier) -> str:
    """Shared memory for NCCL between tensor-parallel workers; small for one GPU."""
    return "2Gi" if tier.gpus_per_replica == 1 else f"{8 * tier.gpus_per_replica}Gi"


def startup_seconds(pool: InferencePool) -> int:
    """How long the startup probe waits for the model to load, by its size, within bounds
    (the API bounds the size, but a probe must never overflow whatever it is given)."""
    size = pool.spec.model.size_billions() or 8.0
    if not math.isfinite(size) or size <= 0:
        size = 8.0
    seconds = size * _STARTUP_SECONDS_PER_BILLION
    return int(min(_STARTUP_MAX_SECONDS, max(_STARTUP_MIN_SECONDS, seconds)))


def _env(pool: InferencePool) -> list[dict[str, Any]]:
    env = [e.model_dump(by_alias=True, exclude_none=True) for e in pool.spec.model.env]
    if any(e["name"] == "HOME" for e in env):
        return env
    return [{"name": "HOME", "value": CACHE_DIR}, *env]


def container_security_context() -> dict[str, Any]:
    """What the Pod Security Standards' restricted level asks of a container."""
    return {
        "runAsNonRoot": True,
        "runAsUser": VLLM_UID,
        "runAsGroup": VLLM_UID,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _probe(path: str, period: int, failures: int) -> dict[str, Any]:
    return {
        "httpGet": {"path": path, "port": "http"},
        "periodSeconds": period,
        "failureThreshold": failures,
        "timeoutSeconds": 5,
    }


def deployment(pool: InferencePool, tier: Tier, replicas: int, replacing: int = 0) -> Manifest:
    """The vLLM OpenAI server Deployment of one tier: the planned replicas, plus one for
    each Ready replica on a leaving node (`replacing`, gpufleet.desired.leaving)."""
    pod_labels = labels(pool, tier)
    container: dict[str, Any] = {
        "name": "vllm",
        "image": pool.spec.model.image or DEFAULT_IMAGE,
        "command": ["python3", "-m", "vllm.entrypoints.openai.api_server"],
        "args": vllm_args(pool, tier),
        "ports": [{"name": "http", "containerPort": VLLM_PORT, "protocol": "TCP"}],
        "resources": _resources(tier),
        "readinessProbe": _probe("/health", 5, 3),
        "livenessProbe": _probe("/health", 10, 6),
        # Model download and load can take minutes; liveness starts only after this passes.
        "startupProbe": _probe(
            "/health",
            _STARTUP_PERIOD_SECONDS,
            max(1, startup_seconds(pool) // _STARTUP_PERIOD_SECONDS),
        ),
        "volumeMounts": [
            {"name": "dshm", "mountPath": "/dev/shm"},
            {"name": "cache", "mountPath": CACHE_DIR},
        ],
        "env": _env(pool),
        "securityContext": container_security_context(),
        # Stay up while the endpoint leaves the Service and the gateway, before SIGTERM.
        # The kubelet's own sleep action: the vLLM image needs no shell for it.
        "lifecycle": {"preStop": {"sleep": {"seconds": drain.PRESTOP_PAUSE_SECONDS}}},
    }
    pod_spec: dict[str, Any] = {
        "containers": [container],
        "terminationGracePeriodSeconds": drain.termination_grace_seconds(pool),
        # vLLM never calls the Kubernetes API: no token unless the pool asks for one.
        "automountServiceAccountToken": pool.spec.pods.automount_service_account_token,
        "securityContext": {
            "runAsNonRoot": True,
            "fsGroup": VLLM_UID,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumes": [
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": shm_size(tier)}},
            {"name": "cache", "emptyDir": {}},
        ],
    }
    if tier.node_selector:
        pod_spec["nodeSelector"] = dict(tier.node_selector)
    if tier.tolerations:
        pod_spec["tolerations"] = [
            t.model_dump(by_alias=True, exclude_none=True) for t in tier.tolerations
        ]
    metadata = _metadata(pool, child_name(pool, tier), tier)
    # Always stated, 0 included: the next pass subtracts it from spec.replicas.
    metadata["annotations"] = {leaving.REPLACING: str(max(replacing, 0))}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata,
        "spec": {
            "replicas": replicas + max(replacing, 0),
            "selector": {"matchLabels": selector_labels(pool, tier)},
            # GPUs are scarce: add a replica before removing one, one at a time.
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
            },
            "template": {
                "metadata": {
                    "labels": pod_labels,
                    "annotations": {
                        "prometheus.io/scrape": "true",
                        "prometheus.io/port": str(VLLM_PORT),
                        "prometheus.io/path": "/metrics",
                    },
                },
                "spec": pod_spec,
            },
        },
    }


def service(pool: InferencePool, tier: Tier) -> Manifest:
    """The ClusterIP Service in front of one tier's replicas."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(pool, child_name(pool, tier), tier),
        "spec": {
            "type": "ClusterIP",
            "selector": selector_labels(pool, tier),
            "ports": [{"name": "http", "port": VLLM_PORT, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def _rule(
    pool: InferencePool, traffic_class: TrafficClass, weights: Mapping[str, int]
) -> dict[str, Any]:
    matches: list[dict[str, Any]]
    if traffic_class.match is None:
        matches = [{"path": {"type": "PathPrefix", "value": "/"}}]
    else:
        matches = [
            {
                "headers": [
                    {"type": h.type, "name": h.name, "value": h.value}
                    for h in traffic_class.match.headers
                ]
            }
        ]
    return {
        "name": traffic_class.name,
        "matches": matches,
        "backendRefs": [
            {
                "group": "",
                "kind": "Service",
                "name": child_name(pool, tier),
                "port": VLLM_PORT,
                "weight": weights.get(tier.name, 0),
            }
            for tier in pool.spec.tiers
        ],
    }


def http_route(pool: InferencePool, weights: Mapping[str, Mapping[str, int]]) -> Manifest:
    """One HTTPRoute: a rule per traffic class, its backends the tier Services, weighted.

    Header matches are more specific than the default class's path-only match, so the
    Gateway API's precedence rules send matched requests to their class's rule.
    """
    spec: dict[str, Any] = {
        "parentRefs": [
            {
                "group": GATEWAY_GROUP,
                "kind": "Gateway",
                "name": ref.name,
                **({"namespace": ref.namespace} if ref.namespace else {}),
                **({"sectionName": ref.section_name} if ref.section_name else {}),
            }
            for ref in pool.spec.routing.parent_refs
        ],
        "rules": [_rule(pool, c, weights.get(c.name, {})) for c in pool.spec.traffic_classes],
    }
    if pool.spec.routing.hostnames:
        spec["hostnames"] = list(pool.spec.routing.hostnames)
    return {
        "apiVersion": HTTPROUTE_API_VERSION,
        "kind": "HTTPRoute",
        "metadata": _metadata(pool, pool.metadata.name, None),
        "spec": spec,
    }


def route_weights(route: Mapping[str, Any], pool_name: str) -> dict[str, dict[str, int]]:
    """Weights per class and tier read back from an HTTPRoute this module built."""
    prefix = f"{pool_name}-"
    result: dict[str, dict[str, int]] = {}
    for rule in route.get("spec", {}).get("rules", []):
        name = rule.get("name")
        if not name:
            continue
        result[name] = {
            ref["name"].removeprefix(prefix): int(ref.get("weight", 1))
            for ref in rule.get("backendRefs", [])
            if ref.get("name", "").startswith(prefix)
        }
    return result
