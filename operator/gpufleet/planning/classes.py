"""What serving each traffic class takes on each tier: one answer for the planner and the oracle.

Per class and tier: the replica time one request costs (`service_seconds`), the highest
utilization at which the class's P99 objective holds (`max_utilization`, only tiers where
it is above zero: the class's eligible tiers), and the lower utilization it tolerates when
another class's longer prompts share the tier (head-of-line blocking,
`shared_utilization`). A class no tier can serve at its objective is planned best effort
against a relaxed objective, a little above the best zero-load P99 any tier offers, so it
is still served where it is served fastest (`best_effort_seconds`).

Where keeping classes apart (or a best-effort class's own limit) would leave some class
with nothing, a class gives way (`optimizer`, `yielding_utilization`): it shares the tier
with the other's prompts at its own limit, the wait behind them accepted, rather than
leave the other unserved. Kept apart, one H100 tier serving realtime (100 ms) beside batch's longer
prompts served batch nothing, as did one RTX 4090 tier serving a realtime class no 4090
holds in 100 ms. A best-effort class gives way further, to the limit of a class whose
objective the tier holds: held to its relaxed objective on that 4090 tier, it ran 14.7
replica-hours over an hour of the simulator's constant trace, where a fixed fleet of five
replicas served batch as well (99.0% of its requests within 2 s) and realtime nearly so
(22.1% within 100 ms against 27.1%, of a ceiling near 23%).

The planner computes this at the classes' mean request shape; the simulator's oracle at
each interval's actual shape. Both then ask the optimizer with `ClassCapacity.need`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from gpufleet.api.types import TrafficClass
from gpufleet.planning import waits
from gpufleet.planning.capacity import MIN_ELIGIBLE_UTILIZATION, ReplicaModel
from gpufleet.planning.program import ClassNeed
from gpufleet.planning.prompts import Distribution

# A class no tier can serve is planned against this multiple of the best zero-load P99.
BEST_EFFORT_SLACK = 1.25

# A limit over the prompt lengths this far below the mean's is named in the message.
NAMED_BELOW = 0.9

Shape = tuple[float, float]  # mean prompt tokens, mean output tokens


@dataclass(frozen=True)
class ClassCapacity:
    """What one class needs from each tier (see the module docstring)."""

    name: str
    priority: int
    shape: Shape
    objective_seconds: float  # the P99 it is planned for: its objective or best effort
    best_effort_seconds: float | None  # set when no tier holds its own objective
    service_seconds: Mapping[str, float]  # every tier with a model
    max_utilization: Mapping[str, float]  # eligible tiers only (> 0)
    shared_utilization: Mapping[str, Mapping[str, float]]  # tier -> other class -> rho*
    # Tiers where sizing over the prompt lengths (`waits`) lowered max_utilization: tier ->
    # the limit at the mean prompt, for the message.
    at_mean: Mapping[str, float] = field(default_factory=dict)
    # tier -> other class -> this class's limit when it gives way to the other there (its
    # limit alone, or for a best-effort class the other's where higher), only where that
    # is above its limit beside the other (see the module docstring).
    yielding_utilization: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    @property
    def eligible(self) -> tuple[str, ...]:
        return tuple(self.max_utilization)

    def is_eligible(self, tier: str) -> bool:
        return self.max_utilization.get(tier, 0.0) > 0

    @property
    def tokens_per_request(self) -> float:
        return sum(self.shape)

    def cheapest(self, among: Mapping[str, int], prices: Mapping[str, float]) -> str | None:
        """The eligible tier with replicas in `among` where a request of this class costs
        least (price x replica time / utilization it may run at); ties go to spec order.
        `prices`: dollars per replica-hour, in spec order."""
        order = list(prices)
        options = [t for t in order if among.get(t, 0) > 0 and self.is_eligible(t)]
        return min(
            options,
            key=lambda t: (
                prices[t] * self.service_seconds[t] / self.max_utilization[t],
                order.index(t),
            ),
            default=None,
        )

    def need(self, rate_rps: float) -> ClassNeed:
        """The optimizer's view of this class at a request rate (headroom included)."""
        return ClassNeed(
            name=self.name,
            priority=self.priority,
            rate_rps=rate_rps,
            tokens_per_request=self.tokens_per_request,
            service_seconds={t: self.service_seconds[t] for t in self.max_utilization},
            max_utilization=self.max_utilization,
            shared_utilization=self.shared_utilization,
            yielding_utilization=self.yielding_utilization,
        )


def blocking_seconds(model: ReplicaModel, shapes: Iterable[Shape]) -> float:
    """Head-of-line wait on a replica behind the longest of these prompts."""
    return max((model.head_of_line_seconds(shape[0]) for shape in shapes), default=0.0)


