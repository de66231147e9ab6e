"""The planner's input and output, as plain frozen data.

`plan(spec, observation, previous)` is pure: everything it needs is in these types (time
included, as `Observation.now`), and everything the operator writes comes out of `Plan`.
The reconciler fills `Observation` from Kubernetes and Prometheus; the simulator fills it
from its model of the fleet; tests build it by hand.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from gpufleet.api.status import NodeLoss, PromptLengths, Reason, Sizing
from gpufleet.planning.forecast import ClassForecast


class MetricsState(StrEnum):
    """Whether the metrics this pass could be trusted."""

    AVAILABLE = "Available"
    UNREACHABLE = "Unreachable"  # Prometheus did not answer
    NO_DATA = "NoData"  # Prometheus answered, but no series for this pool
    STALE = "Stale"  # series exist but stopped updating
    NOT_CONFIGURED = "NotConfigured"  # the operator runs without a Prometheus URL


@dataclass(frozen=True)
class PodStart:
    """When a replica's pod was created and when it became Ready: its lead time."""

    created: datetime
    ready: datetime

    @property
    def seconds(self) -> float:
        return max((self.ready - self.created).total_seconds(), 0.0)


@dataclass(frozen=True)
class TierObservation:
    """What one tier has right now, from the cluster and from Prometheus."""

    name: str
    desired_replicas: int = 0  # the Deployment's spec.replicas (0 when it does not exist yet)
    ready_replicas: int = 0
    starting_replicas: int = 0  # scheduled, not Ready yet (pulling, loading the model)
    unschedulable_replicas: int = 0  # Pending with PodScheduled=False/Unschedulable
    # Prometheus, over the last interval; None when there was no data.
    ttft_p99_seconds: float | None = None
    prompt_tokens_per_second: float | None = None
    generation_tokens_per_second: float | None = None
    requests_per_second: float | None = None
    requests_waiting: float | None = None
    kv_cache_usage: float | None = None  # 0..1
    # Histogram bucket bound (seconds) -> share of the tier's first tokens over the interval
    # slower than it, read at vLLM's TTFT bucket bounds, where it is exact (no interpolation
    # inside a bucket, unlike histogram_quantile). Empty: no data.
    ttft_fraction_above: Mapping[float, float] = field(default_factory=dict)
    # Bucket bound (prompt tokens) -> share of the interval's requests whose prompt was at
    # most that long (vllm:request_prompt_tokens). Empty: no data.
    prompt_share_at_most: Mapping[float, float] = field(default_factory=dict)
    # The mean prompt of those same requests (the histogram's _sum over its _count): not
    # prompt tokens/s over requests/s, which under a backlog counts prefills of requests
    # that finish later against requests whose prefill was counted earlier.
    prompt_mean_tokens: float | None = None
    # The tier's Ready pods: when each was created and became Ready (the tier's lead time).
    pod_starts: tuple[PodStart, ...] = ()
    # The tier's pods on nodes gone, NotReady or leaving (cordoned, tainted for removal):
    # what a preemptible tier's loss rate learns from (gpufleet.planning.hedging).
    lost_pods: tuple[str, ...] = ()


@dataclass(frozen=True)
class ClassDemand:
    """Demand of one traffic class, in tokens per second."""

    prompt_tokens_per_second: float
    generation_tokens_per_second: float

    @property
    def tokens_per_second(self) -> float:
        return self.prompt_tokens_per_second + self.generation_tokens_per_second


@dataclass(frozen=True)
class Observation:
    """Everything the planner reads about the world for one pass."""

    now: datetime
    tiers: Mapping[str, TierObservation]
    metrics: MetricsState
    metrics_message: str = ""
    # Per class demand; None for a class whose demand could not be measured or inferred.
    demand: Mapping[str, ClassDemand | None] = field(default_factory=dict)
    # Observed P99 TTFT per class (from per-class series or inferred from tiers and weights).
    class_ttft_p99_seconds: Mapping[str, float | None] = field(default_factory=dict)
    # Tokens of each class's requests waiting in the queues (planning.demand.backlog_tokens).
    class_backlog_tokens: Mapping[str, float] = field(default_factory=dict)
    # The span the tiers' rates and P99s cover, seconds (0: not known).
    metrics_window_seconds: float = 0.0


@dataclass(frozen=True)
class TierMetrics:
    """Prometheus readings of one tier over the last interval (None: no data)."""

    ttft_p99_seconds: float | None = None
    prompt_tokens_per_second: float | None = None
    generation_tokens_per_second: float | None = None
    requests_per_second: float | None = None
    requests_waiting: float | None = None
    kv_cache_usage: float | None = None
    # Bucket bound (seconds) -> share of first tokens slower than it (see TierObservation).
    ttft_fraction_above: Mapping[float, float] = field(default_factory=dict)
    # Bucket bound (prompt tokens) -> share of requests with a prompt at most that long.
    prompt_share_at_most: Mapping[float, float] = field(default_factory=dict)
    prompt_mean_tokens: float | None = None  # their mean prompt (see TierObservation)


