"""The `gpufleet` policy: the real planner in the loop, seeing what the operator would see.

`gpufleet.planning.planner.plan` runs every intervalSeconds, and sooner when the queue
watch sees a surge (`sim.early`), on the observation the operator would build from the
simulated series (`operator_view`), and the status it wrote is carried to the next pass
through the same `build_status` and JSON round trip as the operator's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from gpufleet.api.status import InferencePoolStatus, Reason
from gpufleet.api.types import InferencePool, InferencePoolSpec
from gpufleet.desired.status import RoutingState, build_status
from gpufleet.planning.observed import Routed, observe_classes
from gpufleet.planning.records import Observation, Plan, TierObservation
from gpufleet.planning.routing import prompt_tokens_sent
from gpufleet.planning.weighthistory import WeightHistory
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
    description: str = (
        "the planner every intervalSeconds and when the queue watch sees a surge, "
        "status carried over"
    )
    foresight = False  # sees only what Prometheus would have shown
    early_passes = True  # the operator's queue watch wakes it on a surge
    # The weights each pass applied, as the reconciler keeps them (`planning.observed`).
    weights: WeightHistory = field(default_factory=WeightHistory)

    def warm(self, seen: Seen) -> Decision:
        """Two passes on the first horizon's demand: size the fleet, then route on it Ready.

        Demand is taken as measured here (there is no history to infer it from yet).
        """
        first = self._pass(seen.observation)
        running = {
            name: TierObservation(name=name, desired_replicas=n, ready_replicas=n)
            for name, n in first.replicas.items()
        }
        return self._pass(replace(seen.observation, tiers=running))

    def decide(self, seen: Seen) -> Decision:
        routed = self.weights.of(self.name)
        return self._pass(operator_view(seen.observation, self.pool, self.status, routed))

    def _pass(self, observation: Observation) -> Decision:
        plan = self.planner(self.pool.spec, observation, self.status)
        routing = RoutingState(True, Reason.ROUTE_APPLIED, f"HTTPRoute {self.pool.metadata.name}")
        status = build_status(self.pool, observation, plan, routing, self.status)
        # What the operator reads back next pass is the JSON it patched, not the object.
        raw = status.model_dump(mode="json", by_alias=True, exclude_none=True)
        self.status = InferencePoolStatus.model_validate(raw)
        now, window = observation.now, observation.metrics_window_seconds
        self.weights.applied(self.name, now, self.status, window)
        self.plans.append(plan)
        return Decision(
            replicas={name: t.replicas for name, t in plan.tiers.items()},
            weights={name: dict(c.weights) for name, c in plan.classes.items()},
            sent=prompt_tokens_sent(observation.demand, plan),
        )


def operator_view(
    observation: Observation,
    pool: InferencePool,
    status: InferencePoolStatus,
    routed: Sequence[Routed] = (),
) -> Observation:
    """The observation as the operator builds it from the same series.

    The engine shows each class's true demand and P99; the operator sees per-tier series
    and each demandQuery's answer, and infers the rest with the same
    `gpufleet.planning.observed.observe_classes`, from the weights of the status this
    policy last wrote and those its passes applied over the window (`routed`). A class
    with a demandQuery is measured: here it gets its true demand, what that query would
    answer.
    """
    answers = {name: d.tokens_per_second for name, d in observation.demand.items() if d is not None}
    classes = observe_classes(
        pool.spec, status, observation.tiers, answers,
        routed=routed, now=observation.now, window_seconds=observation.metrics_window_seconds,
    )  # fmt: skip
    return replace(
        observation,
        demand=classes.demand,
        class_ttft_p99_seconds=classes.ttft_p99_seconds,
        class_backlog_tokens=classes.backlog_tokens,
    )
