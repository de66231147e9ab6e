"""What keeps a tier from running what the planner asked for, beyond the planner's view.

The planner sees replicas as Ready, starting or unschedulable. A person reading status also
needs the cause when replicas never come: the apiserver refused the pods (the ReplicaSet's
FailedCreate: Pod Security, a quota, a policy), the image cannot be pulled, the container
crashes or cannot be configured (a missing Secret), or the hourly budget is below what
minReplicas cost. The adapter reads these as PodProblems; `degraded` folds them, with the
planner's own verdict, into the Degraded condition (pure).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpufleet.api.status import Reason
from gpufleet.api.types import InferencePoolSpec, decimal
from gpufleet.planning.conditions import MAX_MESSAGE
from gpufleet.planning.records import Verdict

# Container waiting reasons (kubelet) and what they tell.
_WAITING: Mapping[str, Reason] = {
    "ErrImagePull": Reason.IMAGE_PULL_FAILED,
    "ImagePullBackOff": Reason.IMAGE_PULL_FAILED,
    "InvalidImageName": Reason.IMAGE_PULL_FAILED,
    "ErrImageNeverPull": Reason.IMAGE_PULL_FAILED,
    "CrashLoopBackOff": Reason.CRASH_LOOPING,
    "RunContainerError": Reason.CRASH_LOOPING,
    "CreateContainerConfigError": Reason.CONTAINER_CONFIG_INVALID,
    "CreateContainerError": Reason.CONTAINER_CONFIG_INVALID,
}
# The cause a person must act on first comes first.
_ORDER = (
    Reason.CHILD_CONFLICT,
    Reason.PODS_REFUSED,
    Reason.IMAGE_PULL_FAILED,
    Reason.CONTAINER_CONFIG_INVALID,
    Reason.CRASH_LOOPING,
    Reason.BUDGET_BELOW_MIN_REPLICAS,
)


@dataclass(frozen=True)
class PodProblem:
    """Why a tier's pods do not run: a reason from the Degraded table, and the cluster's
    own words (the ReplicaSet's FailedCreate message, the container's waiting message)."""

    reason: Reason
    message: str


def waiting_problem(pod: str, waiting: Mapping[str, object]) -> PodProblem | None:
    """A container's `state.waiting` as a problem, or None when it is just starting."""
    reason = _WAITING.get(str(waiting.get("reason") or ""))
    if reason is None:
        return None
    detail = str(waiting.get("message") or "").strip()
    text = f"pod {pod}: {waiting.get('reason')}" + (f": {detail}" if detail else "")
    return PodProblem(reason, text)


def refused_problem(deployment: str, message: str) -> PodProblem:
    """The Deployment's ReplicaFailure/FailedCreate condition: admission refused the pods."""
    return PodProblem(Reason.PODS_REFUSED, f"Deployment {deployment}: {message}")


def min_replicas_over_budget(spec: InferencePoolSpec) -> str | None:
    """A message when minReplicas alone cost more than maxHourlyCost, else None."""
    budget = spec.objectives.max_hourly_cost
    if budget is None:
        return None
    floor = sum(t.price_per_replica_hour * t.min_replicas for t in spec.tiers)
    limit = float(decimal(budget))
    if floor <= limit + 1e-9:
        return None
    asked = ", ".join(f"{t.name} {t.min_replicas}" for t in spec.tiers if t.min_replicas)
    return (
        f"minReplicas ({asked}) cost ${floor:.2f}/h, above maxHourlyCost ${limit:.2f}/h: "
        "the budget wins and the tiers run below their minimum; raise maxHourlyCost or "
        "lower minReplicas"
    )


def degraded(
    spec: InferencePoolSpec,
    planned: Verdict,
    problems: Mapping[str, Sequence[PodProblem]],
) -> Verdict:
    """Degraded from the planner's verdict (capacity, conflicts) and the tiers' problems:
    True when any holds; the reason is the first cause in _ORDER, the message tells all."""
    causes: list[tuple[Reason, str]] = []
    if planned.status:
        causes.append((planned.reason, planned.message))
    for tier, found in problems.items():
        for problem in found:
            causes.append((problem.reason, f"{tier}: {problem.message}"))
    over = min_replicas_over_budget(spec)
    if over is not None:
        causes.append((Reason.BUDGET_BELOW_MIN_REPLICAS, over))
    if not causes:
        return planned
    rank = {reason: i for i, reason in enumerate(_ORDER)}
    first = min(causes, key=lambda c: rank.get(c[0], len(_ORDER)))[0]
    seen: list[str] = []
    for _, message in causes:
        if message not in seen:
            seen.append(message)
    return Verdict(True, first, "; ".join(seen)[:MAX_MESSAGE])
