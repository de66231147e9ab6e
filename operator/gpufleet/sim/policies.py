"""The policies compared on one trace: the real planner, and what people run today.

Every policy answers, at each decision time, replicas per tier and integer weights per
class over tiers. They see the same simulated Prometheus (`Seen`); only the oracle reads
the trace ahead. Baselines are matched to tiers by accelerator, never by name.

- `gpufleet`: `gpufleet.planning.planner.plan` every intervalSeconds, the status it wrote
  carried to the next pass through the same `build_status` and JSON round trip as the
  operator's.
- `utilization`: an HPA per tier on compute utilization (target 70%, 10% tolerance, scale
  up at once, scale down to the highest recommendation of the last 5 minutes), with fixed
  weights: each class on the tier where a request of its shape is cheapest among those
  meeting its objective (by the profiles at the class's mean shape in the trace).
- `h100-only`, `rtx4090-only`: the same HPA on the first tier of that accelerator, every
  class on it, so the comparison with `utilization` is autoscaler against autoscaler.
- `static-split`: the fixed weights of `utilization` and fixed replicas sized, with the
  profiles, for the trace's busiest interval (the capacity plan someone does once).
- `oracle`: a fleet that meets the SLO with perfect foresight, the lower bound on cost
  of a fleet that does (see `OraclePolicy`). Per interval it knows the requests to come,
  searches replica counts from the planner's own optimizer upwards and keeps the cheapest
  whose replay of that interval meets every class's objective, or the physical ceiling
  of a class no fleet can hold. Ready at once and gone at once.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

import numpy as np

from gpufleet.api.status import InferencePoolStatus, Reason
from gpufleet.api.types import Accelerator, InferencePool, InferencePoolSpec, Tier
from gpufleet.planning.capacity import MIN_ELIGIBLE_UTILIZATION, ReplicaModel
from gpufleet.planning.classes import BEST_EFFORT_SLACK
from gpufleet.planning.demand import infer_demand, with_backlog
from gpufleet.planning.model import ClassDemand, Observation, Plan, TierObservation
from gpufleet.planning.optimizer import ClassNeed, TierOption, optimize
from gpufleet.planning.status import RoutingState, build_status
from gpufleet.sim.traces import Trace

Planner = Callable[[InferencePoolSpec, Observation, InferencePoolStatus], Plan]

HPA_TARGET = 0.7
HPA_TOLERANCE = 0.1
HPA_SCALE_DOWN_WINDOW_SECONDS = 300.0
H100 = (Accelerator.H100_PCIE, Accelerator.H100_SXM)
RTX4090 = (Accelerator.RTX4090,)


@dataclass(frozen=True)
class Decision:
    replicas: Mapping[str, int]
    weights: Mapping[str, Mapping[str, int]]  # class -> tier -> weight
    instant: bool = False  # new replicas Ready at once (the oracle)


@dataclass(frozen=True)
class ClassLoad:
    """A class's demand over an interval: requests/s and mean shape."""

    rate_rps: float
    prompt_tokens: float
    output_tokens: float


@dataclass(frozen=True)
class Seen:
    """What a policy sees at a decision: the operator's observation and tier utilization."""

    time: float  # seconds since the trace start
    observation: Observation
    busy_replicas: Mapping[str, float]  # compute done over the interval / interval length


