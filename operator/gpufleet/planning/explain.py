"""Why a plan is what it is: its reason and the one-line message a person reads.

Every decision carries a Reason and a message shown in `status.lastDecision`, an Event
and `kubectl describe`, e.g. "Scaled rtx4090 2->6 for realtime demand 2000 tok/s, batch
demand 30000 tok/s (+20% headroom); realtime stays on h100 (rtx4090 P99 118 ms > 100 ms
objective even at low load)". The conditions are decided in `conditions`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from gpufleet.api.status import Reason
from gpufleet.planning import contention
from gpufleet.planning.bounds import TierBounds
from gpufleet.planning.capacity import MIN_ELIGIBLE_UTILIZATION, ReplicaModel
from gpufleet.planning.classes import ClassCapacity
from gpufleet.planning.conditions import (
    MAX_MESSAGE,
    cost_objective_exceeded,
    metrics,
    ms,
    tokens,
)
from gpufleet.planning.inputs import Inputs
from gpufleet.planning.records import ClassPlan, TierPlan
from gpufleet.planning.reuse import TOLERANCE

MAX_NOTES = 6


# A reserve for a step above this multiple of the demand now is stated in tokens/s.
MAX_STEP_RATIO = 100.0


@dataclass(frozen=True)
class Report:
    """Explains one plan from the values the planner decided it with."""

    inputs: Inputs
    models: Mapping[str, ReplicaModel]
    capacities: Mapping[str, ClassCapacity]
    bounds: TierBounds
    missing_profile: Mapping[str, str]
    tiers: Mapping[str, TierPlan]
    classes: Mapping[str, ClassPlan]
    demand: Mapping[str, float]
    cost_per_hour: float
    cost_per_million_tokens: float | None
    protected: Mapping[str, int]
    shortage: bool
    waiting: list[str]
    given_way: frozenset[str] = frozenset()  # classes the optimizer planned as giving way
    apart_per_hour: float = 0.0  # the fleet raised toward keeping them apart ($/h), if so
    # class -> tiers its traffic also goes to, Ready replicas the optimizer left idle
    spread: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # class -> higher-priority classes' tiers it was kept off while demand steps up
    kept_off: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    initial: bool = False
    held: bool = False
    kept_since: datetime | None = None  # the optimizer's answer kept, solved then (`reuse`)

    # -- helpers -----------------------------------------------------------------------------

    def _current(self, tier: str) -> int:
        return self.inputs.seen(tier).desired_replicas

    def _changes(self) -> list[tuple[str, int, int]]:
        return [
            (n, self._current(n), t.replicas)
            for n, t in self.tiers.items()
            if t.replicas != self._current(n)
        ]

    def _weights_changed(self) -> bool:
        return any(
            {t: w for t, w in c.weights.items() if w} != self.inputs.previous_weights(name)
            for name, c in self.classes.items()
        )

    def _unserved(self) -> list[str]:
        return [n for n, c in self.classes.items() if c.served_fraction < 0.999]

    def _budget_bound(self) -> bool:
        """Whether the budget, rather than maxReplicas or the nodes, left a class short."""
        budget = self.inputs.budget
        if budget is None or not self.shortage:
            return False
        for cls in self._unserved():
            for tier in self.capacities[cls].eligible:
                more = self.tiers[tier].replicas < self.bounds.upper[tier]
                if more and self.cost_per_hour + self.inputs.prices[tier] > budget + 1e-9:
                    return True
        return self.bounds.min_over_budget

    # -- the reason and message --------------------------------------------------------------

    def reason(self) -> Reason:
        if self.held:
            return Reason.METRICS_MISSING
        if self.initial or self.inputs.is_new:
            return Reason.INITIAL
        if self.shortage:
            return Reason.BUDGET_LIMITED if self._budget_bound() else Reason.INSUFFICIENT_CAPACITY
        if self.bounds.capped:
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
            head += f", the last decision: {metrics(self.inputs.observation).message}"
        elif self.initial:
            head += " (minReplicas, waiting for metrics)"
        else:
            busy = [f"{n} demand {tokens(v)}" for n, v in self.demand.items() if v > 0]
            if busy:
                headroom = self.inputs.spec.scaling.headroom_percent
                head += f" for {', '.join(busy)} (+{headroom}% headroom)"
            else:
                head += " for zero demand"
        notes = self._notes()
        text = head + ("; " + "; ".join(notes[:MAX_NOTES]) if notes else "")
        return _clip(text)

    def _notes(self) -> list[str]:
        notes: list[str] = []
        for name in self._unserved():
            share = self.classes[name].served_fraction
            notes.append(f"{name} gets {share:.0%} of its demand")
        for name, tiers in self.kept_off.items():
            notes.append(
                f"{name} kept off {', '.join(tiers)} while demand steps up (its rate window "
                "shows only part of the step yet)"
            )
        notes += self._foresight_notes()
        for name, tier in self.tiers.items():
            if tier.capped_at is not None:
                seen = self.inputs.seen(name)
                notes.append(
                    f"{name} capped at {tier.capped_at} ({seen.unschedulable_replicas} "
                    "unschedulable), traffic overflows"
                )
        for name, tier in self.tiers.items():
            if tier.scale_down_since is not None:
                delay = timedelta(seconds=self.inputs.spec.scaling.scale_down_delay_seconds)
                until = (tier.scale_down_since + delay).strftime("%H:%M:%S")
                notes.append(
                    f"{name} stays at {tier.replicas} until {until}, then {tier.scale_down_to}"
                )
        for name, count in self.protected.items():
            notes.append(f"{name} keeps {count} until its traffic has moved")
        for name in self.waiting:
            notes.append(f"{name} moves as replicas become Ready")
        for name, onto in self.spread.items():
            notes.append(
                f"{name} also sent to the Ready replicas of {', '.join(onto)} "
                "(running anyway: a burst meets them all)"
            )
        notes += self._ineligible_notes()
        notes += self.missing_profile.values()
        over = cost_objective_exceeded(self.inputs.spec, self.cost_per_million_tokens)
        if over is not None and self.cost_per_million_tokens is not None:
            notes.append(f"${self.cost_per_million_tokens:.4g}/Mtok above the ${over:g} objective")
        if self.kept_since is not None:
            notes.append(
                f"replicas as sized at {self.kept_since.strftime('%H:%M:%S')}: demand within "
                f"{TOLERANCE:.0%} of it, optimizer skipped"
            )
        return notes

    def _foresight_notes(self) -> list[str]:
        """What the forecast, the burst reserve and the queues added to the demand seen."""
        notes = []
        rising = {
            n: c.forecast
            for n, c in self.classes.items()
            if c.forecast is not None and c.forecast.expected > c.forecast.observed * 1.05
        }
        if rising:
            notes.append(
                "forecast "
                + ", ".join(
                    f"{n} {tokens(f.expected)} within {f.horizon_seconds:.0f} s"
                    + (
                        f" (its daily pattern rises {tokens(f.daily_rise)} by then)"
                        if f.daily_rise > 0
                        else ""
                    )
                    for n, f in rising.items()
                )
            )
        reserve = {n: t.reserve_replicas for n, t in self.tiers.items() if t.reserve_replicas}
        if reserve:
            cost = sum(self.inputs.prices[n] * k for n, k in reserve.items())
            steps = [
                _step(n, c.forecast.planned, c.forecast.observed)
                for n, c in self.classes.items()
                if c.forecast is not None and c.forecast.reserve > 0
            ]
            held = ", ".join(f"{k} {n}" for n, k in reserve.items())
            horizon = max(
                (c.forecast.horizon_seconds for c in self.classes.values() if c.forecast),
                default=0.0,
            )
            peaks = [
                f"{n} every {c.forecast.bursts.gap_seconds:.0f} s"
                for n, c in self.classes.items()
                if c.forecast is not None and c.forecast.holds_burst_peak
            ]
            notes.append(
                f"burst reserve: ${cost:.2f}/h holds {held} to absorb a step"
                + (f" ({', '.join(steps)})" if steps else "")
                + f" for {horizon:.0f} s"
                + (
                    f"; the peak of recurring bursts shorter than that ({', '.join(peaks)})"
                    if peaks
                    else ""
                )
            )
        riding = {
            n: c.forecast
            for n, c in self.classes.items()
            if c.forecast is not None and c.forecast.rides_burst
        }
        if riding:
            notes.append(
                "burst not chased: "
                + ", ".join(
                    f"{n} planned at {tokens(f.planned)}, the higher of its demand now and its "
                    f"recurring bursts' peak (they end within {f.horizon_seconds:.0f} s, "
                    "before a replica bought now would serve)"
                    for n, f in riding.items()
                )
            )
        drained = {n: t.drain_replicas for n, t in self.tiers.items() if t.drain_replicas}
        queued = {n: c.backlog_tokens for n, c in self.classes.items() if c.backlog_tokens > 0}
        if drained and queued:
            notes.append(
                "backlog drain: "
                + ", ".join(f"{k} {n}" for n, k in drained.items())
                + " for "
                + ", ".join(f"{v:.0f} queued {n} tokens" for n, v in queued.items())
                + ", released once drained"
            )
        tail = {n: t for n, t in self.tiers.items() if t.tail_replicas and t.tail_class}
        if tail:
            cost = sum(self.inputs.prices[n] * t.tail_replicas for n, t in tail.items())
            notes.append(
                f"prompt tail: ${cost:.2f}/h holds "
                + ", ".join(
                    f"{t.tail_replicas} {n} so that under {contention.TAIL:.0%} of "
                    f"{t.tail_class}'s requests wait past its objective behind another "
                    f"prompt's prefill ({t.tail_misses:.1%} without)"
                    for n, t in tail.items()
                )
            )
        sized = [
            f"{c} at most {cap.max_utilization[t]:.0%} busy on {t} ({r:.0%} at its mean prompt)"
            for c, cap in self.capacities.items()
            for t, r in cap.at_mean.items()
            if self.classes[c].weights.get(t, 0) > 0 and self.demand.get(c, 0) > 0
        ]
        if sized:
            notes.append("prompt lengths: " + ", ".join(sized))
        hedged = {n: t for n, t in self.tiers.items() if t.margin_replicas and t.node_loss}
        if hedged:
            cost = sum(self.inputs.prices[n] * t.margin_replicas for n, t in hedged.items())
            notes.append(
                f"loss margin: ${cost:.2f}/h holds "
                + ", ".join(
                    f"{t.margin_replicas} {n} for {t.expected_losses:.2g} losses expected "
                    f"within {t.lead_time_seconds or 0:.0f} s "
                    f"({t.node_loss.rate_per_replica_hour:.2g}/replica-hour)"
                    for n, t in hedged.items()
                    if t.node_loss is not None
                )
            )
        return notes

    def _ineligible_notes(self) -> list[str]:
        inputs, prices = self.inputs, self.inputs.prices
        notes = []
        for cls in inputs.classes:
            capacity = self.capacities[cls.name]
            routed = [t for t, w in self.classes[cls.name].weights.items() if w > 0]
            if not routed or (self.demand.get(cls.name, 0) <= 0 and not self.initial):
                continue
            cheapest_routed = min(prices[t] for t in routed)
            cheaper = [
                t
                for t in inputs.names
                if t in self.models and not capacity.is_eligible(t) and prices[t] < cheapest_routed
            ]
            if not cheaper or capacity.best_effort_seconds is not None:
                continue
            tier = min(cheaper, key=lambda t: (prices[t], inputs.names.index(t)))
            p99 = self.models[tier].ttft_p99_at_utilization(MIN_ELIGIBLE_UTILIZATION, *cls.shape)
            notes.append(
                f"{cls.name} stays on {', '.join(routed)} ({tier} P99 {ms(p99)} > "
                f"{cls.ttft_p99_objective_milliseconds} ms objective even at low load)"
            )
        for name, capacity in self.capacities.items():
            sharing = self._giving_way(name)
            if capacity.best_effort_seconds is not None:
                notes.append(
                    f"{name}: no tier holds its objective, served best effort "
                    f"(~{ms(capacity.best_effort_seconds)})"
                    + (f", giving way to {sharing}" if sharing else "")
                )
            elif sharing:
                notes.append(
                    f"{name} waits behind the prompts of {sharing} "
                    "(kept apart, they could not all be served)"
                )
        if self.apart_per_hour > 0:
            notes.append(
                f"fleet sized toward the ${self.apart_per_hour:.2f}/h keeping classes apart "
                "would take, not only what giving way needs"
            )
        return notes

    def _giving_way(self, name: str) -> str:
        """'batch on rtx4090' where a class shares a tier with a class it would otherwise be
        kept apart from, or limited further beside (`optimizer`); '' where none."""
        if name not in self.given_way:
            return ""
        given = self.capacities[name].yielding_utilization
        sharing = [
            f"{other} on {tier}"
            for tier, others in given.items()
            if self.classes[name].weights.get(tier, 0) > 0
            for other in others
            if other in self.classes and self.classes[other].weights.get(tier, 0) > 0
        ]
        return ", ".join(sharing)


def early_pass(message: str, why: str) -> str:
    """A decision's message when its pass ran before its interval (`gpufleet.queuewatch`)."""
    return _clip(f"Early pass, {why}: {message}")


def _clip(text: str) -> str:
    """A message cut to what conditions and Events hold."""
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 3] + "..."


def _step(name: str, planned: float, observed: float) -> str:
    """The step a reserve absorbs: as a multiple of the demand now, or in tokens/s where
    the demand now is too small for a multiple to say anything (a class read near 0)."""
    if observed >= 1.0 and planned / observed < MAX_STEP_RATIO:
        return f"{name} to {planned / observed:.1f}x"
    return f"{name} to {tokens(planned)}"
