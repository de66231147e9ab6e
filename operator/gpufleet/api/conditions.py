"""Pure helpers for metav1.Conditions: find, set, is_true.

As in cert-manager: lastTransitionTime moves only when the status flips, the clock is an
argument, and setting a condition to what it already says changes nothing (so an idle
reconcile pass computes an identical status and writes nothing).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from gpufleet.api.status import Condition, ConditionStatus, ConditionType


def find(conditions: Sequence[Condition], type_: ConditionType | str) -> Condition | None:
    """The condition of that type, or None."""
    for condition in conditions:
        if condition.type == type_:
            return condition
    return None


def is_true(conditions: Sequence[Condition], type_: ConditionType | str) -> bool:
    """Whether the condition exists and is True."""
    condition = find(conditions, type_)
    return condition is not None and condition.status is ConditionStatus.TRUE


def set_condition(
    conditions: Sequence[Condition],
    type_: ConditionType | str,
    status: ConditionStatus,
    reason: str,
    message: str,
    *,
    now: datetime,
    observed_generation: int,
) -> list[Condition]:
    """A new list with the condition set; other conditions and their order are kept."""
    previous = find(conditions, type_)
    transition = (
        previous.last_transition_time
        if previous is not None and previous.status is status
        else now.replace(microsecond=0)
    )
    updated = Condition(
        type=str(type_),
        status=status,
        reason=reason,
        message=message[:1024],
        last_transition_time=transition,
        observed_generation=observed_generation,
    )
    if previous is None:
        return [*conditions, updated]
    return [updated if c.type == type_ else c for c in conditions]
