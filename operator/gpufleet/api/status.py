"""The InferencePool status: what the operator observed and decided.

The operator owns status and writes it once per pass, only when it changed. Besides what a
user reads, status carries the small state the planner needs across passes (capacity
feedback, pending scale-downs), so a restarted operator decides exactly as the old one would.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated

from pydantic import Field, StringConstraints

from gpufleet.api.bursts import BurstMemory, DailyPattern
from gpufleet.api.statusbase import StatusModel, Text


class ConditionType(StrEnum):
    """The conditions every pool carries."""

    READY = "Ready"
    OBJECTIVES_MET = "ObjectivesMet"
    METRICS_AVAILABLE = "MetricsAvailable"
    DEGRADED = "Degraded"
    ROUTING_APPLIED = "RoutingApplied"


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class Reason(StrEnum):
    """Every reason a condition or decision can carry (documented in the README)."""

    # Ready
    TIERS_READY = "TiersReady"
    PARTIALLY_READY = "PartiallyReady"
    REPLICAS_STARTING = "ReplicasStarting"
    NO_READY_REPLICAS = "NoReadyReplicas"
    INVALID_SPEC = "InvalidSpec"
    CHILD_APPLY_FAILED = "ChildApplyFailed"
    PLAN_FAILED = "PlanFailed"
    # ObjectivesMet
    OBJECTIVES_MET = "ObjectivesMet"
    AWAITING_METRICS = "AwaitingMetrics"
    LATENCY_ABOVE_TARGET = "LatencyAboveTarget"
    INSUFFICIENT_CAPACITY = "InsufficientCapacity"
    COST_ABOVE_TARGET = "CostAboveTarget"
    NO_ELIGIBLE_TIER = "NoEligibleTier"
    PROMPTS_TOO_LONG = "PromptsTooLong"
    # MetricsAvailable
    METRICS_FOUND = "MetricsFound"
    PROMETHEUS_UNREACHABLE = "PrometheusUnreachable"
    NO_METRICS = "NoMetrics"
    STALE_METRICS = "StaleMetrics"
    METRICS_NOT_CONFIGURED = "MetricsNotConfigured"
    # Degraded
    AS_PLANNED = "AsPlanned"
    UNSCHEDULABLE = "Unschedulable"
    CAPACITY_LOST = "CapacityLost"
    LOSING_NODES = "LosingNodes"
    CHILD_CONFLICT = "ChildConflict"
    PODS_REFUSED = "PodsRefused"
    IMAGE_PULL_FAILED = "ImagePullFailed"
    CONTAINER_CONFIG_INVALID = "ContainerConfigInvalid"
    CRASH_LOOPING = "CrashLooping"
    BUDGET_BELOW_MIN_REPLICAS = "BudgetBelowMinReplicas"
    # RoutingApplied
    ROUTE_APPLIED = "RouteApplied"
    GATEWAY_API_MISSING = "GatewayAPIMissing"
    NO_PARENT_REFS = "NoParentRefs"
    ROUTE_APPLY_FAILED = "RouteApplyFailed"
    # Decisions
    INITIAL = "Initial"
    DEMAND_INCREASED = "DemandIncreased"
    DEMAND_DECREASED = "DemandDecreased"
    SCALE_DOWN_DELAYED = "ScaleDownDelayed"
    STEADY = "Steady"
    METRICS_MISSING = "MetricsMissing"
    OVERFLOW = "Overflow"
    BUDGET_LIMITED = "BudgetLimited"
    TRAFFIC_MOVED = "TrafficMoved"
    AWAITING_READY = "AwaitingReady"
    HISTOGRAM_BUCKETS_CHANGED = "HistogramBucketsChanged"
    NODES_LEAVING = "NodesLeaving"


class Condition(StatusModel):
    """A metav1.Condition."""

    type: Annotated[str, StringConstraints(max_length=64)] = Field(description="Condition type.")
    status: ConditionStatus = Field(description="True, False or Unknown.")
    reason: Annotated[str, StringConstraints(max_length=64)] = Field(
        description="CamelCase reason for the last transition or update."
    )
    message: Text = Field(default="", description="Human-readable details.")
    last_transition_time: datetime = Field(description="When status last changed.")
    observed_generation: int = Field(
        default=0, description="The .metadata.generation this condition was computed from."
    )


class TierStatus(StatusModel):
    """What one tier runs and how it performs."""

    name: str = Field(description="Tier name.")
    desired_replicas: int = Field(default=0, description="Replicas the operator asks for.")
    ready_replicas: int = Field(default=0, description="Replicas Ready to serve.")
    unschedulable_replicas: int = Field(
        default=0, description="Replicas Pending because no node in the pool can take them."
    )
    lost_replicas: int = Field(
        default=0, description="Replicas lost with preemptible nodes that went away."
    )
    leaving_replicas: int = Field(
        default=0,
        description=(
            "Ready replicas on nodes being removed (cordoned, or tainted by the cluster "
            "autoscaler, Karpenter or a spot interruption notice): not counted as Ready, and "
            "replaced at once, on top of desiredReplicas."
        ),
    )
    observed_ttft_p99_milliseconds: int | None = Field(
        default=None,
        alias="ttftP99Milliseconds",
        description="Observed P99 time to first token over the last interval.",
    )
    tokens_per_second: int | None = Field(
        default=None, description="Observed throughput, prompt plus generated tokens per second."
    )
    capacity_factor_percent: int = Field(
        default=100,
        description=(
            "Feedback on the profile: a replica's estimated capacity as a percentage of the "
            "profile's. Shrinks when observed P99 exceeds an objective, grows back slowly."
        ),
    )
    scale_down_since: datetime | None = Field(
        default=None, description="Since when recommendations have been below desiredReplicas."
    )
    scale_down_to: int | None = Field(
        default=None,
        description="The highest lower recommendation seen since scaleDownSince.",
    )
    recommendations: list[Recommendation] = Field(
        default_factory=list,
        max_length=64,
        description=(
            "Recommendations of the last scaleDownDelaySeconds that still hold the tier up, "
            "newest last, each lower than the one before: the tier runs the first."
        ),
    )
    lead_time_seconds: int | None = Field(
        default=None,
        description=(
            "Learned time from a replica's pod created to Ready (model loaded): what a "
            "scale-up takes to serve. The profile's model load time until pods are seen."
        ),
    )
    lead_time_observed_at: datetime | None = Field(
        default=None, description="The newest pod Ready time the lead time has learned from."
    )
    reserve_replicas: int = Field(
        default=0,
        description="Replicas held above the expected demand to absorb a burst for a lead time.",
    )
    tail_replicas: int = Field(
        default=0,
        description=(
            "Replicas run on top of the plan so that a class whose prompts take most of its "
            "objective to prefill does not miss it waiting behind another prompt's prefill "
            "(part of desiredReplicas)."
        ),
    )
    margin_replicas: int = Field(
        default=0,
        description=(
            "Replicas a preemptible tier runs on top of the plan for the node losses expected "
            "within its lead time (part of desiredReplicas; spec.scaling.hedgePreemptible)."
        ),
    )
    node_loss: NodeLoss | None = Field(
        default=None,
        description="A preemptible tier's node losses, learned online: what its margin is from.",
    )
    profile: Text | None = Field(
        default=None,
        description=(
            "Where the tier's performance profile comes from: the io.net runs it was fitted "
            "on, the measured card a derived profile was moved from by the first-principles "
            "model, or the tier's own points; why there is none when the tier has no profile."
        ),
    )
    profile_measured: bool | None = Field(
        default=None,
        description=(
            "False when the profile is derived: a measured one moved by the first-principles "
            "model to a GPU type or a model that no run measured."
        ),
    )


class NodeLoss(StatusModel):
    """A preemptible tier's loss evidence, as of `since` (decayed over hours)."""

    rate_per_replica_hour: float = Field(
        description=(
            "Learned losses per replica-hour: a prior of one a day plus the losses seen over "
            "the Ready replica-hours seen, both decaying over about six hours."
        )
    )
    losses: float = Field(default=0.0, description="Losses seen (decayed), as of since.")
    exposure_replica_hours: float = Field(
        default=0.0, description="Ready replica-hours seen (decayed), as of since."
    )
    replicas: int = Field(default=0, description="Ready replicas since then.")
    since: datetime = Field(description="When this evidence was last updated.")
    lost_pods: list[Annotated[str, StringConstraints(max_length=253)]] = Field(
        default_factory=list,
        max_length=256,
        description=(
            "Pods on nodes gone, NotReady or leaving, already counted: each loss counts once."
        ),
    )


