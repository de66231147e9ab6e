"""What the fleet twin reads from the API each poll, and how it plays a pool."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpufleet.api.constants import GROUP, LABEL_POOL, LABEL_TIER, PLURAL, VERSION
from gpufleet.api.flags import max_model_len_in
from gpufleet.api.parse import InvalidPool, parse_pool
from gpufleet.api.types import InferencePool
from gpufleet.desired.manifests import route_weights, ttft_buckets_in
from gpufleet.dev.twinmetrics import Histogram, PodMetrics
from gpufleet.planning.profiles import ACCELERATORS, ProfileNotFound, pool_model
from gpufleet.sim.metrics import MAX_MODEL_LEN, TTFT_BUCKETS, request_tokens_buckets
from gpufleet.sim.replica import EngineParams, Replica, engine_params

log = logging.getLogger(__name__)

GATEWAY_GROUP = "gateway.networking.k8s.io"
# KV cache per token: 16 KiB per billion parameters (Llama-3-8B with GQA: 128 KiB).
KV_BYTES_PER_TOKEN_PER_BILLION = 16 * 1024
WEIGHT_MEMORY_FRACTION = 0.9
DEFAULT_KV_TOKENS = 100_000.0


@dataclass(frozen=True)
class PodInfo:
    uid: str
    namespace: str
    name: str
    pool: str
    tier: str
    node: str | None
    ready: bool
    terminating: bool
    # The TTFT bucket bounds its vLLM command line sets (None: vLLM's defaults).
    ttft_buckets: tuple[float, ...] | None = None
    # The context its command line sets with --max-model-len (None: unset).
    max_model_len: int | None = None


@dataclass(frozen=True)
class World:
    """One poll of the API."""

    nodes: frozenset[str]
    pools: Mapping[tuple[str, str], InferencePool]
    pods: tuple[PodInfo, ...]
    routes: Mapping[tuple[str, str], Mapping[str, Mapping[str, int]]]


@dataclass
class PoolView:
    """A pool as the twin plays it: engines per tier, class shapes and objectives."""

    pool: InferencePool
    engines: dict[str, EngineParams]
    kv_tokens: dict[str, float]
    shapes: dict[str, tuple[int, int]]
    objectives: dict[str, float]  # class -> seconds
    model_name: str

    @classmethod
    def of(cls, pool: InferencePool) -> PoolView:
        spec = pool.spec
        engines: dict[str, EngineParams] = {}
        kv: dict[str, float] = {}
        size = spec.model.size_billions() or 8.0
        for tier in spec.tiers:
            try:
                engines[tier.name] = engine_params(pool_model(tier, spec))
            except ProfileNotFound as missing:
                log.warning(
                    "Tier %s of %s has no profile, its pods never serve: %s",
                    tier.name,
                    pool.metadata.name,
                    missing,
                )
                continue
            acc = ACCELERATORS.get(tier.accelerator)
            if acc is None:
                kv[tier.name] = DEFAULT_KV_TOKENS
                continue
            room_gb = acc.memory_gigabytes * tier.gpus_per_replica * WEIGHT_MEMORY_FRACTION
            room_gb -= 2.0 * size
            kv[tier.name] = max(room_gb * 1e9 / (KV_BYTES_PER_TOKEN_PER_BILLION * size), 1000.0)
        return cls(
            pool=pool,
            engines=engines,
            kv_tokens=kv,
            shapes={
                c.name: (c.mean_prompt_tokens, c.mean_output_tokens) for c in spec.traffic_classes
            },
            objectives={c.name: c.objective_seconds for c in spec.traffic_classes},
            model_name=spec.model.served_model_name or pool.metadata.name,
        )


def read_world(api: Any) -> World:
    """One poll: nodes, pods of pools, pools (valid ones) and their HTTPRoutes' weights."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    core = client.CoreV1Api(api)
    custom = client.CustomObjectsApi(api)
    timeout = 10
    node_list: Any = core.list_node(_request_timeout=timeout)
    nodes = frozenset(str(n.metadata.name) for n in node_list.items)
    pods = []
    pod_list: Any = core.list_pod_for_all_namespaces(
        label_selector=LABEL_POOL, _request_timeout=timeout
    )
    for p in pod_list.items:
        labels = p.metadata.labels or {}
        if LABEL_TIER not in labels:
            continue
        conditions = (p.status.conditions if p.status else None) or []
        pods.append(
            PodInfo(
                uid=str(p.metadata.uid),
                namespace=str(p.metadata.namespace),
                name=str(p.metadata.name),
                pool=labels[LABEL_POOL],
                tier=labels[LABEL_TIER],
                node=p.spec.node_name if p.spec else None,
                ready=any(c.type == "Ready" and c.status == "True" for c in conditions),
                terminating=p.metadata.deletion_timestamp is not None,
                ttft_buckets=pod_ttft_buckets(p),
                max_model_len=max_model_len_in(_args(p)),
            )
        )
    pools: dict[tuple[str, str], InferencePool] = {}
    listed: Any = custom.list_cluster_custom_object(
        GROUP, VERSION, PLURAL, _request_timeout=timeout
    )
    for body in listed.get("items", []):
        try:
            pool = parse_pool(body)
        except InvalidPool:
            continue
        pools[(pool.metadata.namespace, pool.metadata.name)] = pool
    routes: dict[tuple[str, str], Mapping[str, Mapping[str, int]]] = {}
    try:
        listed = custom.list_cluster_custom_object(
            GATEWAY_GROUP, "v1", "httproutes", _request_timeout=timeout
        )
    except ApiException as error:
        if error.status != 404:  # 404: no Gateway API CRDs, so no routes
            raise
        listed = {"items": []}
    for route in listed.get("items", []):
        meta = route.get("metadata", {})
        key = (str(meta.get("namespace")), str(meta.get("name")))
        if key in pools:
            routes[key] = route_weights(route, key[1])
    return World(nodes, pools, tuple(pods), routes)


