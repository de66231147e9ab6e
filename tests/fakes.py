"""A small in-memory Kube (gpufleet.reconcile.Kube), for component tests of the reconciler.

It keeps objects as dicts and applies a manifest by merging it over what is stored, which
is all the reconciler relies on. The real adapter is proved against the real apiserver in
tests/integration.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Mapping
from typing import Any

from gpufleet.adapters.kube import Children, PodCounts
from gpufleet.api.constants import LABEL_POOL
from gpufleet.telemetry import Telemetry

Obj = dict[str, Any]


def merge(base: Any, patch: Any) -> Any:
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for k, v in patch.items():
            out[k] = merge(base.get(k), v)
        return out
    return copy.deepcopy(patch)


class FakeKube:
    def __init__(self, *, gateway: bool = True, ready: bool = True) -> None:
        self.telemetry = Telemetry()
        self.gateway = gateway
        self.ready = ready  # Deployments report all replicas Ready
        self.objects: dict[tuple[str, str, str], Obj] = {}  # (kind, namespace, name)
        self.pools: dict[tuple[str, str], Obj] = {}
        self.events: list[tuple[str, str, str]] = []
        self.writes: list[str] = []
        self.unschedulable: dict[str, int] = {}
        # tier -> leaving node -> why; one Ready replica of the tier on each such node.
        self.leaving: dict[str, dict[str, str]] = {}
        # "Kind name" -> the error the apiserver answers an apply of it with.
        self.refuse: dict[str, Exception] = {}
        self._uids = itertools.count(1)

    # Test helpers
    def put(self, obj: Obj) -> None:
        meta = obj["metadata"]
        meta.setdefault("uid", f"uid-{next(self._uids)}")
        self.objects[(obj["kind"], meta["namespace"], meta["name"])] = obj

    def add_pool(self, body: Obj) -> Obj:
        body = copy.deepcopy(body)
        body["metadata"].setdefault("namespace", "default")
        body["metadata"].setdefault("uid", "pool-uid")
        body["metadata"].setdefault("generation", 1)
        self.pools[(body["metadata"]["namespace"], body["metadata"]["name"])] = body
        return body

    # The Kube protocol
    def get_pool(self, namespace: str, name: str) -> Obj | None:
        found = self.pools.get((namespace, name))
        return copy.deepcopy(found) if found else None

    def gateway_api_installed(self) -> bool:
        return self.gateway

    def _labelled(self, kind: str, namespace: str, pool: str) -> dict[str, Obj]:
        return {
            name: copy.deepcopy(obj)
            for (k, ns, name), obj in self.objects.items()
            if k == kind
            and ns == namespace
            and obj["metadata"].get("labels", {}).get(LABEL_POOL) == pool
        }

    def read_children(self, namespace: str, pool: str, *, route: bool) -> Children:
        deployments = self._labelled("Deployment", namespace, pool)
        pods = {}
        for d in deployments.values():
            tier = d["metadata"]["labels"]["gpufleet.dev/tier"]
            stuck = self.unschedulable.get(tier, 0)
            want = d["spec"]["replicas"]
            d["status"] = {"readyReplicas": max(0, want - stuck) if self.ready else 0}
            nodes = self.leaving.get(tier, {})
            pods[tier] = PodCounts(
                ready=max(0, d["status"]["readyReplicas"] - len(nodes)),
                unschedulable=min(stuck, want),
                leaving=len(nodes),
                leaving_nodes=dict(nodes),
            )
        found = self.objects.get(("HTTPRoute", namespace, pool)) if route else None
        return Children(
            deployments=deployments,
            services=self._labelled("Service", namespace, pool),
            route=copy.deepcopy(found) if found else None,
            pods=pods,
        )

    def get_deployment(self, namespace: str, name: str) -> Obj | None:
        return copy.deepcopy(self.objects.get(("Deployment", namespace, name)))

    def get_service(self, namespace: str, name: str) -> Obj | None:
        return copy.deepcopy(self.objects.get(("Service", namespace, name)))

    def apply(self, manifest: Obj) -> None:
        meta = manifest["metadata"]
        key = (manifest["kind"], meta["namespace"], meta["name"])
        refusal = self.refuse.get(f"{manifest['kind']} {meta['name']}")
        if refusal is not None:
            raise refusal
        merged = merge(self.objects.get(key, {}), manifest)
        merged["metadata"].setdefault("uid", f"uid-{next(self._uids)}")
        self.objects[key] = merged
        self.writes.append(f"apply {manifest['kind']} {meta['name']}")

    def annotate_pod(self, namespace: str, name: str, annotations: Mapping[str, str]) -> None:
        self.writes.append(f"annotate Pod {name}")

    def delete(self, kind: str, namespace: str, name: str, uid: str) -> None:
        self.objects.pop((kind, namespace, name), None)
        self.writes.append(f"delete {kind} {name}")

    def patch_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        body = self.pools[(namespace, name)]
        merged = merge(body.get("status", {}), dict(status))
        body["status"] = {k: v for k, v in merged.items() if v is not None}
        self.writes.append(f"status {name}")

    def emit_event(self, pool: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        self.events.append((type_, reason, message))
        self.writes.append(f"event {reason}")
