"""Which pod leaves on a scale-down: deletion costs from requests in flight, as data."""

from __future__ import annotations

from typing import Any

import pytest

from gpufleet.adapters import promql
from gpufleet.api.constants import LABEL_TIER
from gpufleet.desired.deletion_cost import (
    DELETION_COST,
    cost_of,
    costs_to_write,
    current_costs,
    is_scale_down,
)

pytestmark = pytest.mark.timeout(2)


def pod(name: str, tier: str, cost: str | None = None, *, leaving: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {LABEL_TIER: tier}}
    if cost is not None:
        meta["annotations"] = {DELETION_COST: cost}
    if leaving:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta}


@pytest.mark.parametrize(
    ("in_flight", "cost"),
    [(0.0, 0), (3.0, 3), (2.6, 3), (-1.0, 0), (float("nan"), 0), (1e12, 2**31 - 1)],
    ids=["idle", "busy", "rounded", "negative", "nan", "int32"],
)
def test_cost_is_requests_in_flight_as_an_int32(in_flight: float, cost: int) -> None:
    assert cost_of(in_flight) == cost


def test_idlest_pod_gets_the_lowest_cost_and_only_changes_are_written() -> None:
    current: dict[str, str | None] = {"busy": None, "idle": None, "same": "4", "new": "9"}
    in_flight = {"busy": 12.0, "idle": 0.0, "same": 4.0}
    # `new` has no series yet (not scraped): it counts as idle.
    assert costs_to_write(current, in_flight) == {"busy": "12", "idle": "0", "new": "0"}
    assert costs_to_write({"same": "4"}, {"same": 4.0}) == {}


def test_a_pod_on_a_leaving_node_goes_before_even_an_idle_one() -> None:
    current: dict[str, str | None] = {"busy": None, "idle": None, "doomed": None}
    in_flight = {"busy": 5.0, "idle": 0.0, "doomed": 8.0}
    costs = costs_to_write(current, in_flight, leaving={"doomed"})
    assert costs == {"busy": "5", "idle": "0", "doomed": "-1"}


@pytest.mark.parametrize(
    ("live", "replicas", "shrinks"),
    [
        ({"spec": {"replicas": 3}}, 2, True),
        ({"spec": {"replicas": 3}}, 3, False),
        ({"spec": {"replicas": 1}}, 4, False),
        (None, 0, False),
        ({"spec": {}}, 0, False),
    ],
    ids=["down", "steady", "up", "no-deployment", "no-replicas"],
)
def test_scale_down_is_fewer_replicas_than_the_live_deployment(
    live: dict[str, Any] | None, replicas: int, shrinks: bool
) -> None:
    assert is_scale_down(live, replicas) is shrinks


def test_current_costs_by_tier_leave_out_terminating_pods() -> None:
    pods = [
        pod("a", "h100"),
        pod("b", "h100", "3"),
        pod("c", "rtx4090", "0"),
        pod("d", "rtx4090", "5", leaving=True),
        {"metadata": {"name": "unlabelled"}},
    ]
    assert current_costs(pods, LABEL_TIER) == {"h100": {"a": None, "b": "3"}, "rtx4090": {"c": "0"}}


def test_in_flight_query_counts_running_and_queued_per_pod_of_one_tier() -> None:
    assert promql.in_flight_by_pod("llm", "llama3-8b", "rtx4090") == (
        'sum by (pod) ({__name__=~"vllm[:_]num_requests_(running|waiting)",namespace="llm",'
        'gpufleet_dev_pool="llama3-8b",gpufleet_dev_tier="rtx4090"})'
    )
