"""Live weights kept while they moved by a few points and still carry the demand."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any, cast

from gpufleet.planning import routing


class Live:
    """What `settle` reads of a pass's inputs: the tiers and each class's live weights."""

    names = ("h100", "rtx4090")

    def __init__(self, weights: Mapping[str, Mapping[str, int]]) -> None:
        self.weights = weights

    def previous_weights(self, cls: str) -> dict[str, int]:
        return {t: w for t, w in self.weights.get(cls, {}).items() if w > 0}


LIVE = {"realtime": {"h100": 100}, "batch": {"h100": 20, "rtx4090": 80}}


def _settle(new: Mapping[str, Mapping[str, int]], carries: bool) -> Any:
    seen: list[Mapping[str, Mapping[str, float]]] = []

    def check(split: Mapping[str, Mapping[str, float]]) -> bool:
        seen.append(split)
        return carries

    return routing.settle(cast(Any, Live(LIVE)), new, check), seen


def test_a_few_points_back_and_forth_keep_the_live_weights_when_they_carry_the_demand() -> None:
    new = {"realtime": {"h100": 100, "rtx4090": 0}, "batch": {"h100": 17, "rtx4090": 83}}
    kept, seen = _settle(new, carries=True)
    assert kept == {"realtime": {"h100": 100, "rtx4090": 0}, "batch": {"h100": 20, "rtx4090": 80}}
    assert seen == [{"realtime": {"h100": 1.0}, "batch": {"h100": 0.2, "rtx4090": 0.8}}]


def test_live_weights_that_no_longer_carry_the_demand_move() -> None:
    new = {"realtime": {"h100": 100, "rtx4090": 0}, "batch": {"h100": 17, "rtx4090": 83}}
    kept, _ = _settle(new, carries=False)
    assert kept == new


def test_a_move_beyond_the_points_is_made_and_not_even_checked() -> None:
    step = routing.SETTLE_POINTS + 1
    new = {"realtime": {"h100": 100}, "batch": {"h100": 20 + step, "rtx4090": 80 - step}}
    kept, seen = _settle(new, carries=True)
    assert kept == new and seen == []


def test_all_classes_or_none() -> None:
    # batch moved by a hair, realtime by a lot: both take the new weights.
    new = {"realtime": {"h100": 60, "rtx4090": 40}, "batch": {"h100": 18, "rtx4090": 82}}
    kept, _ = _settle(new, carries=True)
    assert kept == new


def test_nothing_moved_is_no_check_and_no_change() -> None:
    new = {"realtime": {"h100": 100, "rtx4090": 0}, "batch": {"h100": 20, "rtx4090": 80}}
    kept, seen = _settle(new, carries=True)
    assert kept == new and seen == []


def test_a_class_without_live_weights_takes_the_new_ones() -> None:
    new = {"realtime": {"h100": 100}, "batch": {"h100": 20, "rtx4090": 80}, "new": {"h100": 100}}
    kept, _ = _settle(new, carries=True)
    assert kept == new


def test_a_drifting_pool_moves_its_weights_less_often() -> None:
    """The planner end to end on the 4-tier x 4-class pool of `make bench-planner`, whose
    demand drifts a few percent a pass: fewer weight changes with settling than without."""
    import dataclasses
    from datetime import timedelta

    from tools import bench_planner as bp

    from gpufleet.planning import planner
    from gpufleet.planning.records import ClassDemand, TierObservation

    def changes(points: int) -> int:
        routing_points, routing.SETTLE_POINTS = routing.SETTLE_POINTS, points
        try:
            observation, status = bp.world(random.Random(7))
            last, moved = None, 0
            for i, demand in enumerate(bp.drifting(random.Random(11), 60)):
                seen = dataclasses.replace(
                    observation,
                    now=bp.NOW + timedelta(seconds=30 * (i + 1)),
                    demand={n: ClassDemand(v / 2, v / 2) for n, v in demand.items()},
                )
                made = planner.plan(bp.spec(), seen, status)
                weights = {c: dict(p.weights) for c, p in made.classes.items()}
                moved += last is not None and weights != last
                last = weights
                ready = {
                    n: TierObservation(n, t.replicas, t.replicas, ttft_p99_seconds=0.05)
                    for n, t in made.tiers.items()
                }
                observation = dataclasses.replace(seen, tiers=ready)
                status = bp._carried(made, seen)
            return moved
        finally:
            routing.SETTLE_POINTS = routing_points

    assert changes(routing.SETTLE_POINTS) < changes(0)
