"""Kubernetes I/O for the reconciler: read a pool's children, apply them, write status.

Synchronous (the kubernetes client is); the Kopf handlers run a whole pass in a worker
thread, so no call here ever blocks the event loop. Every write goes through `_write`, which
counts it, so "an idle pass writes nothing" is measured, not assumed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gpufleet.api.constants import (
    API_VERSION,
    FIELD_MANAGER,
    GROUP,
    KIND,
    LABEL_POOL,
    LABEL_TIER,
    PLURAL,
    VERSION,
)
from gpufleet.desired.deletion_cost import current_costs
from gpufleet.desired.health import PodProblem, refused_problem, waiting_problem
from gpufleet.desired.leaving import INTERRUPTION_TAINTS, classify_nodes
from gpufleet.planning.records import PodStart
from gpufleet.telemetry import Telemetry

log = logging.getLogger(__name__)

Obj = dict[str, Any]

GATEWAY_GROUP = "gateway.networking.k8s.io"
HTTPROUTE_CRD = f"httproutes.{GATEWAY_GROUP}"
APPLIED_HASH = f"{GROUP}/applied-hash"
APPLY = "application/apply-patch+yaml"
_GATEWAY_CHECK_SECONDS = 60.0
_NODES_CACHE_SECONDS = 5.0


@dataclass
class PodCounts:
    """Replicas of one tier by where their pods are."""

    starting: int = 0  # scheduled, not Ready
    unschedulable: int = 0  # Pending, PodScheduled=False/Unschedulable
    ready: int = 0
    leaving: int = 0  # Ready, on a node being removed (gpufleet.desired.leaving)
    leaving_nodes: dict[str, str] = field(default_factory=dict)  # node -> why
    leaving_pods: list[str] = field(default_factory=list)  # on leaving or vanished nodes
    # The Ready pods' creation and Ready times (the tier's lead time), oldest first.
    starts: list[PodStart] = field(default_factory=list)


@dataclass
class Children:
    """What a pool owns in its namespace right now."""

    deployments: dict[str, Obj] = field(default_factory=dict)  # by name
    services: dict[str, Obj] = field(default_factory=dict)
    route: Obj | None = None
    pods: dict[str, PodCounts] = field(default_factory=dict)  # by tier
    # Why a tier's pods do not run (refused at creation, image, crash), by tier.
    problems: dict[str, list[PodProblem]] = field(default_factory=dict)
    # tier -> pod -> its pod-deletion-cost annotation, for the pods not terminating.
    deletion_costs: dict[str, dict[str, str | None]] = field(default_factory=dict)


class Conflict(Exception):
    """An object with a child's name exists and is not ours: we never take it over."""


