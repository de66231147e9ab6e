"""The baselines: what people run today, each given the same view as gpufleet.

Baselines are matched to tiers by accelerator, never by name.

- `utilization`: an HPA per tier on compute utilization (target 70%, 10% tolerance, scale
  up at once, scale down to the highest recommendation of the last 5 minutes), with fixed
  weights: each class on the tier where a request of its shape is cheapest among those
  meeting its objective (by the profiles at the class's mean shape in the trace).
- `h100-only`, `rtx4090-only`: the same HPA on the first tier of that accelerator, every
  class on it, so the comparison with `utilization` is autoscaler against autoscaler.
- `static-split`: the fixed weights of `utilization` and fixed replicas sized, with the
  profiles, for the trace's busiest interval (the capacity plan someone does once).

`sim.policies.make_policies` builds them from the trace; the oracle replays a fixed fleet
with `StaticPolicy`.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from gpufleet.api.types import Accelerator, InferencePoolSpec, Tier
from gpufleet.planning.capacity import ReplicaModel
from gpufleet.sim.policy import ClassLoad, Decision, Seen

HPA_TARGET = 0.7
HPA_TOLERANCE = 0.1
HPA_SCALE_DOWN_WINDOW_SECONDS = 300.0
H100 = (Accelerator.H100_PCIE, Accelerator.H100_SXM)
RTX4090 = (Accelerator.RTX4090,)


def tiers_of(spec: InferencePoolSpec, accelerators: Sequence[Accelerator]) -> list[Tier]:
    return [t for t in spec.tiers if t.accelerator in accelerators]


def cheapest_tier(
    spec: InferencePoolSpec,
    tiers: Sequence[Tier],
    models: Mapping[str, ReplicaModel],
    class_name: str,
    load: ClassLoad,
) -> Tier:
    """The tier where this class's requests are cheapest among those holding its objective."""
    objective = next(c for c in spec.traffic_classes if c.name == class_name)
    seconds = objective.objective_seconds
    shape = (max(load.prompt_tokens, 1.0), max(load.output_tokens, 1.0))

    def price_per_request(t: Tier) -> float:
        capacity = models[t.name].capacity_rps(seconds, *shape)
        per_hour = t.price_per_replica_hour
        return per_hour / capacity if capacity > 0 else math.inf

    eligible = [t for t in tiers if price_per_request(t) < math.inf]
    if eligible:
        return min(eligible, key=price_per_request)
    return min(tiers, key=lambda t: models[t.name].ttft_base_seconds(shape[0]))


def fixed_weights(
    spec: InferencePoolSpec,
    tiers: Sequence[Tier],
    models: Mapping[str, ReplicaModel],
    loads: Mapping[str, ClassLoad],
) -> dict[str, dict[str, int]]:
    """Each class wholly on its cheapest eligible tier."""
    weights = {}
    for c in spec.traffic_classes:
        home = cheapest_tier(spec, tiers, models, c.name, loads[c.name])
        weights[c.name] = {t.name: 100 if t.name == home.name else 0 for t in spec.tiers}
    return weights


@dataclass
class UtilizationPolicy:
    """An HPA on compute utilization per tier, with fixed weights."""

    name: str
    description: str
    spec: InferencePoolSpec
    tiers: Sequence[Tier]
    weights: Mapping[str, Mapping[str, int]]
    initial: Mapping[str, int]
    _history: dict[str, deque[tuple[float, int]]] = field(default_factory=dict)
    _current: dict[str, int] = field(default_factory=dict)
    foresight = False  # decides on the interval just past, like a real autoscaler
    early_passes = False  # an HPA keeps its own period

    def warm(self, seen: Seen) -> Decision:
        self._current = {t.name: self._clamp(t, self.initial[t.name]) for t in self.tiers}
        return self._decision()

    def decide(self, seen: Seen) -> Decision:
        for t in self.tiers:
            observed = seen.observation.tiers.get(t.name)
            ready = observed.ready_replicas if observed else 0
            current = self._current[t.name]
            busy = seen.busy_replicas.get(t.name, 0.0)
            if ready == 0:
                recommended = current  # no metrics: the HPA holds
            elif abs(busy / ready / HPA_TARGET - 1.0) <= HPA_TOLERANCE:
                recommended = current
            else:
                recommended = math.ceil(busy / HPA_TARGET - 1e-9)
            recommended = self._clamp(t, recommended)
            history = self._history.setdefault(t.name, deque())
            history.append((seen.time, recommended))
            while history and history[0][0] <= seen.time - HPA_SCALE_DOWN_WINDOW_SECONDS:
                history.popleft()
            stabilized = max(r for _, r in history)
            self._current[t.name] = (
                recommended if recommended >= current else min(current, stabilized)
            )
        return self._decision()

    def _clamp(self, tier: Tier, n: int) -> int:
        return min(max(n, tier.min_replicas, 1), tier.max_replicas)

    def _decision(self) -> Decision:
        replicas = {t.name: 0 for t in self.spec.tiers} | self._current
        return Decision(replicas=replicas, weights=self.weights)


@dataclass
class StaticPolicy:
    name: str
    description: str
    replicas: Mapping[str, int]
    weights: Mapping[str, Mapping[str, int]]
    foresight = False
    early_passes = False

    def warm(self, seen: Seen) -> Decision:
        return self.decide(seen)

    def decide(self, seen: Seen) -> Decision:
        return Decision(replicas=self.replicas, weights=self.weights)


def needed_replicas(
    spec: InferencePoolSpec,
    models: Mapping[str, ReplicaModel],
    weights: Mapping[str, Mapping[str, int]],
    loads: Mapping[str, ClassLoad],
) -> dict[str, int]:
    """Replicas per tier the profiles say hold every objective for `loads` under `weights`."""
    needed = {}
    for t in spec.tiers:
        work = 0.0
        rho = 1.0
        for c in spec.traffic_classes:
            share = weights[c.name].get(t.name, 0) / 100.0
            load = loads[c.name]
            if share <= 0 or load.rate_rps <= 0:
                continue
            shape = (max(load.prompt_tokens, 1.0), max(load.output_tokens, 1.0))
            model = models[t.name]
            work += share * load.rate_rps * model.service_seconds(*shape)
            limit = model.max_utilization(c.objective_seconds, *shape)
            rho = min(rho, limit if limit > 0 else 0.5)  # ineligible: best effort at 50%
        needed[t.name] = min(max(math.ceil(work / rho - 1e-9), t.min_replicas), t.max_replicas)
    return needed


def hpa_replicas(
    spec: InferencePoolSpec,
    models: Mapping[str, ReplicaModel],
    weights: Mapping[str, Mapping[str, int]],
    loads: Mapping[str, ClassLoad],
) -> dict[str, int]:
    """What an HPA settles on for `loads`: compute busy replicas over the target utilization."""
    replicas = {}
    for t in spec.tiers:
        busy = 0.0
        for c in spec.traffic_classes:
            load = loads[c.name]
            share = weights[c.name].get(t.name, 0) / 100.0
            if share > 0 and load.rate_rps > 0:
                shape = (max(load.prompt_tokens, 1.0), max(load.output_tokens, 1.0))
                busy += share * load.rate_rps * models[t.name].service_seconds(*shape)
        replicas[t.name] = math.ceil(busy / HPA_TARGET - 1e-9)
    return replicas
