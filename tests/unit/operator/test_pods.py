"""Counting a tier's replicas from its pods."""

from typing import Any

import pytest

from gpufleet.adapters.kube import count_pods

pytestmark = pytest.mark.timeout(2)


def pod(
    tier: str,
    *,
    ready: bool = False,
    node: str | None = None,
    unschedulable: bool = False,
    deleting: bool = False,
) -> dict[str, Any]:
    conditions = []
    if node:
        conditions.append({"type": "PodScheduled", "status": "True"})
    elif unschedulable:
        conditions.append({"type": "PodScheduled", "status": "False", "reason": "Unschedulable"})
    conditions.append({"type": "Ready", "status": "True" if ready else "False"})
    meta: dict[str, Any] = {"labels": {"gpufleet.dev/tier": tier}}
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