def manifest_hash(manifest: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()[:16]


def with_hash(manifest: Obj) -> Obj:
    """The manifest with an annotation recording its own hash (before the annotation)."""
    stamped: Obj = json.loads(json.dumps(manifest))
    stamped["metadata"].setdefault("annotations", {})[APPLIED_HASH] = manifest_hash(manifest)
    return stamped


def covers(live: Any, desired: Any) -> bool:
    """Whether `live` already holds every field `desired` sets, with the same value."""
    if isinstance(desired, Mapping):
        return isinstance(live, Mapping) and all(
            k in live and covers(live[k], v) for k, v in desired.items()
        )
    if isinstance(desired, list):
        return (
            isinstance(live, list)
            and len(live) == len(desired)
            and all(covers(a, b) for a, b in zip(live, desired, strict=True))
        )
    return bool(live == desired or str(live) == str(desired))


def api_message(error: ApiException) -> str:
    """What the apiserver said, as a person reads it: the Status message (which names the
    field, e.g. `spec.template.spec.containers[0].env[0].name: Invalid value: ...`), else
    the HTTP status and reason."""
    try:
        body = json.loads(error.body or "")
    except (TypeError, ValueError):
        body = None
    if isinstance(body, dict) and body.get("message"):
        return str(body["message"])
    return f"{error.status} {error.reason}".strip()


def tier_problems(deployments: Mapping[str, Obj], pods: list[Obj]) -> dict[str, list[PodProblem]]:
    """Per tier, why its pods do not run: the Deployment's ReplicaFailure (the ReplicaSet
    could not create pods: admission, quota) and containers waiting on an image, a crash
    or their configuration. One problem per tier and reason: the first pod tells it."""
    found: dict[str, dict[str, PodProblem]] = {}
    for name, deployment in deployments.items():
        tier = ((deployment.get("metadata") or {}).get("labels") or {}).get(LABEL_TIER)
        for condition in (deployment.get("status") or {}).get("conditions") or []:
            if condition.get("type") == "ReplicaFailure" and condition.get("status") == "True":
                problem = refused_problem(name, str(condition.get("message") or ""))
                found.setdefault(tier or name, {}).setdefault(problem.reason, problem)
    for pod in pods:
        meta = pod.get("metadata") or {}
        tier = (meta.get("labels") or {}).get(LABEL_TIER)
        if tier is None or meta.get("deletionTimestamp"):
            continue
        status = pod.get("status") or {}
        for container in [
            *(status.get("initContainerStatuses") or []),
            *(status.get("containerStatuses") or []),
        ]:
            waiting = (container.get("state") or {}).get("waiting")
            stuck = waiting_problem(str(meta.get("name")), waiting) if waiting else None
            if stuck is not None:
                found.setdefault(tier, {}).setdefault(stuck.reason, stuck)
    return {tier: list(by_reason.values()) for tier, by_reason in found.items()}


def owned_by(obj: Mapping[str, Any], uid: str) -> bool:
    refs = obj.get("metadata", {}).get("ownerReferences") or []
    return any(r.get("uid") == uid and r.get("controller") for r in refs)


def count_pods(
    pods: list[Obj], live_nodes: set[str] | None = None, leaving: Mapping[str, str] | None = None
) -> dict[str, PodCounts]:
    """Pods of a pool by tier: Ready, starting, or unschedulable.

    A pod bound to a node that is gone or NotReady (a consumer GPU box that vanished) serves
    nothing and will be replaced by a pod that has nowhere to go: it counts as unschedulable
    at once, not a minute later when the pod garbage collector deletes it.
    """
    counts: dict[str, PodCounts] = {}
    for pod in pods:
        meta = pod.get("metadata", {})
        if meta.get("deletionTimestamp"):
            continue
        tier = (meta.get("labels") or {}).get(LABEL_TIER)
        if tier is None:
            continue
        status = pod.get("status") or {}
        conditions = {c.get("type"): c for c in status.get("conditions") or []}
        entry = counts.setdefault(tier, PodCounts())
        scheduled = conditions.get("PodScheduled", {})
        node = (pod.get("spec") or {}).get("nodeName")
        if node and live_nodes is not None and node not in live_nodes:
            entry.unschedulable += 1
            entry.leaving_pods.append(str(meta.get("name")))  # first to go on a scale-down
        elif conditions.get("Ready", {}).get("status") == "True" and str(node) in (leaving or {}):
            entry.leaving += 1
            entry.leaving_nodes[str(node)] = (leaving or {})[str(node)]
            entry.leaving_pods.append(str(meta.get("name")))
        elif conditions.get("Ready", {}).get("status") == "True":
            entry.ready += 1
            start = pod_start(meta, conditions["Ready"])
            if start is not None:
                entry.starts.append(start)
        elif scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable":
            entry.unschedulable += 1
        elif status.get("phase") in ("Pending", "Running"):
            entry.starting += 1
    for entry in counts.values():
        entry.starts.sort(key=lambda s: (s.created, s.ready))
    return counts


def pod_start(meta: Mapping[str, Any], ready: Mapping[str, Any]) -> PodStart | None:
    """When a Ready pod was created and became Ready; None without both timestamps."""
    created = _timestamp(meta.get("creationTimestamp"))
    became_ready = _timestamp(ready.get("lastTransitionTime"))
    if created is None or became_ready is None:
        return None
    return PodStart(created=created, ready=became_ready)


def _timestamp(value: Any) -> datetime | None:
    """An API timestamp (RFC 3339 text, or a datetime from the client) as an aware datetime."""
    if isinstance(value, datetime):
        stamp = value
    elif isinstance(value, str) and value:
        try:
            stamp = datetime.fromisoformat(value)
        except ValueError:
            return None
    else:
        return None
    return stamp if stamp.tzinfo is not None else stamp.replace(tzinfo=UTC)


class KubeAdapter:
    """Reads and writes of the objects a pool owns, through one ApiClient."""

    def __init__(
        self,
        api_client: client.ApiClient,
        telemetry: Telemetry,
        *,
        field_manager: str = FIELD_MANAGER,
        instance: str = "",
        interruption_taints: tuple[str, ...] = INTERRUPTION_TAINTS,
    ) -> None:
        self.api_client = api_client
        self.telemetry = telemetry
        self.field_manager = field_manager
        self.instance = instance
        self.core = client.CoreV1Api(api_client)
        self.apps = client.AppsV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self.extensions = client.ApiextensionsV1Api(api_client)
        self._gateway: tuple[float, bool] | None = None
        self._nodes: tuple[float, set[str], dict[str, str]] | None = None
        self._nodes_lock = threading.Lock()
        self.interruption_taints = interruption_taints

    # Reads ---------------------------------------------------------------------------

    def _dict(self, obj: Any) -> Obj:
        return cast(Obj, self.api_client.sanitize_for_serialization(obj))

    def get_pool(self, namespace: str, name: str) -> Obj | None:
        try:
            pool = cast(
                Obj,
                self.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name),
            )
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        return pool

    def gateway_api_installed(self) -> bool:
        """Whether the HTTPRoute CRD exists (checked at most once a minute)."""
        now = time.monotonic()
        if self._gateway is not None and now - self._gateway[0] < _GATEWAY_CHECK_SECONDS:
            return self._gateway[1]
        try:
            self.extensions.read_custom_resource_definition(HTTPROUTE_CRD)
            installed = True
        except ApiException as error:
            if error.status != 404:
                raise
            installed = False
        self._gateway = (now, installed)
        return installed

    def live_nodes(self) -> set[str]:
        """Names of Ready nodes (one list call every few seconds, shared by all pools)."""
        return self._node_view()[0]

    def leaving_nodes(self) -> dict[str, str]:
        """Nodes being removed (cordoned or tainted for interruption) -> why."""
        return self._node_view()[1]

    def _node_view(self) -> tuple[set[str], dict[str, str]]:
        """Shared by every pass: one thread lists the nodes when stale while the others
        wait (not one list each), read as plain JSON (the client's models cost seconds)."""
        with self._nodes_lock:
            now = time.monotonic()
            if self._nodes is not None and now - self._nodes[0] < _NODES_CACHE_SECONDS:
                return self._nodes[1], self._nodes[2]
            response: Any = self.core.list_node(_preload_content=False)
            nodes = cast(list[Obj], json.loads(response.data).get("items") or [])
            ready, leaving = classify_nodes(nodes, self.interruption_taints)
            self._nodes = (time.monotonic(), ready, leaving)
            return ready, leaving

    def read_children(self, namespace: str, pool: str, *, route: bool) -> Children:
        selector = f"{LABEL_POOL}={pool}"
        deployments = self.apps.list_namespaced_deployment(namespace, label_selector=selector)
        services = self.core.list_namespaced_service(namespace, label_selector=selector)
        pods = self.core.list_namespaced_pod(namespace, label_selector=selector)
        pod_list = [self._dict(p) for p in pods.items]
        by_name = {d["metadata"]["name"]: d for d in map(self._dict, deployments.items)}
        children = Children(
            deployments=by_name,
            services={s["metadata"]["name"]: s for s in map(self._dict, services.items)},
            pods=count_pods(pod_list, self.live_nodes(), self.leaving_nodes()),
            problems=tier_problems(by_name, pod_list),
            deletion_costs=current_costs(pod_list, LABEL_TIER),
        )
        if route:
            children.route = self.get_route(namespace, pool)
        return children

    def get_route(self, namespace: str, name: str) -> Obj | None:
        try:
            found = cast(
                Obj,
                self.custom.get_namespaced_custom_object(
                    GATEWAY_GROUP, "v1", namespace, "httproutes", name
                ),
            )
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        return found

    def get_deployment(self, namespace: str, name: str) -> Obj | None:
        return self._get(lambda: self.apps.read_namespaced_deployment(name, namespace))

    def get_service(self, namespace: str, name: str) -> Obj | None:
        return self._get(lambda: self.core.read_namespaced_service(name, namespace))

    def _get(self, read: Callable[[], Any]) -> Obj | None:
        try:
            return self._dict(read())
        except ApiException as error:
            if error.status == 404:
                return None
            raise

    # Writes --------------------------------------------------------------------------

    @contextmanager
    def _write(self, verb: str, resource: str) -> Iterator[None]:
        try:
            yield
        except ApiException as error:
            self.telemetry.api_errors.labels(verb, resource, str(error.status)).inc()
            raise
        self.telemetry.api_writes.labels(verb, resource).inc()

    def apply(self, manifest: Obj) -> None:
        """Server-side apply under our field manager, taking back fields edited by hand."""
        kind = manifest["kind"]
        meta = manifest["metadata"]
        name, namespace = meta["name"], meta["namespace"]
        common: dict[str, Any] = {
            "field_manager": self.field_manager,
            "force": True,
            "_content_type": APPLY,
        }
        with self._write("apply", kind.lower()):
            if kind == "Deployment":
                self.apps.patch_namespaced_deployment(name, namespace, manifest, **common)
            elif kind == "Service":
                self.core.patch_namespaced_service(name, namespace, manifest, **common)
            elif kind == "HTTPRoute":
                self.custom.patch_namespaced_custom_object(
                    GATEWAY_GROUP, "v1", namespace, "httproutes", name, manifest, **common
                )
            else:  # pragma: no cover - builders only make the kinds above
                raise ValueError(f"cannot apply {kind}")

    def delete(self, kind: str, namespace: str, name: str, uid: str) -> None:
        """Delete one of our children, only if it is still the object we saw (uid)."""
        options = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=uid))
        with self._write("delete", kind.lower()):
            try:
                if kind == "Deployment":
                    self.apps.delete_namespaced_deployment(name, namespace, body=options)
                elif kind == "Service":
                    self.core.delete_namespaced_service(name, namespace, body=options)
                elif kind == "HTTPRoute":
                    self.custom.delete_namespaced_custom_object(
                        GATEWAY_GROUP, "v1", namespace, "httproutes", name, body=options
                    )
            except ApiException as error:
                if error.status not in (404, 409):
                    raise

    def annotate_pod(self, namespace: str, name: str, annotations: Mapping[str, str]) -> None:
        """Set annotations on one pod (a merge patch of metadata.annotations only); a pod
        already gone is not an error: the ReplicaSet no longer counts it."""
        body = {"metadata": {"annotations": dict(annotations)}}
        with self._write("patch", "pods"):
            try:
                self.core.patch_namespaced_pod(
                    name, namespace, body, _content_type="application/merge-patch+json"
                )
            except ApiException as error:
                if error.status != 404:
                    raise

    def patch_status(self, namespace: str, name: str, status: Obj) -> None:
        """Replace the pool's status (a JSON merge patch of `status`; lists are replaced)."""
        with self._write("patch", "inferencepools/status"):
            self.custom.patch_namespaced_custom_object_status(
                GROUP,
                VERSION,
                namespace,
                PLURAL,
                name,
                {"status": status},
                _content_type="application/merge-patch+json",
            )

    def emit_event(self, pool: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        """A core/v1 Event on the pool, as `kubectl describe` shows them."""
        meta = pool["metadata"]
        now = datetime.now(UTC)
        body = client.CoreV1Event(
            metadata=client.V1ObjectMeta(
                generate_name=f"{meta['name']}.", namespace=meta["namespace"]
            ),
            involved_object=client.V1ObjectReference(
                api_version=API_VERSION,
                kind=KIND,
                name=meta["name"],
                namespace=meta["namespace"],
                uid=meta.get("uid"),
                resource_version=meta.get("resourceVersion"),
            ),
            reason=reason,
            message=message[:1024],
            type=type_,
            first_timestamp=now,
            last_timestamp=now,
            event_time=None,
            count=1,
            source=client.V1EventSource(component="gpufleet"),
            reporting_component="gpufleet.dev/operator",
            reporting_instance=self.instance or "gpufleet",
        )
        with self._write("create", "events"):
            self.core.create_namespaced_event(meta["namespace"], body)
