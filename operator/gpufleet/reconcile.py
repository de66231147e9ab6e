"""One level-based reconcile pass: parse -> observe -> plan -> apply -> status -> events.

The pass reads the whole world each time (no memory between passes but the pool's own status),
so running it twice changes nothing the second time, and a restarted operator picks up exactly
where the old one stopped. Synchronous: the Kopf layer runs it in a worker thread.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Protocol

from kubernetes.client.exceptions import ApiException

from gpufleet.adapters.kube import Children, api_message, covers, owned_by, with_hash
from gpufleet.api.conditions import set_condition
from gpufleet.api.parse import InvalidPool, parse_pool, parse_status
from gpufleet.api.status import ConditionStatus, ConditionType, InferencePoolStatus, Reason
from gpufleet.api.types import InferencePool, InferencePoolSpec
from gpufleet.desired import manifests
from gpufleet.desired.leaving import Leaving, surges
from gpufleet.desired.rollout import bucket_events
from gpufleet.desired.status import EventRecord, RoutingState, build_status, events
from gpufleet.observe import observe
from gpufleet.planning.explain import early_pass
from gpufleet.planning.records import MetricsReading, MetricsState, Observation, Plan
from gpufleet.planning.routing import prompt_tokens_sent
from gpufleet.planning.weighthistory import WeightHistory
from gpufleet.poolmetrics import export_pool
from gpufleet.scaledown import ShrinkingTier, rank_if_shrinking
from gpufleet.telemetry import Telemetry

log = logging.getLogger(__name__)

Planner = Callable[[InferencePoolSpec, Observation, InferencePoolStatus], Plan]


class MetricsSource(Protocol):
    def read(self, pool: InferencePool, now: datetime) -> MetricsReading: ...

    def requests_in_flight(self, pool: InferencePool, tier: str) -> dict[str, float] | None: ...


class Kube(Protocol):
    """The Kubernetes reads and writes a pass makes (gpufleet.adapters.kube.KubeAdapter in
    the operator), so the pass can run against an in-memory cluster in tests."""

    # The per-pool loop (gpufleet.runtime) reads the pool through the reconciler's kube.
    def get_pool(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    def gateway_api_installed(self) -> bool: ...

    def read_children(self, namespace: str, pool: str, *, route: bool) -> Children: ...

    def get_deployment(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    def get_service(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    def apply(self, manifest: dict[str, Any]) -> None: ...

    def annotate_pod(self, namespace: str, name: str, annotations: Mapping[str, str]) -> None: ...

    def delete(self, kind: str, namespace: str, name: str, uid: str) -> None: ...

    def patch_status(self, namespace: str, name: str, status: dict[str, Any]) -> None: ...

    def emit_event(
        self, pool: Mapping[str, Any], type_: str, reason: str, message: str
    ) -> None: ...


class NoMetrics:
    """The metrics source when the operator runs without a Prometheus URL."""

    def read(self, pool: InferencePool, now: datetime) -> MetricsReading:
        return MetricsReading(
            MetricsState.NOT_CONFIGURED,
            "The operator runs without --prometheus-url: replicas stay at their minimum",
        )

    def requests_in_flight(self, pool: InferencePool, tier: str) -> dict[str, float] | None:
        return None


@dataclass(frozen=True)
class PassResult:
    """What one pass did, for logs, tests and the benchmark."""

    status_written: bool
    applied: tuple[str, ...]
    deleted: tuple[str, ...]
    events: tuple[EventRecord, ...]
    plan: Plan | None
    # Set when the pass could not act on the spec: the loop backs off, observedGeneration stays.
    failure: Reason | None = None
    # Prompt tokens/s the plan's weights send each tier (`routing.prompt_tokens_sent`).
    sent: Mapping[str, float] = field(default_factory=dict)
    resized: frozenset[str] = frozenset()  # tiers whose Deployment it changed


def status_patch(
    raw: Mapping[str, Any] | None, status: InferencePoolStatus
) -> dict[str, Any] | None:
    """The merge patch that turns `raw` into `status`, or None when they already agree."""
    new = status.model_dump(mode="json", by_alias=True, exclude_none=True)
    old = dict(raw or {})
    known = {f.alias or name for name, f in InferencePoolStatus.model_fields.items()}
    patch: dict[str, Any] = {k: v for k, v in new.items() if old.get(k) != v}
    patch.update({k: None for k in old if k in known and k not in new})
    return patch or None


class Reconciler:
    """Runs passes for pools; one instance per operator process."""

    def __init__(
        self,
        kube: Kube,
        metrics: MetricsSource,
        planner: Planner,
        telemetry: Telemetry,
        clock: Callable[[], datetime],
        identity: str = "",
    ) -> None:
        self.kube = kube
        self.metrics = metrics
        self.planner = planner
        self.telemetry = telemetry
        self.clock = clock
        self.identity = identity  # written as status.observedBy: which replica acts
        self.weights = WeightHistory()  # what each pool's passes routed, for their windows

    def reconcile(self, body: Mapping[str, Any], early: str | None = None) -> PassResult:
        """One pass over one pool, timed; failures are counted and re-raised. `early`: why
        it came before its interval (`gpufleet.queuewatch`), said in its decision."""
        started = time.perf_counter()
        result = "error"
        try:
            outcome = self._reconcile(body, self.clock(), early)
            result = "ok" if outcome.failure is None else "failed"
            return outcome
        finally:
            self.telemetry.reconcile_seconds.labels(result).observe(time.perf_counter() - started)

    def _plan(
        self, spec: InferencePoolSpec, observation: Observation, previous: InferencePoolStatus
    ) -> Plan:
        started = time.perf_counter()
        try:
            return self.planner(spec, observation, previous)
        finally:
            self.telemetry.plan_seconds.observe(time.perf_counter() - started)

    def _reconcile(self, body: Mapping[str, Any], now: datetime, early: str | None) -> PassResult:
        try:
            pool = parse_pool(body)
        except InvalidPool as invalid:
            return self._refuse(body, invalid, now)
        namespace, name = pool.metadata.namespace, pool.metadata.name
        previous, key = pool.status, pool.metadata.uid or f"{namespace}/{name}"

        wants_route = bool(pool.spec.routing.parent_refs)
        gateway = self.kube.gateway_api_installed() if wants_route else False
        children = self.kube.read_children(namespace, name, route=gateway)
        reading = self.metrics.read(pool, now)
        observation = observe(pool, children, reading, now, self.weights.of(key))
        try:
            plan = self._plan(pool.spec, observation, previous)
        except Exception as error:  # a bug or an input the API let through: say so, wait
            log.exception("Failed to plan %s/%s", namespace, name)
            return self._fail(
                body, Reason.PLAN_FAILED, f"Planning failed: {type(error).__name__}: {error}", now
            )
        plan = replace(plan, message=early_pass(plan.message, early)) if early else plan

        applied, conflicts, failed = self._apply_tiers(pool, children, plan)
        if failed:
            # Nothing more this pass: the route would point at what was not applied.
            message = "Not applied: " + "; ".join(failed)
            return self._fail(body, Reason.CHILD_APPLY_FAILED, message, now, applied)
        routing = self._apply_route(pool, children, plan, wants_route, gateway, applied)
        deleted = self._prune(pool, children, gateway)

        leaving = {t: Leaving(c.leaving, c.leaving_nodes) for t, c in children.pods.items()}
        status = build_status(
            pool, observation, plan, routing, previous,
            conflicts=conflicts, problems=children.problems, leaving=leaving,
        )  # fmt: skip
        if self.identity:
            status = status.model_copy(update={"observed_by": self.identity})
        failure = None
        if routing.reason is Reason.ROUTE_APPLY_FAILED:
            # The spec was not fully acted on: observedGeneration keeps its old value.
            failure = Reason.ROUTE_APPLY_FAILED
            status = status.model_copy(update={"observed_generation": previous.observed_generation})
        if failure is None:
            self.weights.applied(key, now, status, reading.window_seconds)
        patch = status_patch(body.get("status"), status)
        if patch is not None:
            self.kube.patch_status(namespace, name, patch)
        else:
            self.telemetry.writes_skipped.labels("status").inc()
        conflicted = {c.rsplit(" ", 1)[-1] for c in conflicts}
        records = (
            events(pool, previous, status, plan, conflicted=conflicted, leaving=leaving)
            if patch is not None
            else []
        )
        rolled = bucket_events(pool, children.deployments, applied)
        for record in [*records, *rolled]:
            self._emit(body, record)
        if records and any(r.reason == plan.reason for r in records):
            self.telemetry.decisions.labels(plan.reason).inc()
        export_pool(self.telemetry, pool, status, observation)
        return PassResult(
            status_written=patch is not None, applied=tuple(applied), deleted=tuple(deleted),
            events=tuple([*records, *rolled]), plan=plan, failure=failure,
            sent=prompt_tokens_sent(observation.demand, plan),
            resized=frozenset(
                t.name for t in pool.spec.tiers
                if f"Deployment {manifests.child_name(pool, t)}" in applied
            ),
        )  # fmt: skip

    # Apply ---------------------------------------------------------------------------

    def _apply_if_changed(self, manifest: dict[str, Any], live: Mapping[str, Any] | None) -> bool:
        stamped = with_hash(manifest)
        # Objects read from a list carry no apiVersion/kind: compare the rest.
        fields = {k: v for k, v in stamped.items() if k not in ("apiVersion", "kind")}
        if live is not None and covers(live, fields):
            self.telemetry.writes_skipped.labels(f"{str(manifest['kind']).lower()}s").inc()
            return False
        self.kube.apply(stamped)
        return True

    def _apply_tiers(
        self, pool: InferencePool, children: Children, plan: Plan
    ) -> tuple[list[str], list[str], list[str]]:
        """Apply each tier's Deployment and Service. Returns what was applied, the children
        held by objects the pool does not own, and the children that could not be applied
        (each with the apiserver's message); one refused child does not stop the others."""
        applied: list[str] = []
        conflicts: list[str] = []
        failed: list[str] = []
        surge = surges(
            pool,
            {n: t.replicas for n, t in plan.tiers.items()},
            {n: c.leaving for n, c in children.pods.items()},
            plan.cost_per_hour,
        )
        for tier in pool.spec.tiers:
            name = manifests.child_name(pool, tier)
            try:
                replicas = plan.tiers[tier.name].replicas
                counts = children.pods.get(tier.name)
                replacing = surge.get(tier.name, 0)
                pairs = (
                    (
                        manifests.deployment(pool, tier, replicas, replacing),
                        children.deployments.get(name),
                        self.kube.get_deployment,
                    ),
                    (
                        manifests.service(pool, tier),
                        children.services.get(name),
                        self.kube.get_service,
                    ),
                )
            except Exception as error:  # a builder bug must not hide behind a retry loop
                log.exception("Failed to build the children of tier %s", tier.name)
                failed.append(f"tier {tier.name}: {type(error).__name__}: {error}")
                continue
            ours = children.deployments.get(name)
            if ours is not None and owned_by(ours, pool.metadata.uid):
                costs = children.deletion_costs.get(tier.name, {})
                on_leaving = frozenset(counts.leaving_pods if counts else ())
                shrinking = ShrinkingTier(tier.name, ours, replicas + replacing, costs, on_leaving)
                rank_if_shrinking(self.kube, self.metrics, pool, shrinking)
            for manifest, live, get in pairs:
                kind = manifest["kind"]
                if live is None:
                    # Not labelled as ours: an object of that name may still exist.
                    other = get(pool.metadata.namespace, name)
                    if other is not None and not owned_by(other, pool.metadata.uid):
                        conflicts.append(f"{kind} {name}")
                        continue
                    live = other
                elif not owned_by(live, pool.metadata.uid):
                    conflicts.append(f"{kind} {name}")
                    continue
                try:
                    if self._apply_if_changed(manifest, live):
                        applied.append(f"{kind} {name}")
                except ApiException as error:
                    if error.status is None or error.status >= 500 or error.status == 429:
                        raise  # the API is unwell, not our object: the loop retries
                    failed.append(f"{kind} {name}: {api_message(error)}")
        return applied, conflicts, failed

    def _apply_route(
        self,
        pool: InferencePool,
        children: Children,
        plan: Plan,
        wanted: bool,
        gateway: bool,
        applied: list[str],
    ) -> RoutingState:
        if not wanted:
            return RoutingState(
                False,
                Reason.NO_PARENT_REFS,
                "spec.routing.parentRefs is empty: no HTTPRoute; clients use the tier Services",
            )
        if not gateway:
            return RoutingState(
                False,
                Reason.GATEWAY_API_MISSING,
                "The Gateway API CRDs (HTTPRoute) are not installed: the tier Services serve, "
                "but traffic weights are not applied. Install the Gateway API standard CRDs.",
            )
        weights = {name: dict(c.weights) for name, c in plan.classes.items()}
        route = manifests.http_route(pool, weights)
        if children.route is not None and not owned_by(children.route, pool.metadata.uid):
            return RoutingState(
                False,
                Reason.ROUTE_APPLY_FAILED,
                f"HTTPRoute {pool.metadata.name} exists and is not owned by this pool",
            )
        try:
            if self._apply_if_changed(route, children.route):
                applied.append(f"HTTPRoute {pool.metadata.name}")
        except ApiException as error:
            message = api_message(error)
            log.warning(
                "Failed to apply HTTPRoute %s/%s: %s",
                pool.metadata.namespace,
                pool.metadata.name,
                message,
            )
            return RoutingState(
                False, Reason.ROUTE_APPLY_FAILED, f"The apiserver refused the HTTPRoute: {message}"
            )
        shown = "; ".join(
            f"{c}: " + ",".join(f"{t}={w}" for t, w in ws.items() if w) for c, ws in weights.items()
        )
        return RoutingState(True, Reason.ROUTE_APPLIED, f"HTTPRoute {pool.metadata.name}: {shown}")

    def _prune(self, pool: InferencePool, children: Children, gateway: bool) -> list[str]:
        """Delete children of tiers no longer in the spec (and the route when unrouted).

        Only objects carrying this pool's label AND a controller ownerReference to this
        pool's uid are candidates; the delete is preconditioned on the uid we saw.
        """
        wanted = {manifests.child_name(pool, t) for t in pool.spec.tiers}
        deleted = []
        for kind, objects in (("Deployment", children.deployments), ("Service", children.services)):
            for name, obj in objects.items():
                if name in wanted or not owned_by(obj, pool.metadata.uid):
                    continue
                self.kube.delete(kind, pool.metadata.namespace, name, obj["metadata"]["uid"])
                deleted.append(f"{kind} {name}")
        route = children.route
        unrouted = gateway and not pool.spec.routing.parent_refs
        if unrouted and route is not None and owned_by(route, pool.metadata.uid):
            self.kube.delete(
                "HTTPRoute", pool.metadata.namespace, pool.metadata.name, route["metadata"]["uid"]
            )
            deleted.append(f"HTTPRoute {pool.metadata.name}")
        return deleted

    # Status, events, metrics ---------------------------------------------------------

    def _refuse(self, body: Mapping[str, Any], invalid: InvalidPool, now: datetime) -> PassResult:
        """An object the API would not have accepted: say so in status, touch nothing else."""
        raw = body.get("status")
        previous = parse_status(raw)
        meta = body.get("metadata", {})
        message = "; ".join(invalid.problems)
        generation = int(meta.get("generation") or 0)
        conditions = set_condition(
            previous.conditions,
            ConditionType.READY,
            ConditionStatus.FALSE,
            Reason.INVALID_SPEC,
            f"The spec is invalid, nothing was changed: {message}",
            now=now,
            observed_generation=generation,
        )
        update = {"conditions": conditions, "observed_generation": generation}
        status = previous.model_copy(update=update)
        patch = status_patch(raw, status)
        records: list[EventRecord] = []
        if patch is not None:
            self.kube.patch_status(meta.get("namespace", "default"), invalid.name, patch)
            records = [EventRecord("Warning", Reason.INVALID_SPEC, message)]
            self._emit(body, records[0])
        log.warning("Refused %s/%s: %s", meta.get("namespace"), invalid.name, message)
        return PassResult(patch is not None, (), (), tuple(records), None)

    def _fail(
        self,
        body: Mapping[str, Any],
        reason: Reason,
        message: str,
        now: datetime,
        applied: list[str] | None = None,
    ) -> PassResult:
        """The spec could not be acted on: Ready=False with the cause, a Warning Event (once:
        only when the status changed), observedGeneration left where it was, the rest of
        status as the last good pass wrote it."""
        raw = body.get("status")
        previous = parse_status(raw)
        meta = body.get("metadata", {})
        generation = int(meta.get("generation") or 0)
        conditions = set_condition(
            previous.conditions,
            ConditionType.READY,
            ConditionStatus.FALSE,
            reason,
            message,
            now=now,
            observed_generation=generation,
        )
        status = previous.model_copy(update={"conditions": conditions})
        patch = status_patch(raw, status)
        records: list[EventRecord] = []
        if patch is not None:
            self.kube.patch_status(meta.get("namespace", "default"), meta.get("name", ""), patch)
            records = [EventRecord("Warning", reason, message[:1024])]
            self._emit(body, records[0])
        log.warning("%s %s/%s: %s", reason, meta.get("namespace"), meta.get("name"), message)
        return PassResult(
            patch is not None, tuple(applied or ()), (), tuple(records), None, failure=reason
        )

    def _emit(self, body: Mapping[str, Any], record: EventRecord) -> None:
        meta = body.get("metadata", {})
        log.info(
            "%s %s/%s: %s", record.reason, meta.get("namespace"), meta.get("name"), record.message
        )
        try:
            self.kube.emit_event(body, record.type, record.reason, record.message)
        except ApiException as error:  # an Event is best effort; the status has the truth
            log.warning("Failed to post event %s: %s", record.reason, error.reason)
