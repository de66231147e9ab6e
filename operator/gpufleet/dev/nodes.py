"""Fake GPU node pools for the local control plane, from tests/cluster/nodes.yaml.

kwok plays the kubelet of every node annotated `kwok.x-k8s.io/node: fake`; the Node object
carries the GPU capacity, accelerator labels and the `nvidia.com/gpu` NoSchedule taint that
a GPU node of that pool would have. Nodes can be added and removed at run time, as consumer
GPUs come and go.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

__all__ = [
    "GPU_RESOURCE",
    "KWOK_ANNOTATION",
    "NodeSpec",
    "Pool",
    "add_nodes",
    "load_pools",
    "node_manifest",
    "remove_nodes",
    "wait_nodes_ready",
]

GPU_RESOURCE = "nvidia.com/gpu"
KWOK_ANNOTATION = "kwok.x-k8s.io/node"
# The node pool a fake node belongs to (not gpufleet.dev/pool, which names an InferencePool).
POOL_LABEL = "gpufleet.dev/node-pool"


@dataclass(frozen=True)
class NodeSpec:
    name: str
    pool: str
    gpus: int
    labels: Mapping[str, str]
    capacity: Mapping[str, str]
    preemptible: bool = False


@dataclass(frozen=True)
class Pool:
    name: str
    labels: Mapping[str, str]
    capacity: Mapping[str, str]
    preemptible: bool = False
    nodes: tuple[NodeSpec, ...] = field(default=())

    def node(self, name: str, gpus: int, **capacity: str) -> NodeSpec:
        """A node of this pool that is not in the file (for nodes that join at run time)."""
        return NodeSpec(
            name=name,
            pool=self.name,
            gpus=gpus,
            labels=dict(self.labels),
            capacity={**self.capacity, **capacity},
            preemptible=self.preemptible,
        )


def load_pools(path: Path) -> dict[str, Pool]:
    """Pools by name, as written in a nodes.yaml."""
    data = yaml.safe_load(path.read_text())
    pools: dict[str, Pool] = {}
    for raw in data["pools"]:
        labels = {str(k): str(v) for k, v in raw.get("labels", {}).items()}
        capacity = {str(k): str(v) for k, v in raw.get("capacity", {}).items()}
        pool = Pool(
            name=raw["name"],
            labels=labels,
            capacity=capacity,
            preemptible=bool(raw.get("preemptible", False)),
        )
        nodes = tuple(
            pool.node(
                str(n["name"]),
                int(n["gpus"]),
                **{k: str(v) for k, v in n.items() if k not in ("name", "gpus")},
            )
            for n in raw["nodes"]
        )
        pools[pool.name] = Pool(pool.name, labels, capacity, pool.preemptible, nodes)
    return pools


def node_manifest(spec: NodeSpec) -> dict[str, Any]:
    """The Node object for a fake GPU node; kwok fills in conditions and addresses."""
    resources = {**spec.capacity, GPU_RESOURCE: str(spec.gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": spec.name,
            "annotations": {KWOK_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                **spec.labels,
                POOL_LABEL: spec.pool,
                "gpufleet.dev/preemptible": str(spec.preemptible).lower(),
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/os": "linux",
                "kubernetes.io/hostname": spec.name,
                "nvidia.com/gpu.count": str(spec.gpus),
                "type": "kwok",
            },
        },
        "spec": {"taints": [{"key": GPU_RESOURCE, "value": "present", "effect": "NoSchedule"}]},
        # The apiserver keeps a Node's status on create: this is what the scheduler sees.
        "status": {"capacity": resources, "allocatable": resources},
    }


def add_nodes(
    api: client.ApiClient, specs: Iterable[NodeSpec], *, wait_ready_s: float | None = 30.0
) -> list[str]:
    """Creates the nodes (an existing one is left as it is) and waits until kwok made them Ready."""
    core = client.CoreV1Api(api)
    names = []
    for spec in specs:
        try:
            core.create_node(cast(Any, node_manifest(spec)))
        except ApiException as exc:
            if exc.status != 409:
                raise
        names.append(spec.name)
    if wait_ready_s is not None:
        wait_nodes_ready(api, names, timeout_s=wait_ready_s)
    return names


def remove_nodes(
    api: client.ApiClient, names: Iterable[str], *, wait_gone_s: float | None = 30.0
) -> None:
    """Deletes the nodes outright, as a vanished consumer GPU box would leave the cluster.

    Pods bound to them are not evicted here: the pod garbage collector of the controller
    manager deletes them once the node is gone (see tests/cluster/README.md for how fast).
    """
    core = client.CoreV1Api(api)
    names = list(names)
    for name in names:
        try:
            core.delete_node(name, grace_period_seconds=0)
        except ApiException as exc:
            if exc.status != 404:
                raise
    if wait_gone_s is None:
        return
    deadline = time.monotonic() + wait_gone_s
    while True:
        left = [name for name in _node_names(core) if name in names]
        if not left:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"Nodes {left} still exist {wait_gone_s}s after deletion")
        time.sleep(0.2)


def wait_nodes_ready(api: client.ApiClient, names: Iterable[str], *, timeout_s: float) -> None:
    core = client.CoreV1Api(api)
    wanted = set(names)
    deadline = time.monotonic() + timeout_s
    while True:
        ready = {
            str(node.metadata.name)
            for node in cast(list[Any], core.list_node().items)
            if any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])
        }
        if wanted <= ready:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"Nodes {sorted(wanted - ready)} not Ready after {timeout_s}s")
        time.sleep(0.2)


def _node_names(core: client.CoreV1Api) -> list[str]:
    return [str(node.metadata.name) for node in cast(list[Any], core.list_node().items)]