class Recommendation(StatusModel):
    """One pass's replica recommendation for a tier (before the scale-down delay)."""

    time: datetime = Field(description="When it was made.")
    replicas: int = Field(description="Replicas recommended.")


class DemandForecast(StatusModel):
    """A class's demand history, condensed: what the short-horizon forecast carries."""

    level_tokens_per_second: int = Field(description="Smoothed demand now.")
    trend_tokens_per_second_per_minute: int = Field(
        default=0, description="Smoothed change of demand per minute."
    )
    deviation_tokens_per_second: int = Field(
        default=0, description="Typical deviation of demand from the forecast, one interval ahead."
    )
    expected_tokens_per_second: int = Field(
        default=0, description="Demand expected over the next lead time plus one interval."
    )
    planned_tokens_per_second: int = Field(
        default=0, description="Demand planned for: the expected one at the planned quantile."
    )
    updated_at: datetime = Field(description="The pass that last updated it.")
    bursts: BurstMemory | None = Field(
        default=None,
        description="What the forecast remembers of the class's bursts (absent: none yet).",
    )
    daily: DailyPattern | None = Field(
        default=None, description="The class's demand by time of day (absent: none yet)."
    )


class PromptLengths(StatusModel):
    """A class's prompt lengths over its recent requests, condensed (planning.prompts)."""

    mean_tokens: float = Field(description="Mean prompt length, tokens.")
    requests: float = Field(description="Requests the shares summarize (a running count).")
    share_at_most: list[float] = Field(
        description=(
            "Share of prompts at most each multiple of the mean long: the multiples 0.05, "
            "0.1, 0.2, 0.3, 0.5, 0.7, 1, 1.4, 2, 2.8, 4, 5.6, 8, 11, 16, 23, 32 and 50."
        )
    )
    updated_at: datetime = Field(description="The pass that last updated it.")


