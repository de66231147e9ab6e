"""A class's traffic spread over the Ready replicas it may use, not only those sized for it."""

from __future__ import annotations

import pytest

from gpufleet.planning import routing
from gpufleet.planning.classes import ClassCapacity
from gpufleet.planning.planner import plan
from tests.unit.planning.factories import (
    batch,
    h100,
    observe,
    previous,
    realtime,
    replicas,
    rtx4090,
    spec,
    status_from,
    weights,
)

pytestmark = pytest.mark.timeout(60)


def _capacity(name: str, limits: dict[str, float], service: dict[str, float]) -> ClassCapacity:
    return ClassCapacity(
        name=name,
        priority=10,
        shape=(1000.0, 200.0),
        objective_seconds=2.0,
        best_effort_seconds=None,
        service_seconds=service,
        max_utilization=limits,
        shared_utilization={},
    )


SERVICE = {"h100": 0.5, "rtx4090": 1.0, "l40s": 0.8}
BATCH = _capacity("batch", {"h100": 0.9, "rtx4090": 0.6, "l40s": 0.8}, SERVICE)
REALTIME = _capacity("realtime", {"h100": 0.9}, SERVICE)


def test_idle_ready_replicas_take_their_share_in_proportion_to_what_they_carry() -> None:
    routed = {"batch": {"l40s": 1.0}}
    shares, onto = routing.spread(routed, routed, {"l40s": 1, "rtx4090": 4}, {"batch": BATCH})
    # Per replica at its limit: l40s 0.8 / 0.8 s = 1 req/s, rtx4090 0.6 / 1 s = 0.6 req/s.
    assert shares["batch"] == pytest.approx({"l40s": 1.0 / 3.4, "rtx4090": 2.4 / 3.4})
    assert onto == {"batch": ("rtx4090",)}


def test_a_tier_another_class_is_sent_to_keeps_its_planned_share_and_gets_no_more() -> None:
    routed = {"batch": {"h100": 0.25, "l40s": 0.75}, "realtime": {"h100": 1.0}}
    ready = {"h100": 2, "l40s": 1, "rtx4090": 4}
    shares, onto = routing.spread(routed, routed, ready, {"batch": BATCH, "realtime": REALTIME})
    assert shares["batch"]["h100"] == 0.25
    assert shares["batch"]["l40s"] + shares["batch"]["rtx4090"] == pytest.approx(0.75)
    assert shares["realtime"] == {"h100": 1.0}  # its only eligible tier
    assert onto == {"batch": ("rtx4090",)}


def test_no_spread_onto_a_tier_planned_for_another_class_or_with_nothing_ready() -> None:
    routed = {"batch": {"l40s": 1.0}, "realtime": {"h100": 1.0}}
    targets = {"batch": {"l40s": 1.0}, "realtime": {"h100": 0.5, "rtx4090": 0.5}}
    capacities = {"batch": BATCH, "realtime": REALTIME}
    shares, onto = routing.spread(routed, targets, {"l40s": 1, "rtx4090": 4}, capacities)
    assert shares["batch"] == {"l40s": 1.0} and onto == {}
    # A tier of its own with no Ready replica (its traffic waits for them): left as routed.
    routed = {"batch": {"l40s": 1.0}}
    shares, onto = routing.spread(routed, routed, {"l40s": 0, "rtx4090": 4}, capacities)
    assert shares["batch"] == {"l40s": 1.0} and onto == {}


