"""The three inputs of one planning pass, and the look-ups every step makes on them.

`plan(spec, observation, previous)` reads nothing else. `Inputs` is a frozen view over
those three values: it derives, it never accumulates, so a step that takes it cannot
depend on what another step did before it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property

from gpufleet.api.status import InferencePoolStatus, TierStatus
from gpufleet.api.types import InferencePoolSpec, Tier, TrafficClass, decimal
from gpufleet.planning.records import Observation, TierObservation


@dataclass(frozen=True)
class Inputs:
    spec: InferencePoolSpec
    observation: Observation
    previous: InferencePoolStatus

    @cached_property
    def tiers(self) -> tuple[Tier, ...]:
        return tuple(self.spec.tiers)

    @cached_property
    def classes(self) -> tuple[TrafficClass, ...]:
        return tuple(self.spec.traffic_classes)

    @cached_property
    def names(self) -> list[str]:
        return [t.name for t in self.tiers]

    @property
    def now(self) -> datetime:
        return self.observation.now

    @property
    def headroom(self) -> float:
        return self.spec.scaling.headroom_percent / 100.0

    @cached_property
    def budget(self) -> float | None:
        value = self.spec.objectives.max_hourly_cost
        return None if value is None else float(decimal(value))

    @cached_property
    def prices(self) -> dict[str, float]:
        """Dollars per replica-hour per tier."""
        return {t.name: t.price_per_replica_hour for t in self.tiers}

    def seen(self, tier: str) -> TierObservation:
        return self.observation.tiers.get(tier) or TierObservation(name=tier)

    def before(self, tier: str) -> TierStatus | None:
        return next((t for t in self.previous.tiers if t.name == tier), None)

    def serving(self) -> dict[str, int]:
        """Replicas each tier serves from now on, as far as a pass knows before it decides:
        what the last pass asked for, or what is Ready (at least one)."""
        result = {}
        for tier in self.tiers:
            before = self.before(tier.name)
            desired = before.desired_replicas if before else 0
            result[tier.name] = max(desired, self.seen(tier.name).ready_replicas or 0, 1)
        return result

    def previous_weights(self, cls: str) -> dict[str, int]:
        """The weights the class's route carries now (tiers with weight only)."""
        for c in self.previous.classes:
            if c.name == cls:
                return {w.tier: w.weight for w in c.weights if w.weight > 0}
        return {}

    def previous_demand(self, cls: str) -> float:
        for c in self.previous.classes:
            if c.name == cls and c.demand_tokens_per_second is not None:
                return float(c.demand_tokens_per_second)
        return 0.0

    @property
    def is_new(self) -> bool:
        return self.previous.last_decision is None and not self.previous.tiers

    def cost(self, replicas: Mapping[str, int]) -> float:
        """Dollars per hour of these replicas."""
        return sum(self.prices[n] * replicas.get(n, 0) for n in self.names)
