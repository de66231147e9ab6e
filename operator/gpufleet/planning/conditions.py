"""The pool's conditions, each decided by one named pure check (cert-manager style).

Every check takes the values it judges, explicitly, and returns a Verdict (status, reason,
message); `status.build_status` sets each condition from its check, in one table, and no
verdict is overwritten by another:

| condition        | check        | from                                               |
|------------------|--------------|----------------------------------------------------|
| Ready            | `ready`      | the observation's Ready replicas, the plan's weights |
| ObjectivesMet    | `objectives` | the plan's predictions, the observed P99, the spec   |
| MetricsAvailable | `metrics`    | the observation's metrics state                      |
| Degraded         | `degraded`   | the plan's caps and losses, the apply's conflicts    |
| RoutingApplied   | `routing`    | what applying the HTTPRoute did                      |
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from gpufleet.api.status import Reason
from gpufleet.api.types import InferencePoolSpec, decimal
from gpufleet.planning.records import MetricsState, Observation, Plan, TierPlan, Verdict

MAX_MESSAGE = 1000  # conditions and Events allow 1024
# A P99 objective lets 1% of requests be slower: beyond that share of prompts out of every
# tier's reach, the objective cannot hold whatever the fleet.
UNSERVABLE_ALLOWED = 0.01
# How far over its $/Mtok objective a pool that met its objectives may go before
# ObjectivesMet turns False (it turns True again only at or under the objective itself). The
# $/Mtok is the fleet's price over the tokens of the last window, which move several percent
# pass to pass: in `make demo` a pool sized near its $0.10 objective read $0.0936, $0.1042,
# $0.0925 in three passes, and in another run $0.1016, $0.0966, $0.1014, flipping the
# condition, with an Event, every pass or two. Kubernetes' HPA takes a 10% tolerance on its
# ratio for the same reason; the planner still sizes to the objective itself, and the
# condition's message gives the cost either way.
COST_TOLERANCE = 0.05

_METRICS_REASONS = {
    MetricsState.AVAILABLE: Reason.METRICS_FOUND,
    MetricsState.UNREACHABLE: Reason.PROMETHEUS_UNREACHABLE,
    MetricsState.NO_DATA: Reason.NO_METRICS,
    MetricsState.STALE: Reason.STALE_METRICS,
    MetricsState.NOT_CONFIGURED: Reason.METRICS_NOT_CONFIGURED,
}
_METRICS_MESSAGES = {
    MetricsState.AVAILABLE: "Prometheus has current vLLM series for the pool",
    MetricsState.UNREACHABLE: "Prometheus did not answer",
    MetricsState.NO_DATA: "Prometheus has no vLLM series for the pool",
    MetricsState.STALE: "The pool's vLLM series stopped updating",
    MetricsState.NOT_CONFIGURED: "No Prometheus configured: replicas stay at their minimum",
}


@dataclass(frozen=True)
class RoutingState:
    """What happened to the HTTPRoute this pass."""

    applied: bool
    reason: Reason
    message: str


def tokens(value: float) -> str:
    return f"{value:.0f} tok/s"


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def cost_objective_exceeded(
    spec: InferencePoolSpec, cost_per_million_tokens: float | None
) -> float | None:
    """The $/Mtok objective when the plan costs more than it, else None."""
    limit = spec.objectives.max_cost_per_million_tokens
    if limit is None or cost_per_million_tokens is None:
        return None
    target = float(decimal(limit))
    return target if cost_per_million_tokens > target + 1e-12 else None


def ready(spec: InferencePoolSpec, observation: Observation, plan: Plan) -> Verdict:
    """Ready: every traffic class can be served now by a Ready replica of a tier it uses."""
    ready_now = {name: t.ready_replicas for name, t in observation.tiers.items()}
    desired = {name: t.replicas for name, t in plan.tiers.items()}
    missing = [
        f"{name} {ready_now.get(name, 0)}/{want}"
        for name, want in desired.items()
        if ready_now.get(name, 0) < want
    ]
    unserved = [
        c.name
        for c in spec.traffic_classes
        if c.name in plan.classes
        and not any(
            w > 0 and ready_now.get(tier, 0) > 0 for tier, w in plan.classes[c.name].weights.items()
        )
    ]
    if unserved:
        starting = sum(t.starting_replicas for t in observation.tiers.values())
        return Verdict(
            False,
            Reason.REPLICAS_STARTING if starting else Reason.NO_READY_REPLICAS,
            f"No Ready replica serves {', '.join(unserved)}"
            + (f" ({starting} replicas starting)" if starting else ""),
        )
    if missing:
        return Verdict(
            True,
            Reason.PARTIALLY_READY,
            "Serving every class; not Ready yet: " + ", ".join(missing),
        )
    return Verdict(True, Reason.TIERS_READY, "All desired replicas are Ready")


def objectives(
    spec: InferencePoolSpec, observation: Observation, plan: Plan, *, met_before: bool = False
) -> Verdict:
    """ObjectivesMet: every class within its P99 objective (observed, else predicted) and
    the plan within the $/Mtok objective; the first failure names the reason.

    `met_before`: the condition was True. Then a cost over its objective by at most
    COST_TOLERANCE keeps it True, and the message says how far over it is."""
    if plan.awaiting_metrics:
        return Verdict(None, Reason.AWAITING_METRICS, metrics(observation).message)
    failures: list[tuple[Reason, str]] = []
    for cls in spec.traffic_classes:
        unservable = plan.classes[cls.name].unservable_share
        if unservable is not None and unservable > UNSERVABLE_ALLOWED:
            failures.append(
                (
                    Reason.PROMPTS_TOO_LONG,
                    f"{cls.name}: {unservable:.0%} of its prompts take longer than "
                    f"{cls.ttft_p99_objective_milliseconds} ms to prefill on every tier, even "
                    "idle; no replica can serve them in time (shorten them, relax the "
                    "objective, or add a faster tier)",
                )
            )
    for cls in spec.traffic_classes:
        relaxed = plan.classes[cls.name].best_effort_ttft_p99_seconds
        if relaxed is not None:
            failures.append(
                (
                    Reason.NO_ELIGIBLE_TIER,
                    f"{cls.name}: no tier holds {cls.ttft_p99_objective_milliseconds} ms even "
                    f"at low load (best ~{ms(relaxed)})",
                )
            )
    for cls in spec.traffic_classes:
        planned = plan.classes[cls.name]
        if not planned.eligible_tiers and planned.best_effort_ttft_p99_seconds is None:
            failures.append(
                (Reason.NO_ELIGIBLE_TIER, f"{cls.name}: no tier has a performance profile")
            )
    for cls in spec.traffic_classes:
        planned = plan.classes[cls.name]
        if planned.served_fraction < 0.999:
            failures.append(
                (
                    Reason.INSUFFICIENT_CAPACITY,
                    f"{cls.name} gets {planned.served_fraction:.0%} of "
                    f"{tokens(planned.demand_tokens_per_second or 0.0)}: "
                    "maxReplicas, the budget or unschedulable replicas allow no more",
                )
            )
    for cls in spec.traffic_classes:
        planned = plan.classes[cls.name]
        if planned.best_effort_ttft_p99_seconds is not None:
            continue
        limit = cls.objective_seconds
        observed = observation.class_ttft_p99_seconds.get(cls.name)
        predicted = math.inf if planned.overloaded else planned.predicted_ttft_p99_seconds
        if observed is not None and observed > limit:
            failures.append(
                (
                    Reason.LATENCY_ABOVE_TARGET,
                    f"{cls.name} P99 {ms(observed)} > {cls.ttft_p99_objective_milliseconds} ms",
                )
            )
        elif predicted is not None and predicted > limit * 1.001:
            shown = "overload" if math.isinf(predicted) else ms(predicted)
            failures.append(
                (
                    Reason.LATENCY_ABOVE_TARGET,
                    f"{cls.name} predicted P99 {shown} > {cls.ttft_p99_objective_milliseconds} ms",
                )
            )
    cost = plan.cost_per_million_tokens
    over = cost_objective_exceeded(spec, cost)
    tolerated = (
        met_before and over is not None and cost is not None and cost <= over * (1 + COST_TOLERANCE)
    )
    if over is not None and cost is not None and not tolerated:
        failures.append(
            (
                Reason.COST_ABOVE_TARGET,
                f"${cost:.4g}/Mtok > ${over:g}/Mtok objective",
            )
        )
    if failures:
        return Verdict(False, failures[0][0], "; ".join(m for _, m in failures)[:MAX_MESSAGE])
    at = f" at ${cost:.4g}/Mtok" if cost is not None else ""
    if tolerated and over is not None and cost is not None:
        at += (
            f", {cost / over - 1:.1%} over the ${over:g}/Mtok objective "
            f"(within its {COST_TOLERANCE:.0%} tolerance)"
        )
    return Verdict(True, Reason.OBJECTIVES_MET, f"Every class within its P99 objective{at}")


def metrics(observation: Observation) -> Verdict:
    """MetricsAvailable: whether this pass's metrics could be trusted, and why not."""
    state = observation.metrics
    message = observation.metrics_message or _METRICS_MESSAGES[state]
    return Verdict(state is MetricsState.AVAILABLE, _METRICS_REASONS[state], message)