class TierWeight(StatusModel):
    """A tier's share of a class's traffic."""

    tier: str = Field(description="Tier name.")
    weight: int = Field(description="Integer weight; a class's weights sum to 100.")


class ClassStatus(StatusModel):
    """How one traffic class is routed and served."""

    name: str = Field(description="Class name.")
    weights: list[TierWeight] = Field(
        default_factory=list, description="The class's traffic split across tiers."
    )
    demand_tokens_per_second: int | None = Field(
        default=None, description="Demand the last decision planned for."
    )
    predicted_ttft_p99_milliseconds: int | None = Field(
        default=None, description="P99 TTFT the plan predicts for this class."
    )
    observed_ttft_p99_milliseconds: int | None = Field(
        default=None, description="P99 TTFT observed for this class (weighted over tiers)."
    )
    objective_ttft_p99_milliseconds: int | None = Field(
        default=None, description="The class's objective, repeated for reading at a glance."
    )
    forecast: DemandForecast | None = Field(
        default=None, description="The class's short-horizon demand forecast."
    )
    backlog_tokens: int | None = Field(
        default=None, description="Tokens of this class's requests waiting in the queues."
    )
    unservable_percent: int | None = Field(
        default=None,
        description=(
            "Share of the class's prompts that no tier can prefill within the objective even "
            "idle, in percent (from the tiers' prompt-length histograms)."
        ),
    )
    prompt_lengths: PromptLengths | None = Field(
        default=None,
        description="The class's prompt lengths, learned from its tiers' prompt-length histograms.",
    )