class Policy(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    def warm(self, seen: Seen) -> Decision:
        """The fleet it runs before the trace starts, from the first interval's demand."""
        ...

    def decide(self, seen: Seen) -> Decision: ...


def class_loads(trace: Trace, start: float, end: float) -> dict[str, ClassLoad]:
    """Each class's demand among the trace's requests arriving in [start, end)."""
    lo, hi = np.searchsorted(trace.arrival_seconds, [start, end], side="left")
    seconds = max(end - start, 1e-9)
    loads = {}
    for ci, name in enumerate(trace.classes):
        mask = trace.class_index[lo:hi] == ci
        count = int(mask.sum())
        prompt = float(trace.prompt_tokens[lo:hi][mask].mean()) if count else 0.0
        output = float(trace.output_tokens[lo:hi][mask].mean()) if count else 0.0
        loads[name] = ClassLoad(count / seconds, prompt, output)
    return loads


def demand_of(loads: Mapping[str, ClassLoad]) -> dict[str, ClassDemand | None]:
    return {
        name: ClassDemand(load.rate_rps * load.prompt_tokens, load.rate_rps * load.output_tokens)
        for name, load in loads.items()
    }


def tiers_of(spec: InferencePoolSpec, accelerators: Sequence[Accelerator]) -> list[Tier]:
    return [t for t in spec.tiers if t.accelerator in accelerators]


def largest_remainder(shares: Mapping[str, float], total: int = 100) -> dict[str, int]:
    """Integer weights summing to `total` in proportion to `shares` (ties in given order)."""
    mass = sum(v for v in shares.values() if v > 0)
    if mass <= 0:
        return {k: 0 for k in shares}
    exact = {k: max(v, 0.0) / mass * total for k, v in shares.items()}
    weights = {k: math.floor(v) for k, v in exact.items()}
    left = total - sum(weights.values())
    for k in sorted(exact, key=lambda k: -(exact[k] - weights[k]))[:left]:
        weights[k] += 1
    return weights


# -- gpufleet ----------------------------------------------------------------------------------


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


# -- baselines -------------------------------------------------------------------------------


def cheapest_tier(
    spec: InferencePoolSpec,
    tiers: Sequence[Tier],
    models: Mapping[str, ReplicaModel],
    class_name: str,
    load: ClassLoad,
) -> Tier:
    """The tier where this class's requests are cheapest among those holding its objective."""
    objective = next(c for c in spec.traffic_classes if c.name == class_name)
    seconds = objective.ttft_p99_milliseconds / 1000.0
    shape = (max(load.prompt_tokens, 1.0), max(load.output_tokens, 1.0))

    def price_per_request(t: Tier) -> float:
        capacity = models[t.name].capacity_rps(seconds, *shape)
        per_hour = float(t.price_per_gpu_hour) * t.gpus_per_replica
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
            limit = model.max_utilization(c.ttft_p99_milliseconds / 1000.0, *shape)
            rho = min(rho, limit if limit > 0 else 0.5)  # ineligible: best effort at 50%
        needed[t.name] = min(max(math.ceil(work / rho - 1e-9), t.min_replicas), t.max_replicas)
    return needed


# -- the oracle ------------------------------------------------------------------------------


# Per interval and class, the oracle's replay may miss the objective for the requests no
# fleet can serve in time (their prompt alone takes longer on an idle replica of the
# fastest tier) and for 1% of the others (a P99 objective), rounded to whole requests.
ORACLE_TAIL = 0.01
ORACLE_STEP = 1.25  # a failing class's demand is scaled up by this, until the fleet grows
ORACLE_MAX_TRIES = 48  # optimizer calls per interval (1.25**48 ~ 45,000x demand)


@dataclass(frozen=True)
class _Candidate:
    decision: Decision
    cost_per_hour: float
    short: frozenset[str]  # classes the optimizer could not serve in full


@dataclass
class OraclePolicy:
    """A fleet that meets the SLO with perfect foresight: the lower bound on cost.

    At each decision time the oracle knows the requests of the next interval (arrivals,
    prompt and output lengths, classes). It asks the planner's own optimizer for the
    cheapest fleet serving that interval's actual demand (no headroom; head-of-line
    blocking between classes modelled as the planner does), replays the interval's
    requests on that fleet in the simulator (its replicas Ready, no preemption; the
    replay starts one interval early on the same fleet, so that queues carry over as in
    the run), and while a class misses its objective scales that class's demand by
    1.25 and asks again, until every class meets it or the optimizer cannot give it more
    (maxReplicas, the budget). A class meets its objective in an interval when its misses
    are at most the requests no fleet can serve in time (their zero-load TTFT on the
    fastest tier, by the profiles, exceeds the objective: the physical ceiling) plus 1%
    of the others, rounded. It keeps the first fleet that meets every class (the search
    only adds capacity, so the cheapest found), or else the one closest to it. The
    fleet is Ready at once and gone at once (no cold start, no scale-down delay, lost
    nodes restart at once): no real policy can be cheaper for the same attainment.

    Not a proof of optimality: the search follows the optimizer's fleets for scaled
    demand, and the replay only approximates the queues an interval inherits (and has its
    own routing draws), so the run may miss where its replay did not.
    """

    pool: InferencePool
    models: Mapping[str, ReplicaModel]
    trace: Trace
    interval_seconds: float
    seed: int = 0
    name: str = "oracle"
    description: str = (
        "perfect foresight: per interval, the cheapest fleet found (the planner's optimizer "
        "on the interval's actual demand, scaled up per class) whose replay meets each "
        "class's objective, or its physical ceiling; Ready at once"
    )
    met: list[bool] = field(default_factory=list)  # per decision: every class met?

    @property
    def spec(self) -> InferencePoolSpec:
        return self.pool.spec

    def warm(self, seen: Seen) -> Decision:
        return self.decide(seen)

    def decide(self, seen: Seen) -> Decision:
        start, end = seen.time, seen.time + self.interval_seconds
        loads = class_loads(self.trace, start, end)
        window = _window(self.trace, start, end)
        allowed = self._allowed_misses(window)
        # The replay starts an interval early, on the same fleet, so that the interval
        # starts with the queues its previous requests leave (only its own are counted).
        lead = min(self.interval_seconds, start)
        replayed = _window(self.trace, start - lead, end)
        scale = {c.name: 1.0 for c in self.spec.traffic_classes}
        replays: dict[tuple[object, ...], dict[str, int]] = {}
        best: tuple[int, float, Decision] | None = None
        for _ in range(ORACLE_MAX_TRIES):
            candidate = self._candidate(loads, scale)
            decision = candidate.decision
            key = _key(decision)
            if key not in replays:
                replays[key] = self._misses(replayed, lead, decision) if len(window) else {}
            over = {c: replays[key].get(c, 0) - allowed.get(c, 0) for c in scale if c in allowed}
            excess = sum(max(v, 0) for v in over.values())
            if best is None or (excess, candidate.cost_per_hour) < best[:2]:
                best = (excess, candidate.cost_per_hour, decision)
            failing = [c for c, v in over.items() if v > 0 and c not in candidate.short]
            if excess == 0 or not failing:
                break
            for c in failing:
                scale[c] *= ORACLE_STEP
        assert best is not None
        self.met.append(best[0] == 0)
        return best[2]

    # -- one candidate ----------------------------------------------------------------

    def _candidate(self, loads: Mapping[str, ClassLoad], scale: Mapping[str, float]) -> _Candidate:
        spec = self.spec
        tiers = [
            TierOption(
                t.name,
                float(t.price_per_gpu_hour) * t.gpus_per_replica,
                t.min_replicas,
                t.max_replicas,
            )
            for t in spec.tiers
        ]
        shapes = {
            c.name: (
                max(loads[c.name].prompt_tokens, 1.0),
                max(loads[c.name].output_tokens, 1.0),
            )
            for c in spec.traffic_classes
        }
        objectives = {}
        eligible = {}
        for c in spec.traffic_classes:
            shape = shapes[c.name]
            objective = c.ttft_p99_milliseconds / 1000.0
            usable = self._eligible(objective, shape)
            if not usable:  # as the planner does: best effort near the best zero-load P99
                floor = min(
                    m.ttft_p99_at_utilization(MIN_ELIGIBLE_UTILIZATION, *shape)
                    for m in self.models.values()
                )
                objective = floor * BEST_EFFORT_SLACK
                usable = self._eligible(objective, shape)
            objectives[c.name], eligible[c.name] = objective, usable
        needs = []
        for c in spec.traffic_classes:
            shape = shapes[c.name]
            shared: dict[str, dict[str, float]] = {}
            for tier, rho in eligible[c.name].items():
                model = self.models[tier]
                for other in spec.traffic_classes:
                    if other is c or tier not in eligible[other.name]:
                        continue
                    blocking = model.head_of_line_seconds(shapes[other.name][0])
                    limited = model.max_utilization(
                        objectives[c.name], *shape, blocking_seconds=blocking
                    )
                    if blocking > 0 and limited < rho - 1e-9:
                        shared.setdefault(tier, {})[other.name] = limited
            needs.append(
                ClassNeed(
                    name=c.name,
                    priority=c.priority,
                    rate_rps=loads[c.name].rate_rps * scale[c.name],
                    tokens_per_request=sum(shape),
                    service_seconds={
                        k: self.models[k].service_seconds(*shape) for k in eligible[c.name]
                    },
                    max_utilization=eligible[c.name],
                    shared_utilization=shared,
                )
            )
        budget = spec.objectives.max_hourly_cost
        solution = optimize(tiers, needs, None if budget is None else float(budget))
        weights = {}
        for c in spec.traffic_classes:
            shares = solution.routing.get(c.name, {})
            weights[c.name] = largest_remainder(
                {t.name: shares.get(t.name, 0.0) for t in spec.tiers}
            )
        short = frozenset(n for n, v in solution.served.items() if v < 1.0 - 1e-6)
        return _Candidate(
            Decision(replicas=dict(solution.replicas), weights=weights, instant=True),
            solution.cost_per_hour,
            short,
        )

    def _eligible(self, objective: float, shape: tuple[float, float]) -> dict[str, float]:
        rho = {
            t.name: self.models[t.name].max_utilization(objective, *shape) for t in self.spec.tiers
        }
        return {k: v for k, v in rho.items() if v > 0}

    # -- checking it against the interval's requests ---------------------------------------

    def _allowed_misses(self, window: Trace) -> dict[str, int]:
        """Per class: its requests no fleet can serve in time, plus 1% of the others."""
        allowed = {}
        for ci, name in enumerate(window.classes):
            objective = next(c for c in self.spec.traffic_classes if c.name == name)
            seconds = objective.ttft_p99_milliseconds / 1000.0
            prompts = window.prompt_tokens[window.class_index == ci].tolist()
            hopeless = sum(
                1
                for p in prompts
                if min(m.ttft_base_seconds(float(p)) for m in self.models.values()) > seconds
            )
            allowed[name] = hopeless + math.floor(ORACLE_TAIL * (len(prompts) - hopeless) + 0.5)
        return allowed

    def _misses(self, window: Trace, after: float, decision: Decision) -> dict[str, int]:
        """Per class, the requests of `window` arriving from `after` on that miss their
        objective on this fleet."""
        from gpufleet.sim.engine import SimConfig, simulate  # the engine imports this module
        from gpufleet.sim.fleet import Preemption

        fixed = StaticPolicy("replay", "", decision.replicas, decision.weights)
        config = SimConfig(seed=self.seed, preemption=Preemption(mean_up_seconds=0.0))
        result = simulate(self.pool, window, fixed, config, models=self.models)
        misses = {}
        for ci, name in enumerate(window.classes):
            objective = next(c for c in self.spec.traffic_classes if c.name == name)
            seconds = objective.ttft_p99_milliseconds / 1000.0
            mask = (window.class_index == ci) & (window.arrival_seconds >= after)
            misses[name] = int(np.sum(~(result.ttft[mask] <= seconds)))
        return misses


def _window(trace: Trace, start: float, end: float) -> Trace:
    """The requests arriving in [start, end), their times from `start`."""
    lo, hi = np.searchsorted(trace.arrival_seconds, [start, end], side="left").tolist()
    return Trace(
        arrival_seconds=trace.arrival_seconds[lo:hi] - start,
        prompt_tokens=trace.prompt_tokens[lo:hi],
        output_tokens=trace.output_tokens[lo:hi],
        class_index=trace.class_index[lo:hi],
        classes=trace.classes,
        start=trace.start,
        source=trace.source,
    )


def _key(decision: Decision) -> tuple[object, ...]:
    return (
        tuple(sorted(decision.replicas.items())),
        tuple(sorted((c, tuple(sorted(w.items()))) for c, w in decision.weights.items())),
    )


# -- building them ---------------------------------------------------------------------------

POLICY_NAMES = ("gpufleet", "h100-only", "rtx4090-only", "static-split", "utilization", "oracle")


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


def _arrow(weights: Mapping[str, Mapping[str, int]]) -> str:
    return ", ".join(
        f"{c}->" + "+".join(t for t, w in tiers.items() if w > 0) for c, tiers in weights.items()
    )


def make_policies(
    names: Sequence[str],
    pool: InferencePool,
    models: Mapping[str, ReplicaModel],
    trace: Trace,
    interval_seconds: float,
    planner: Planner | None,
) -> list[Policy]:
    """The policies asked for, in the order asked; ValueError names what cannot be built."""
    spec = pool.spec
    whole = class_loads(trace, 0.0, trace.duration_seconds + 1e-6)
    first = class_loads(trace, 0.0, interval_seconds)
    split = fixed_weights(spec, spec.tiers, models, whole)
    policies: list[Policy] = []
    for name in names:
        if name == "gpufleet":
            if planner is None:
                raise ValueError(
                    "policy gpufleet: the planner (gpufleet.planning.planner) is missing"
                )
            policies.append(GpufleetPolicy(pool, planner))
        elif name in ("h100-only", "rtx4090-only"):
            family = H100 if name == "h100-only" else RTX4090
            matching = tiers_of(spec, family)
            if not matching:
                raise ValueError(f"policy {name}: the pool has no {'/'.join(family)} tier")
            home = matching[0]
            weights = {
                c.name: {t.name: 100 if t is home else 0 for t in spec.tiers}
                for c in spec.traffic_classes
            }
            policies.append(
                UtilizationPolicy(
                    name=name,
                    description=f"HPA at {HPA_TARGET:.0%} on tier {home.name} alone, "
                    "every class on it",
                    spec=spec,
                    tiers=[home],
                    weights=weights,
                    initial=hpa_replicas(spec, models, weights, first),
                )
            )
        elif name == "utilization":
            used = [t for t in spec.tiers if any(w.get(t.name, 0) for w in split.values())]
            policies.append(
                UtilizationPolicy(
                    name=name,
                    description=f"HPA at {HPA_TARGET:.0%} per tier, fixed weights {_arrow(split)}",
                    spec=spec,
                    tiers=used,
                    weights=split,
                    initial=hpa_replicas(spec, models, split, first),
                )
            )
        elif name == "static-split":
            peak = {t.name: 0 for t in spec.tiers}
            end = trace.duration_seconds
            k = 0
            while k * interval_seconds <= end:
                loads = class_loads(trace, k * interval_seconds, (k + 1) * interval_seconds)
                for tier, n in needed_replicas(spec, models, split, loads).items():
                    peak[tier] = max(peak[tier], n)
                k += 1
            sized = ", ".join(f"{t}={n}" for t, n in peak.items())
            policies.append(
                StaticPolicy(
                    name=name,
                    description=f"fixed weights {_arrow(split)}; replicas {sized}, sized by the "
                    f"profiles for the busiest {interval_seconds:g} s interval",
                    replicas=peak,
                    weights=split,
                )
            )
        elif name == "oracle":
            policies.append(OraclePolicy(pool, models, trace, interval_seconds))
        else:
            raise ValueError(f"unknown policy {name}; choose from {', '.join(POLICY_NAMES)}")
    return policies