def class_capacities(
    classes: Sequence[TrafficClass],
    models: Mapping[str, ReplicaModel],
    shapes: Mapping[str, Shape] | None = None,
    prompts: Mapping[str, Distribution] | None = None,
    servers: Mapping[str, int] | None = None,
) -> dict[str, ClassCapacity]:
    """Per class, what it needs from each tier with a model; `shapes` overrides the
    classes' mean prompt and output lengths. `prompts`: the classes whose prompt lengths
    are learned, sized over them (`waits`) on `servers` replicas per tier."""
    shape = {c.name: (shapes or {}).get(c.name, c.shape) for c in classes}
    lengths = prompts or {}
    planned: dict[str, tuple[float, float | None, dict[str, float], dict[str, float]]] = {}
    at_mean: dict[str, dict[str, float]] = {}
    for cls in classes:
        planned[cls.name] = _alone(cls, models, shape[cls.name])
        objective, best_effort, service, rho = planned[cls.name]
        if cls.name in lengths and best_effort is None:
            sized = waits.limited(
                rho, models, lengths[cls.name], shape[cls.name][1], objective, servers or {}
            )
            at_mean[cls.name] = {t: r for t, r in rho.items() if sized[t] < r * NAMED_BELOW}
            planned[cls.name] = (objective, best_effort, service, sized)
    capacities = {}
    for cls in classes:
        objective, best_effort, service, rho = planned[cls.name]
        shared: dict[str, dict[str, float]] = {}
        yielding: dict[str, dict[str, float]] = {}
        for tier, alone in rho.items():
            for other in classes:
                theirs = planned[other.name][3].get(tier, 0.0)
                if other is cls or theirs <= 0:
                    continue
                learned = lengths.get(cls.name) if best_effort is None else None
                behind = _behind(
                    models,
                    tier,
                    objective,
                    shape,
                    (cls.name, other.name),
                    (learned, lengths.get(other.name)),
                    servers,
                )
                limited = min(alone, behind)
                if limited < alone - 1e-9:
                    shared.setdefault(tier, {})[other.name] = limited
                give = alone  # what it takes when it gives way (see the module docstring)
                if best_effort is not None and planned[other.name][1] is None:
                    give = max(alone, theirs)
                if give > limited + 1e-9:
                    yielding.setdefault(tier, {})[other.name] = give
        capacities[cls.name] = ClassCapacity(
            name=cls.name,
            priority=cls.priority,
            shape=shape[cls.name],
            objective_seconds=objective,
            best_effort_seconds=best_effort,
            service_seconds=service,
            max_utilization=rho,
            shared_utilization=shared,
            at_mean=at_mean.get(cls.name, {}),
            yielding_utilization=yielding,
        )
    return capacities


def _alone(
    cls: TrafficClass, models: Mapping[str, ReplicaModel], shape: Shape
) -> tuple[float, float | None, dict[str, float], dict[str, float]]:
    """Objective planned for, best effort (if relaxed), service time and rho* per tier."""
    objective = cls.objective_seconds
    service = {n: m.service_seconds(*shape) for n, m in models.items()}
    rho = {n: m.max_utilization(objective, *shape) for n, m in models.items()}
    best_effort = None
    if models and not any(r > 0 for r in rho.values()):
        floor = min(
            m.ttft_p99_at_utilization(MIN_ELIGIBLE_UTILIZATION, *shape) for m in models.values()
        )
        best_effort = objective = floor * BEST_EFFORT_SLACK
        rho = {n: m.max_utilization(objective, *shape) for n, m in models.items()}
    return objective, best_effort, service, {n: r for n, r in rho.items() if r > 0}


def _behind(
    models: Mapping[str, ReplicaModel],
    tier: str,
    objective: float,
    shape: Mapping[str, Shape],
    pair: tuple[str, str],
    lengths: tuple[Distribution | None, Distribution | None],
    servers: Mapping[str, int] | None,
) -> float:
    """The class's utilization limit on `tier` when `other`'s prompts share it (its limit
    alone, or above, when they do not block it). `lengths`: the learned prompt lengths of
    the class and of the other, where known."""
    (cls, other), (own, theirs) = pair, lengths
    model = models[tier]
    blocking = blocking_seconds(model, [shape[other]])
    if blocking <= 0:
        return 1.0
    limited = model.max_utilization(objective, *shape[cls], blocking_seconds=blocking)
    if own is None:
        return limited
    if theirs is not None:
        # The queue it waits in may be all the other's prompts, their tail included.
        queue, longer = {tier: (theirs, shape[other][1])}, 0.0
    else:
        # Its queue of prefills is its own prompts' already (`waits`): only the other's
        # longer ones wait on top.
        queue, longer = {}, max(blocking - blocking_seconds(model, [shape[cls]]), 0.0)
    return waits.limited(
        {tier: limited}, models, own, shape[cls][1], objective, servers or {}, {tier: longer}, queue
    )[tier]
