"""Why a plan is what it is: its reason, one-line message and the conditions it decides.

Every decision carries a Reason and a message a person can read in a condition, an Event
and `kubectl describe`, e.g. "Scaled rtx4090 2->6 for realtime demand 2000 tok/s, batch
demand 30000 tok/s (+20% headroom); realtime stays on h100 (rtx4090 P99 118 ms > 100 ms
objective even at low load)".
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from gpufleet.api.status import Reason
from gpufleet.api.types import decimal
from gpufleet.planning.capacity import MIN_ELIGIBLE_UTILIZATION
from gpufleet.planning.model import ClassPlan, MetricsState, TierPlan, Verdict

if TYPE_CHECKING:
    from gpufleet.planning.planner import Context

MAX_MESSAGE = 1000  # conditions and Events allow 1024
MAX_NOTES = 4

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


def tokens(value: float) -> str:
    return f"{value:.0f} tok/s"


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


@dataclass
class Report:
    """Explains one plan."""

    ctx: Context
    tiers: Mapping[str, TierPlan]
    classes: Mapping[str, ClassPlan]
    demand: Mapping[str, float]
    cost_per_hour: float
    cost_per_million_tokens: float | None
    protected: Mapping[str, int]
    shortage: bool
    waiting: list[str]
    predicted: Mapping[str, float | None]
    initial: bool = False
    held: bool = False

    # -- helpers -----------------------------------------------------------------------------

    def _current(self, tier: str) -> int:
        return self.ctx.seen(tier).desired_replicas

    def _changes(self) -> list[tuple[str, int, int]]:
        return [
            (n, self._current(n), t.replicas)
            for n, t in self.tiers.items()
            if t.replicas != self._current(n)
        ]

    def _weights_changed(self) -> bool:
        return any(
            {t: w for t, w in c.weights.items() if w} != self.ctx.previous_weights(name)
            for name, c in self.classes.items()
        )

    def _unserved(self) -> list[str]:
        return [n for n, c in self.classes.items() if c.served_fraction < 0.999]

    def _budget_bound(self) -> bool:
        budget = self.ctx.budget
        if budget is None or not self.shortage:
            return False
        for cls in self._unserved():
            for tier in self.ctx.rho[cls]:
                more = self.tiers[tier].replicas < self.ctx.upper[tier]
                if more and self.cost_per_hour + self.ctx.price(tier) > budget + 1e-9:
                    return True
        return self.ctx.min_over_budget

    def _over_cost_objective(self) -> float | None:
        limit = self.ctx.spec.objectives.max_cost_per_million_tokens
        if limit is None or self.cost_per_million_tokens is None:
            return None
        target = float(decimal(limit))
        return target if self.cost_per_million_tokens > target + 1e-12 else None

    # -- the reason and message --------------------------------------------------------------

    def reason(self) -> Reason:
        if self.held:
            return Reason.METRICS_MISSING
        if self.initial or self.ctx.is_new:
            return Reason.INITIAL
        if self.shortage:
            return Reason.BUDGET_LIMITED if self._budget_bound() else Reason.INSUFFICIENT_CAPACITY
        if self.ctx.capped:
            return Reason.OVERFLOW
        changes = self._changes()
        if any(new > old for _, old, new in changes):
            return Reason.DEMAND_INCREASED
        if changes:
            return Reason.DEMAND_DECREASED
        if any(t.scale_down_since is not None for t in self.tiers.values()) or self.protected:
            return Reason.SCALE_DOWN_DELAYED
        if self.waiting:
            return Reason.AWAITING_READY
        if self._weights_changed():
            return Reason.TRAFFIC_MOVED
        return Reason.STEADY

    def message(self) -> str:
        changes = self._changes()
        if changes:
            head = "Scaled " + ", ".join(f"{n} {old}->{new}" for n, old, new in changes)
        else:
            kept = [f"{n} {t.replicas}" for n, t in self.tiers.items() if t.replicas]
            head = "Kept " + (", ".join(kept) if kept else "no replicas")
        if self.held:
            head += f", the last decision: {self.metrics().message}"
        elif self.initial:
            head += " (minReplicas, waiting for metrics)"
        else:
            busy = [f"{n} demand {tokens(v)}" for n, v in self.demand.items() if v > 0]
            if busy:
                head += (
                    f" for {', '.join(busy)} (+{self.ctx.spec.scaling.headroom_percent}% headroom)"
                )
            else:
                head += " for zero demand"
        notes = self._notes()
        text = head + ("; " + "; ".join(notes[:MAX_NOTES]) if notes else "")
        return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 3] + "..."

    def _notes(self) -> list[str]:
        ctx = self.ctx
        notes: list[str] = []
        for name in self._unserved():
            share = self.classes[name].served_fraction
            notes.append(f"{name} gets {share:.0%} of its demand")
        for name, tier in self.tiers.items():
            if tier.capped_at is not None:
                seen = ctx.seen(name)
                notes.append(
                    f"{name} capped at {tier.capped_at} ({seen.unschedulable_replicas} "
                    "unschedulable), traffic overflows"
                )
        for name, tier in self.tiers.items():
            if tier.scale_down_since is not None:
                delay = timedelta(seconds=ctx.spec.scaling.scale_down_delay_seconds)
                until = (tier.scale_down_since + delay).strftime("%H:%M:%S")
                notes.append(
                    f"{name} stays at {tier.replicas} until {until}, then {tier.scale_down_to}"
                )
        for name, count in self.protected.items():
            notes.append(f"{name} keeps {count} until its traffic has moved")
        for name in self.waiting:
            notes.append(f"{name} moves as replicas become Ready")
        notes += self._ineligible_notes()
        notes += ctx.missing_profile.values()
        over = self._over_cost_objective()
        if over is not None and self.cost_per_million_tokens is not None:
            notes.append(f"${self.cost_per_million_tokens:.4g}/Mtok above the ${over:g} objective")
        return notes

    def _ineligible_notes(self) -> list[str]:
        ctx = self.ctx
        notes = []
        for cls in ctx.classes:
            routed = [t for t, w in self.classes[cls.name].weights.items() if w > 0]
            if not routed or (self.demand.get(cls.name, 0) <= 0 and not self.initial):
                continue
            cheapest_routed = min(ctx.price(t) for t in routed)
            cheaper = [
                t
                for t in ctx.names
                if t in ctx.models
                and not ctx.eligible(cls.name, t)
                and ctx.price(t) < cheapest_routed
            ]
            if not cheaper or cls.name in ctx.best_effort:
                continue
            tier = min(cheaper, key=lambda t: (ctx.price(t), ctx.names.index(t)))
            shape = ctx.shape(cls)
            p99 = ctx.models[tier].ttft_p99_at_utilization(MIN_ELIGIBLE_UTILIZATION, *shape)
            notes.append(
                f"{cls.name} stays on {', '.join(routed)} ({tier} P99 {ms(p99)} > "
                f"{cls.ttft_p99_milliseconds} ms objective even at low load)"
            )
        for name, relaxed in ctx.best_effort.items():
            notes.append(
                f"{name}: no tier holds its objective, served best effort (~{ms(relaxed)})"
            )
        return notes

    # -- conditions --------------------------------------------------------------------------

    def objectives(self) -> Verdict:
        ctx = self.ctx
        if self.held or self.initial:
            return Verdict(None, Reason.AWAITING_METRICS, self.metrics().message)
        failures: list[tuple[Reason, str]] = []
        for name, relaxed in ctx.best_effort.items():
            objective = next(c.ttft_p99_milliseconds for c in ctx.classes if c.name == name)
            failures.append(
                (
                    Reason.NO_ELIGIBLE_TIER,
                    f"{name}: no tier holds {objective} ms even at low load (best ~{ms(relaxed)})",
                )
            )
        for cls in ctx.classes:
            if not ctx.rho[cls.name] and cls.name not in ctx.best_effort:
                failures.append(
                    (Reason.NO_ELIGIBLE_TIER, f"{cls.name}: no tier has a performance profile")
                )
        for name in self._unserved():
            share = self.classes[name].served_fraction
            failures.append(
                (
                    Reason.INSUFFICIENT_CAPACITY,
                    f"{name} gets {share:.0%} of {tokens(self.demand.get(name, 0.0))}: "
                    "maxReplicas, the budget or unschedulable replicas allow no more",
                )
            )
        for cls in ctx.classes:
            limit = cls.ttft_p99_milliseconds / 1000.0
            observed = ctx.observation.class_ttft_p99_seconds.get(cls.name)
            predicted = self.predicted.get(cls.name)
            if cls.name in ctx.best_effort:
                continue
            if observed is not None and observed > limit:
                failures.append(
                    (
                        Reason.LATENCY_ABOVE_TARGET,
                        f"{cls.name} P99 {ms(observed)} > {cls.ttft_p99_milliseconds} ms",
                    )
                )
            elif predicted is not None and predicted > limit * 1.001:
                shown = "overload" if math.isinf(predicted) else ms(predicted)
                failures.append(
                    (
                        Reason.LATENCY_ABOVE_TARGET,
                        f"{cls.name} predicted P99 {shown} > {cls.ttft_p99_milliseconds} ms",
                    )
                )
        over = self._over_cost_objective()
        if over is not None and self.cost_per_million_tokens is not None:
            failures.append(
                (
                    Reason.COST_ABOVE_TARGET,
                    f"${self.cost_per_million_tokens:.4g}/Mtok > ${over:g}/Mtok objective",
                )
            )
        if failures:
            return Verdict(False, failures[0][0], "; ".join(m for _, m in failures)[:MAX_MESSAGE])
        cost = self.cost_per_million_tokens
        at = f" at ${cost:.4g}/Mtok" if cost is not None else ""
        return Verdict(True, Reason.OBJECTIVES_MET, f"Every class within its P99 objective{at}")

    def degraded(self) -> Verdict:
        ctx = self.ctx
        if not ctx.capped:
            return Verdict(False, Reason.AS_PLANNED, "Every tier can run the replicas it needs")
        preemptible = any(ctx.tier(n).preemptible for n in ctx.capped)
        parts = []
        for name, cap in ctx.capped.items():
            seen = ctx.seen(name)
            lost = ctx.lost.get(name, 0)
            what = f"lost {lost} with preemptible nodes, " if lost else ""
            others = sorted(
                {
                    t
                    for c in self.classes.values()
                    for t, w in c.weights.items()
                    if w > 0 and t != name and c.weights.get(name, 0) < 100
                }
            )
            asks = self.tiers[name].replicas
            parts.append(
                f"{name}: {what}{seen.unschedulable_replicas} replicas unschedulable, planned "
                f"at {cap} (Ready + starting)"
                + (f", still asking for {asks}" if asks > cap else "")
                + (f"; traffic overflows to {', '.join(others)}" if others else "")
            )
        reason = Reason.CAPACITY_LOST if preemptible else Reason.UNSCHEDULABLE
        return Verdict(True, reason, "; ".join(parts)[:MAX_MESSAGE])

    def metrics(self) -> Verdict:
        state = self.ctx.observation.metrics
        message = self.ctx.observation.metrics_message or _METRICS_MESSAGES[state]
        return Verdict(state is MetricsState.AVAILABLE, _METRICS_REASONS[state], message)