def degraded(
    spec: InferencePoolSpec,
    observation: Observation,
    plan: Plan,
    conflicts: Sequence[str] = (),
) -> Verdict:
    """Degraded: a tier cannot run what it needs (unschedulable, or lost with preemptible
    nodes), a preemptible tier loses nodes faster than it can start replicas (expected to
    lose one within every lead time), or objects the pool does not own hold its children's
    names. All are told when they hold; a conflict needs a person, so it gives the reason,
    then capacity that cannot run, then the loss rate."""
    parts = []
    capped = {n: t for n, t in plan.tiers.items() if t.capped_at is not None}
    for name, tier in capped.items():
        seen = observation.tiers.get(name)
        unschedulable = seen.unschedulable_replicas if seen else 0
        lost = tier.lost_replicas
        what = f"lost {lost} with preemptible nodes, " if lost else ""
        others = sorted(
            {
                t
                for c in plan.classes.values()
                for t, w in c.weights.items()
                if w > 0 and t != name and c.weights.get(name, 0) < 100
            }
        )
        cap = tier.capped_at
        parts.append(
            f"{name}: {what}{unschedulable} replicas unschedulable, planned "
            f"at {cap} (Ready + starting)"
            + (
                f", still asking for {tier.replicas}"
                if cap is not None and tier.replicas > cap
                else ""
            )
            + (f"; traffic overflows to {', '.join(others)}" if others else "")
        )
    losing = [_losing(n, t) for n, t in plan.tiers.items() if t.expected_losses >= 1.0]
    parts += losing
    if conflicts:
        parts.insert(
            0,
            f"Objects not owned by this pool hold the names {', '.join(conflicts)}: "
            "rename the tier or delete them",
        )
        return Verdict(True, Reason.CHILD_CONFLICT, "; ".join(parts)[:MAX_MESSAGE])
    if not capped and not losing:
        return Verdict(False, Reason.AS_PLANNED, "Every tier can run the replicas it needs")
    if not capped:
        return Verdict(True, Reason.LOSING_NODES, "; ".join(parts)[:MAX_MESSAGE])
    preemptible = any(t.preemptible for t in spec.tiers if t.name in capped)
    reason = Reason.CAPACITY_LOST if preemptible else Reason.UNSCHEDULABLE
    return Verdict(True, reason, "; ".join(parts)[:MAX_MESSAGE])


def _losing(name: str, tier: TierPlan) -> str:
    rate = tier.node_loss.rate_per_replica_hour if tier.node_loss else 0.0
    lead = tier.lead_time_seconds or 0.0
    planned = tier.replicas - tier.margin_replicas
    return (
        f"{name}: loses nodes faster than it starts replicas: {rate:.2g} losses per "
        f"replica-hour, {tier.expected_losses:.1f} expected among its {planned} replicas "
        f"within the {lead:.0f} s a replacement takes to be Ready"
    )


def routing(state: RoutingState) -> Verdict:
    """RoutingApplied: whether the HTTPRoute carries the current weights."""
    return Verdict(state.applied, state.reason, state.message)