class SizedTier(StatusModel):
    """The replicas the optimizer chose for a tier."""

    name: str = Field(description="Tier name.")
    replicas: int = Field(description="Replicas chosen.")


class TierShare(StatusModel):
    """A tier's share of a class's demand in the optimizer's answer."""

    tier: str = Field(description="Tier name.")
    share: float = Field(description="Fraction of the class's demand the tier serves (0-1).")


class SizedClass(StatusModel):
    """The demand the optimizer sized a class for, and how it split it over tiers."""

    name: str = Field(description="Class name.")
    tokens_per_second: float = Field(
        description=(
            "Demand solved for: the forecast with headroom or burst reserve, plus the "
            "queue drain, tokens/s."
        )
    )
    shares: list[TierShare] = Field(
        default_factory=list, description="The optimizer's split of the class over tiers."
    )


class Sizing(StatusModel):
    """The optimizer's last answer and what it was solved for. A pass keeps it without
    solving while every other input the optimizer reads is unchanged (`inputs`), each
    class's demand is within a tolerance of `classes[].tokensPerSecond` and the answer
    still holds that demand."""

    time: datetime = Field(description="The pass that solved it.")
    inputs: Annotated[str, StringConstraints(max_length=64)] = Field(
        description=(
            "Digest of every optimizer input but demand: tiers' prices and bounds and the "
            "budget exactly, the classes' service times and utilization limits on a 5% grid."
        )
    )
    tiers: list[SizedTier] = Field(default_factory=list, description="Replicas per tier.")
    classes: list[SizedClass] = Field(
        default_factory=list, description="Demand and split per class."
    )


class Decision(StatusModel):
    """The last scaling or routing decision."""

    time: datetime = Field(description="When it was taken.")
    reason: str = Field(description="CamelCase reason.")
    message: Text = Field(default="", description="One line explaining it.")


class InferencePoolStatus(StatusModel):
    """Status written by the operator."""

    observed_generation: int = Field(default=0, description="The generation last reconciled.")
    conditions: list[Condition] = Field(
        default_factory=list,
        description="Current conditions.",
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["type"],
        },
    )
    tiers: list[TierStatus] = Field(default_factory=list, description="Per-tier status.")
    classes: list[ClassStatus] = Field(default_factory=list, description="Per-class status.")
    cost_per_hour: str | None = Field(
        default=None, description="Cost of the desired replicas, dollars per hour."
    )
    cost_per_million_tokens: str | None = Field(
        default=None, description="Dollars per million tokens at the planned demand."
    )
    energy_kwh_per_million_tokens: str | None = Field(
        default=None, description="GPU energy per million tokens, kWh."
    )
    carbon_grams_per_million_tokens: str | None = Field(
        default=None, description="CO2-equivalent grams per million tokens at the grid intensity."
    )
    reserve_cost_per_hour: str | None = Field(
        default=None,
        description="Dollars per hour of the replicas held as burst reserve (in costPerHour).",
    )
    margin_cost_per_hour: str | None = Field(
        default=None,
        description=(
            "Dollars per hour of the replicas preemptible tiers run for expected node losses "
            "(in costPerHour)."
        ),
    )
    last_decision: Decision | None = Field(default=None, description="The last decision.")
    sizing: Sizing | None = Field(
        default=None,
        description=(
            "What the optimizer last solved for, kept without solving while demand moves "
            "less than a tolerance (planner state)."
        ),
    )
    observed_by: str | None = Field(
        default=None,
        description=(
            "The operator replica that reconciled the pool last (pod name and process): with "
            "sharded replicas, the holder of the pool's shard."
        ),
    )
    tier_summary: str | None = Field(
        default=None, description="Ready/desired replicas per tier, for kubectl get."
    )
    weight_summary: str | None = Field(
        default=None, description="Weights per class, for kubectl get -o wide."
    )
    ttft_summary: str | None = Field(
        default=None, description="Observed (or predicted) P99 TTFT per class against objective."
    )