def _args(pod: Any) -> list[str]:
    """The command line of a pod's vLLM container (its first)."""
    containers = (pod.spec.containers or []) if pod.spec else []
    return [str(a) for a in (containers[0].args or [])] if containers else []


def pod_ttft_buckets(pod: Any) -> tuple[float, ...] | None:
    """The TTFT buckets a pod's vLLM exports: what its command line asks for, where vLLM
    would accept it, else its defaults (None)."""
    bounds = ttft_buckets_in(_args(pod))
    return tuple(bounds) if bounds else None


def pod_metrics(info: PodInfo) -> PodMetrics:
    """A fresh replica's counters over the buckets its vLLM exports: TTFT's, and prompt
    lengths in vLLM's 1-2-5 series up to its context (MAX_MODEL_LEN where its flags set
    none)."""
    return PodMetrics(
        ttft=Histogram(buckets=info.ttft_buckets or TTFT_BUCKETS),
        request_prompt_tokens=Histogram(
            buckets=request_tokens_buckets(info.max_model_len or MAX_MODEL_LEN)
        ),
    )


@dataclass
class TwinReplica:
    """One pod played by the twin."""

    info: PodInfo
    engine: Replica
    params: EngineParams
    kv_tokens: float
    context_tokens: float  # a running sequence's mean context, for the KV estimate
    model_name: str
    metrics: PodMetrics = field(default_factory=PodMetrics)
    serving: bool = True

    @property
    def key(self) -> tuple[str, str]:
        return self.info.namespace, self.info.pool


@dataclass(frozen=True)
class RouteChange:
    """The twin started routing by new weights: what was serving at that moment."""

    time: float
    namespace: str
    pool: str
    weights: Mapping[str, Mapping[str, int]]
    serving: Mapping[str, int]  # tier -> serving replicas