def test_replicas_held_by_the_scale_down_delay_serve_until_they_go() -> None:
    # Batch alone on an H100 pair (minReplicas 2) and RTX 4090s bought for a surge. After
    # the surge the delay holds the 4090s; the optimizer serves the small demand on the
    # H100s alone, and the held 4090s, paid for anyway, would sit idle through a burst.
    s = spec(tiers=[h100(minReplicas=2), rtx4090()], classes=[batch()])
    running = {"h100": 2, "rtx4090": 0}
    status = previous(running, {"batch": {"h100": 100}})
    plans = []
    for k, tokens in enumerate([3000, 20000, 20000, 20000, 300, 300, 300]):
        seen = observe(s, {"batch": tokens}, now=30.0 * k, ready=running)
        plans.append(plan(s, seen, status))
        running = replicas(plans[-1])
        status = status_from(plans[-1], seen)
    last = plans[-1]
    assert replicas(last)["rtx4090"] > 0 and "rtx4090 stays at" in last.message
    assert weights(last)["batch"]["rtx4090"] > weights(last)["batch"]["h100"] > 0
    assert "batch also sent to the Ready replicas of rtx4090" in last.message


def test_two_classes_on_tiers_of_their_own_keep_them() -> None:
    # The example pool: realtime on the H100 (the only tier it is eligible on), batch on
    # the 4090s and what the optimizer gives it beside realtime: nothing spreads.
    s = spec(tiers=[h100(), rtx4090()], classes=[realtime(), batch()])
    running = {"h100": 1, "rtx4090": 3}
    live = {"realtime": {"h100": 100}, "batch": {"rtx4090": 100}}
    seen = observe(s, {"realtime": 1000, "batch": 6000}, ready=running)
    result = plan(s, seen, previous(running, live))
    assert weights(result)["realtime"] == {"h100": 100}
    assert weights(result)["batch"]["rtx4090"] > 0
    assert "also sent to" not in result.message


# -- a lower class takes no more of a tier a higher one steps up on ---------------------------

PRIORITY = {"realtime": 100, "batch": 10}


def test_a_lower_class_is_not_moved_onto_a_tier_a_higher_class_steps_up_on() -> None:
    routed = {"batch": {"h100": 0.2, "rtx4090": 0.6, "l40s": 0.2}, "realtime": {"h100": 1.0}}
    live = {"batch": {"h100": 0.05, "rtx4090": 0.95}, "realtime": {"h100": 1.0}}
    up = frozenset({"realtime"})
    shares, off = routing.yield_to_steps(routed, live, up, PRIORITY, {})
    # Held at its live 5% there; the other 15% onto its other tiers by their shares.
    assert shares["batch"] == pytest.approx({"h100": 0.05, "rtx4090": 0.7125, "l40s": 0.2375})
    assert shares["realtime"] == {"h100": 1.0}
    assert off == {}  # still on it
    # Not there before: kept off it, and said so.
    live_off = {"batch": {"rtx4090": 1.0}, "realtime": {"h100": 1.0}}
    shares, off = routing.yield_to_steps(routed, live_off, up, PRIORITY, {})
    assert shares["batch"] == pytest.approx({"h100": 0.0, "rtx4090": 0.75, "l40s": 0.25})
    assert off == {"batch": ("h100",)}


def test_what_a_class_has_on_the_tier_stays_and_no_step_moves_nothing() -> None:
    routed = {"batch": {"h100": 0.2, "rtx4090": 0.8}, "realtime": {"h100": 1.0}}
    more = {"batch": {"h100": 0.3, "rtx4090": 0.7}, "realtime": {"h100": 1.0}}
    for live, stepping in (
        (more, frozenset({"realtime"})),  # planned below what it has there: route_on_ready's
        ({"batch": {"rtx4090": 1.0}}, frozenset()),  # nothing steps up
        ({"batch": {"rtx4090": 1.0}}, frozenset({"batch"})),  # only the lower class does
    ):
        shares, off = routing.yield_to_steps(routed, live, stepping, PRIORITY, {})
        assert shares == routed and off == {}


def test_a_class_planned_nowhere_else_stays_and_kept_off_tiers_are_kept() -> None:
    routed = {"batch": {"h100": 1.0}, "realtime": {"h100": 1.0}}
    shares, off = routing.yield_to_steps(
        routed, {}, frozenset({"realtime"}), PRIORITY, {"realtime": ("rtx4090",)}
    )
    assert shares == routed
    assert off == {"realtime": ("rtx4090",)}  # what shed_overflow kept off, kept