@dataclass(frozen=True)
class MetricsReading:
    """What a metrics source (gpufleet.adapters.prometheus) saw for one pool, as it said it.

    Per-class demand and P99 are not in it: `planning.observed.observe_classes` infers
    them from these readings and the live weights.
    """

    state: MetricsState
    message: str = ""
    tiers: Mapping[str, TierMetrics] = field(default_factory=dict)
    # class -> what its demandQuery answered, tokens/s (None: no usable answer); only
    # classes with a demandQuery.
    demand_queries: Mapping[str, float | None] = field(default_factory=dict)
    window_seconds: float = 0.0  # the span its rates cover (0: not known)


@dataclass(frozen=True)
class TierPlan:
    """The decision for one tier."""

    name: str
    replicas: int
    capacity_factor_percent: int = 100
    scale_down_since: datetime | None = None
    scale_down_to: int | None = None
    # Capped below what the optimizer wanted because the pool has no more GPUs/nodes.
    capped_at: int | None = None
    # Replicas a preemptible tier lost with its nodes (Ready before, unschedulable now).
    lost_replicas: int = 0
    # The recommendations of the scale-down window still holding the tier up (oldest first).
    recommendations: tuple[tuple[datetime, int], ...] = ()
    lead_time_seconds: float | None = None  # created -> Ready, learned or the prior
    lead_time_observed_at: datetime | None = None  # newest pod Ready time learned from
    reserve_replicas: int = 0  # held for the burst reserve (part of `replicas`)
    drain_replicas: int = 0  # bought to drain the queues (part of `replicas`, not held)
    # Preemptible tiers (gpufleet.planning.hedging): replicas run for the losses expected
    # within a lead time (part of `replicas`), those expected losses, and the evidence kept.
    margin_replicas: int = 0
    # Replicas bought so that a class's prompts do not wait past its objective behind
    # another's prefill (gpufleet.planning.contention; part of `replicas`): the class that
    # asked for them, and its share of requests missed that way at the replicas without them.
    tail_replicas: int = 0
    tail_class: str | None = None
    tail_misses: float = 0.0
    expected_losses: float = 0.0
    node_loss: NodeLoss | None = None
    # Where the tier's replica model comes from (ReplicaModel.source), or why it has none.
    profile: str | None = None
    profile_measured: bool | None = None


@dataclass(frozen=True)
class ClassPlan:
    """The decision for one traffic class."""

    name: str
    weights: Mapping[str, int]  # tier -> integer weight; sums to 100 over tiers with traffic
    demand_tokens_per_second: float | None = None
    predicted_ttft_p99_seconds: float | None = None  # None: routed nowhere, or overloaded
    served_fraction: float = 1.0  # < 1 when capacity ran short
    overloaded: bool = False  # routed to a tier whose planned load it cannot hold
    eligible_tiers: tuple[str, ...] = ()  # tiers that hold its (or its best-effort) objective
    # Set when no tier holds the class's objective: the relaxed P99 it is planned for.
    best_effort_ttft_p99_seconds: float | None = None
    forecast: ClassForecast | None = None  # what the pass expected and planned for
    backlog_tokens: float = 0.0  # tokens of its requests waiting in the queues
    prompt_lengths: PromptLengths | None = None  # learned (gpufleet.planning.prompts)
    # Share of its prompts no tier prefills within the objective even idle (None: unknown).
    unservable_share: float | None = None


@dataclass(frozen=True)
class Verdict:
    """A condition's value: status (True/False/Unknown as None), reason, message."""

    status: bool | None
    reason: Reason
    message: str


@dataclass(frozen=True)
class Plan:
    """The planner's output for one pass."""

    tiers: Mapping[str, TierPlan]
    classes: Mapping[str, ClassPlan]
    reason: Reason
    message: str
    cost_per_hour: float
    cost_per_million_tokens: float | None
    energy_kwh_per_million_tokens: float | None
    carbon_grams_per_million_tokens: float | None
    # No decision on metrics this pass: a new pool's first replicas, or the last decision
    # kept because the metrics are missing.
    awaiting_metrics: bool = False
    reserve_cost_per_hour: float = 0.0  # of the replicas held as burst reserve
    margin_cost_per_hour: float = 0.0  # of the replicas preemptible tiers run for losses
    # The optimizer's answer and what it was solved for, carried in status so that a later
    # pass may keep it without solving (`reuse`); None: nothing to keep.
    sizing: Sizing | None = None
