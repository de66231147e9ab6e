"""Counting a tier's replicas from its pods."""

from datetime import UTC, datetime
from typing import Any

import pytest

from gpufleet.adapters.kube import count_pods
from gpufleet.planning.records import PodStart

pytestmark = pytest.mark.timeout(2)


def pod(
    tier: str,
    *,
    ready: bool = False,
    node: str | None = None,
    unschedulable: bool = False,
    deleting: bool = False,
    created: str | None = None,
    ready_at: str | None = None,
) -> dict[str, Any]:
    conditions: list[dict[str, Any]] = []
    if node:
        conditions.append({"type": "PodScheduled", "status": "True"})
    elif unschedulable:
        conditions.append({"type": "PodScheduled", "status": "False", "reason": "Unschedulable"})
    conditions.append({"type": "Ready", "status": "True" if ready else "False"})
    if ready_at is not None:
        conditions[-1]["lastTransitionTime"] = ready_at
    meta: dict[str, Any] = {"labels": {"gpufleet.dev/tier": tier}}
    if created is not None:
        meta["creationTimestamp"] = created
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {
        "metadata": meta,
        "spec": {"nodeName": node} if node else {},
        "status": {"phase": "Running" if node else "Pending", "conditions": conditions},
    }


def test_ready_starting_and_unschedulable_pods_are_told_apart() -> None:
    counts = count_pods(
        [
            pod("a", ready=True, node="n1"),
            pod("a", node="n1"),
            pod("a", unschedulable=True),
            pod("b", ready=True, node="n2"),
            pod("b", ready=True, node="n2", deleting=True),
        ],
        {"n1", "n2"},
    )
    assert (counts["a"].ready, counts["a"].starting, counts["a"].unschedulable) == (1, 1, 1)
    assert (counts["b"].ready, counts["b"].starting, counts["b"].unschedulable) == (1, 0, 0)


def test_pods_on_a_vanished_node_count_as_unschedulable_at_once() -> None:
    counts = count_pods(
        [pod("a", ready=True, node="gone"), pod("a", ready=True, node="n1")], {"n1"}
    )
    assert (counts["a"].ready, counts["a"].unschedulable) == (1, 1)


def test_pods_without_a_tier_label_are_ignored() -> None:
    stray = pod("a", ready=True, node="n1")
    stray["metadata"]["labels"] = {}
    assert count_pods([stray], {"n1"}) == {}


def at(minute: int, second: int) -> datetime:
    return datetime(2026, 1, 1, 0, minute, second, tzinfo=UTC)


def test_ready_pods_carry_when_they_were_created_and_became_ready() -> None:
    counts = count_pods(
        [
            # As the API server writes them (RFC 3339, Z) and as the client's
            # sanitize_for_serialization does (isoformat, +00:00); oldest first.
            pod("a", ready=True, node="n1", created="2026-01-01T00:05:00Z",
                ready_at="2026-01-01T00:06:16Z"),
            pod("a", ready=True, node="n1", created="2026-01-01T00:01:00+00:00",
                ready_at="2026-01-01T00:02:30+00:00"),
            # Not Ready, on a vanished node, or without both timestamps: no start.
            pod("a", node="n1", created="2026-01-01T00:07:00Z", ready_at="2026-01-01T00:07:00Z"),
            pod("a", ready=True, node="gone", created="2026-01-01T00:00:00Z",
                ready_at="2026-01-01T00:01:00Z"),
            pod("a", ready=True, node="n1", created="2026-01-01T00:00:00Z"),
            pod("a", ready=True, node="n1", ready_at="2026-01-01T00:00:00Z"),
            pod("a", ready=True, node="n1", created="yesterday", ready_at="2026-01-01T00:00:00Z"),
        ],
        {"n1"},
    )  # fmt: skip
    assert counts["a"].ready == 5
    assert counts["a"].starts == [
        PodStart(created=at(1, 0), ready=at(2, 30)),
        PodStart(created=at(5, 0), ready=at(6, 16)),
    ]
    assert [s.seconds for s in counts["a"].starts] == [90.0, 76.0]
