"""What a user sees of a pool in the closed loop: for the demo's table and the e2e timelines.

A `Sample` joins what `kubectl get gpool -o wide` shows (replicas per tier, weights,
conditions, the last decision, $/h and $/Mtok from the pool's status), the per-class P99
TTFT Prometheus computes from the gateway's histogram (`gpufleet_dev_gateway_ttft_seconds`,
which the fleet twin exports), and what the twin is serving.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpufleet.api.constants import GROUP, PLURAL, VERSION

Query = Callable[[str], list[dict[str, Any]]]

P99_WINDOW_SECONDS = 10


@dataclass(frozen=True)
class TierRow:
    name: str
    ready: int
    desired: int
    unschedulable: int = 0
    lost: int = 0

    def __str__(self) -> str:
        extra = f" ({self.unschedulable} unschedulable)" if self.unschedulable else ""
        return f"{self.name}:{self.ready}/{self.desired}{extra}"


@dataclass(frozen=True)
class Sample:
    """One look at a pool. `at` is time.monotonic()."""

    at: float
    phase: str = ""
    tiers: tuple[TierRow, ...] = ()
    weights: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    conditions: Mapping[str, tuple[str, str]] = field(default_factory=dict)  # type -> status, why
    decision: str = ""
    decision_message: str = ""
    cost_per_hour: float | None = None
    cost_per_million_tokens: float | None = None
    objective_ms: Mapping[str, int] = field(default_factory=dict)
    status_p99_ms: Mapping[str, int | None] = field(default_factory=dict)
    p99_ms: Mapping[str, float | None] = field(default_factory=dict)  # Prometheus, gateway
    serving: Mapping[str, int] = field(default_factory=dict)  # the twin's serving replicas

    def tier(self, name: str) -> TierRow:
        return next((t for t in self.tiers if t.name == name), TierRow(name, 0, 0))

    def condition(self, type_: str) -> tuple[str, str]:
        return self.conditions.get(type_, ("", ""))

    def weights_text(self) -> str:
        return "; ".join(
            f"{c}: " + ",".join(f"{t}={w}" for t, w in ws.items() if w)
            for c, ws in self.weights.items()
        )

    def p99_text(self) -> str:
        parts = []
        for cls, objective in self.objective_ms.items():
            value = self.p99_ms.get(cls)
            shown = "-" if value is None else ("inf" if math.isinf(value) else f"{value:.0f}")
            parts.append(f"{cls}:{shown}/{objective}ms")
        return " ".join(parts)

    def line(self, t0: float) -> str:
        """One timeline line."""
        conditions = " ".join(
            f"{k}={s}({r})" for k, (s, r) in self.conditions.items() if k != "RoutingApplied"
        )
        cost = "-" if self.cost_per_hour is None else f"${self.cost_per_hour:.2f}/h"
        serving = " ".join(f"{t}:{n}" for t, n in sorted(self.serving.items()))
        return (
            f"t={self.at - t0:6.1f}s {self.phase[:14]:<14} {' '.join(map(str, self.tiers)):<34} "
            f"{self.weights_text():<44} p99 {self.p99_text():<34} {cost:<9} "
            f"{self.decision:<18} {conditions} twin serving {serving or '-'}"
        )


def p99_query(namespace: str, route: str, traffic_class: str, window_seconds: int) -> str:
    """A class's P99 TTFT as the gateway saw it (seconds)."""
    sel = f'namespace="{namespace}",httproute="{route}",traffic_class="{traffic_class}"'
    return (
        "histogram_quantile(0.99, sum by (le) "
        f"(rate(gpufleet_dev_gateway_ttft_seconds_bucket{{{sel}}}[{window_seconds}s])))"
    )


def demand_query(namespace: str, route: str, traffic_class: str, window_seconds: int = 15) -> str:
    """A class's demand in tokens/s from the gateway's counter (for a class's demandQuery)."""
    sel = f'namespace="{namespace}",httproute="{route}",traffic_class="{traffic_class}"'
    return f"sum(rate(gpufleet_dev_gateway_tokens_total{{{sel}}}[{window_seconds}s]))"


def prometheus_p99_ms(
    query: Query, namespace: str, route: str, classes: Sequence[str], window_seconds: int
) -> dict[str, float | None]:
    """Per class P99 TTFT in ms from Prometheus; None when it does not answer or has no data."""
    out: dict[str, float | None] = {}
    for cls in classes:
        try:
            result = query(p99_query(namespace, route, cls, window_seconds))
            value = float(result[0]["value"][1]) if result else math.nan
        except Exception:  # Prometheus down (a scenario does that) or no answer
            value = math.nan
        out[cls] = None if math.isnan(value) else value * 1000.0
    return out


def read_pool(api: Any, namespace: str, name: str) -> dict[str, Any] | None:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    try:
        found: Any = client.CustomObjectsApi(api).get_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, name
        )
    except ApiException as error:
        if error.status == 404:
            return None
        raise
    return dict(found)


def sample(
    api: Any,
    namespace: str,
    name: str,
    *,
    query: Query | None = None,
    serving: Mapping[str, int] | None = None,
    phase: str = "",
    window_seconds: int = P99_WINDOW_SECONDS,
) -> Sample:
    """The pool as a user would see it now."""
    at = time.monotonic()
    body = read_pool(api, namespace, name) or {}
    return from_body(body, at, query=query, serving=serving, phase=phase, window=window_seconds)


def from_body(
    body: Mapping[str, Any],
    at: float,
    *,
    query: Query | None = None,
    serving: Mapping[str, int] | None = None,
    phase: str = "",
    window: int = P99_WINDOW_SECONDS,
) -> Sample:
    status = body.get("status") or {}
    spec = body.get("spec") or {}
    meta = body.get("metadata") or {}
    objective = {c["name"]: int(c["ttftP99Milliseconds"]) for c in spec.get("trafficClasses", [])}
    tiers = tuple(
        TierRow(
            t["name"],
            int(t.get("readyReplicas", 0)),
            int(t.get("desiredReplicas", 0)),
            int(t.get("unschedulableReplicas", 0)),
            int(t.get("lostReplicas", 0)),
        )
        for t in status.get("tiers", [])
    )
    weights = {
        c["name"]: {w["tier"]: int(w["weight"]) for w in c.get("weights", [])}
        for c in status.get("classes", [])
    }
    status_p99 = {
        c["name"]: c.get("observedTtftP99Milliseconds") for c in status.get("classes", [])
    }
    conditions = {
        c["type"]: (str(c["status"]), str(c.get("reason", "")))
        for c in status.get("conditions", [])
    }
    decision = status.get("lastDecision") or {}
    p99: dict[str, float | None] = {}
    if query is not None and meta:
        p99 = prometheus_p99_ms(
            query, str(meta.get("namespace")), str(meta.get("name")), list(objective), window
        )
    return Sample(
        at=at,
        phase=phase,
        tiers=tiers,
        weights=weights,
        conditions=conditions,
        decision=str(decision.get("reason", "")),
        decision_message=str(decision.get("message", "")),
        cost_per_hour=_float(status.get("costPerHour")),
        cost_per_million_tokens=_float(status.get("costPerMillionTokens")),
        objective_ms=objective,
        status_p99_ms=status_p99,
        p99_ms=p99,
        serving=dict(serving or {}),
    )


def _float(value: Any) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None
