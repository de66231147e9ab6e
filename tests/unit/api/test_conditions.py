"""Conditions: lastTransitionTime moves only when status flips."""

from datetime import UTC, datetime, timedelta

import pytest

from gpufleet.api.conditions import find, is_true, set_condition
from gpufleet.api.status import ConditionStatus, ConditionType

pytestmark = pytest.mark.timeout(2)

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
T1 = T0 + timedelta(minutes=5)


def test_new_condition_is_appended_with_now() -> None:
    conditions = set_condition(
        [],
        ConditionType.READY,
        ConditionStatus.TRUE,
        "TiersReady",
        "ok",
        now=T0,
        observed_generation=3,
    )
    ready = find(conditions, ConditionType.READY)
    assert ready is not None
    assert ready.last_transition_time == T0
    assert ready.observed_generation == 3
    assert is_true(conditions, ConditionType.READY)


def test_same_status_keeps_transition_time_but_updates_reason() -> None:
    first = set_condition(
        [],
        ConditionType.DEGRADED,
        ConditionStatus.TRUE,
        "Unschedulable",
        "a",
        now=T0,
        observed_generation=1,
    )
    second = set_condition(
        first,
        ConditionType.DEGRADED,
        ConditionStatus.TRUE,
        "CapacityLost",
        "b",
        now=T1,
        observed_generation=2,
    )
    degraded = find(second, ConditionType.DEGRADED)
    assert degraded is not None
    assert degraded.last_transition_time == T0
    assert (degraded.reason, degraded.message, degraded.observed_generation) == (
        "CapacityLost",
        "b",
        2,
    )


def test_flip_moves_transition_time() -> None:
    first = set_condition(
        [],
        ConditionType.READY,
        ConditionStatus.FALSE,
        "ReplicasStarting",
        "",
        now=T0,
        observed_generation=1,
    )
    second = set_condition(
        first,
        ConditionType.READY,
        ConditionStatus.TRUE,
        "TiersReady",
        "",
        now=T1,
        observed_generation=1,
    )
    ready = find(second, ConditionType.READY)
    assert ready is not None and ready.last_transition_time == T1
    assert not is_true(first, ConditionType.READY)


def test_setting_the_same_condition_twice_is_identical() -> None:
    args = (ConditionType.READY, ConditionStatus.TRUE, "TiersReady", "all ready")
    once = set_condition([], *args, now=T0, observed_generation=1)
    twice = set_condition(once, *args, now=T1, observed_generation=1)
    assert once == twice


def test_other_conditions_and_order_are_kept() -> None:
    conditions = set_condition(
        [],
        ConditionType.READY,
        ConditionStatus.TRUE,
        "TiersReady",
        "",
        now=T0,
        observed_generation=1,
    )
    conditions = set_condition(
        conditions,
        ConditionType.DEGRADED,
        ConditionStatus.FALSE,
        "AsPlanned",
        "",
        now=T0,
        observed_generation=1,
    )
    conditions = set_condition(
        conditions,
        ConditionType.READY,
        ConditionStatus.FALSE,
        "NoReadyReplicas",
        "",
        now=T1,
        observed_generation=1,
    )
    assert [c.type for c in conditions] == ["Ready", "Degraded"]
    assert not is_true(conditions, "Missing")
