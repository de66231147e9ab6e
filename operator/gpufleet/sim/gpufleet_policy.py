"""The `gpufleet` policy: the real planner in the loop, seeing what the operator would see.

`gpufleet.planning.planner.plan` runs every intervalSeconds on the observation the
operator's Prometheus adapter would give it for the simulated series (`operator_view`),
and the status it wrote is carried to the next pass through the same `build_status` and
JSON round trip as the operator's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from gpufleet.api.status import InferencePoolStatus, Reason
from gpufleet.api.types import InferencePool, InferencePoolSpec
from gpufleet.planning.demand import infer_demand, with_backlog
from gpufleet.planning.model import ClassDemand, Observation, Plan, TierObservation
from gpufleet.planning.status import RoutingState, build_status
from gpufleet.sim.policy import Decision, Seen

Planner = Callable[[InferencePoolSpec, Observation, InferencePoolStatus], Plan]


@dataclass
class GpufleetPolicy:
    """The real planner, status carried between passes exactly as the operator does."""

    pool: InferencePool
    planner: Planner
    status: InferencePoolStatus = field(default_factory=InferencePoolStatus)
    plans: list[Plan] = field(default_factory=list)
    name: str = "gpufleet"
    description: str = "the planner every intervalSeconds, status carried over"

    def warm(self, seen: Seen) -> Decision:
        """Two passes on the first interval's demand: size the fleet, then route on it Ready.

        Demand is taken as measured here (there is no history to infer it from yet).
        """
        first = self._pass(seen.observation)
        running = {
            name: TierObservation(name=name, desired_replicas=n, ready_replicas=n)
            for name, n in first.replicas.items()
        }
        return self._pass(replace(seen.observation, tiers=running))

    def decide(self, seen: Seen) -> Decision:
        return self._pass(operator_view(seen.observation, self.pool, self.status))

    def _pass(self, observation: Observation) -> Decision:
        plan = self.planner(self.pool.spec, observation, self.status)
        routing = RoutingState(True, Reason.ROUTE_APPLIED, f"HTTPRoute {self.pool.metadata.name}")
        status = build_status(self.pool, observation, plan, routing, self.status)
        # What the operator reads back next pass is the JSON it patched, not the object.
        raw = status.model_dump(mode="json", by_alias=True, exclude_none=True)
        self.status = InferencePoolStatus.model_validate(raw)
        self.plans.append(plan)
        return Decision(
            replicas={name: t.replicas for name, t in plan.tiers.items()},
            weights={name: dict(c.weights) for name, c in plan.classes.items()},
        )


def operator_view(
    observation: Observation, pool: InferencePool, status: InferencePoolStatus
) -> Observation:
    """The observation as the operator's Prometheus adapter builds it from the same series.

    Mirrors `gpufleet.adapters.prometheus` (which the simulator may not import): a class
    with a demandQuery is measured (here: its true demand); the others are inferred from
    the tiers' token rates (plus their waiting requests' tokens, `with_backlog`) and the
    live weights by `gpufleet.planning.demand.infer_demand`, started from the demand last
    planned. A class's P99 is the worst P99 of the tiers its
    live weights send it to.
    """
    spec = pool.spec
    live = {c.name: {w.tier: w.weight for w in c.weights} for c in status.classes}
    prior = {c.name: float(c.demand_tokens_per_second or 0) for c in status.classes}
    measured = {
        c.name: d.tokens_per_second
        for c in spec.traffic_classes
        if c.demand_query is not None and (d := observation.demand.get(c.name)) is not None
    }
    shares = {
        c.name: c.mean_prompt_tokens / (c.mean_prompt_tokens + c.mean_output_tokens)
        for c in spec.traffic_classes
    }
    parts = {}
    interval = float(spec.scaling.interval_seconds)
    for prompt_part in (True, False):
        per_tier = {
            name: with_backlog(
                t.prompt_tokens_per_second if prompt_part else t.generation_tokens_per_second,
                t.requests_per_second,
                t.requests_waiting,
                interval,
            )
            for name, t in observation.tiers.items()
        }

        def part(name: str, value: float, prompt_part: bool = prompt_part) -> float:
            return value * (shares[name] if prompt_part else 1.0 - shares[name])

        parts[prompt_part] = infer_demand(
            per_tier,
            live,
            {c: part(c, v) for c, v in prior.items() if c in shares},
            {c: part(c, v) for c, v in measured.items()},
        )
    demand: dict[str, ClassDemand | None] = {}
    for c in spec.traffic_classes:
        if c.name in measured:
            total = measured[c.name]
            demand[c.name] = ClassDemand(total * shares[c.name], total * (1 - shares[c.name]))
            continue
        prompt, generated = parts[True].get(c.name), parts[False].get(c.name)
        demand[c.name] = (
            None if prompt is None or generated is None else ClassDemand(prompt, generated)
        )
    class_p99: dict[str, float | None] = {}
    for c in spec.traffic_classes:
        seen = [
            p99
            for t, w in live.get(c.name, {}).items()
            if w > 0
            and t in observation.tiers
            and (p99 := observation.tiers[t].ttft_p99_seconds) is not None
        ]
        class_p99[c.name] = max(seen) if seen else None
    return replace(observation, demand=demand, class_ttft_p99_seconds=class_p99)
