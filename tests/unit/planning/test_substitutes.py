"""A tier is not asked for replicas that another tier's held ones make unneeded."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gpufleet.planning.planner import plan
from gpufleet.planning.program import ClassNeed, TierOption
from gpufleet.planning.stabilization import ScaleDecision
from gpufleet.planning.substitutes import Held, holds, lean
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
)

pytestmark = pytest.mark.timeout(2)

# "fast" serves both classes; "cheap" (a quarter of the price, half the speed) only batch.
FAST = TierOption("fast", 2.0, 0, 10)
CHEAP = TierOption("cheap", 0.5, 0, 10)


def _need(name: str, rate: float, tight: bool) -> ClassNeed:
    rho = {"fast": 0.5} if tight else {"fast": 0.9, "cheap": 0.9}
    service = {"fast": 0.1, "cheap": 0.2}
    return ClassNeed(
        name=name,
        priority=10 if tight else 0,
        rate_rps=rate,
        tokens_per_request=400,
        service_seconds={t: service[t] for t in rho},
        max_utilization=rho,
    )


# realtime 4 req/s: 0.4 of a fast replica at a 50% limit, one fast; batch 4 req/s: 0.8 of a
# cheap replica, one cheap. The cheapest fleet is (1 fast, 1 cheap), $2.50/h.
WANTS = [_need("realtime", 4.0, True), _need("batch", 4.0, False)]
ASKED = {"fast": 1, "cheap": 1}
LEADS = {"fast": 120.0, "cheap": 100.0}


def _held(fast: int, seconds: float = 300.0) -> dict[str, Held]:
    """Two fast replicas held from an earlier peak for `seconds` more; no cheap one."""
    return {"fast": Held(fast, seconds), "cheap": Held(0, 300.0)}


def test_a_held_tier_that_serves_the_demand_spares_the_other_its_replica() -> None:
    # A second fast replica is held from an earlier peak: both classes fit on two (0.8 of
    # their 1.0 at 50%), so the cheap one is not asked for and batch is routed to fast.
    lowered, solution = lean([FAST, CHEAP], WANTS, None, ASKED, _held(2), LEADS)
    assert lowered == {"fast": 1, "cheap": 0}
    assert solution is not None and solution.replicas == {"fast": 2, "cheap": 0}
    assert solution.routing["batch"] == {"fast": pytest.approx(1.0)}


@pytest.mark.parametrize(
    ("held", "fixed", "options"),
    [
        pytest.param(_held(1), frozenset(), [FAST, CHEAP], id="nothing-held"),
        pytest.param(_held(2), frozenset({"cheap"}), [FAST, CHEAP], id="fixed"),
        # The held fast replica has no node (its tier is capped at one): it serves nothing.
        pytest.param(
            _held(2), frozenset(), [TierOption("fast", 2.0, 0, 1), CHEAP], id="unplaceable"
        ),
        # It goes in 90 s, before a cheap replica started then (100 s) would serve.
        pytest.param(_held(2, seconds=90.0), frozenset(), [FAST, CHEAP], id="held-too-briefly"),
    ],
)
def test_otherwise_the_recommendation_stands(
    held: dict[str, Held], fixed: frozenset[str], options: list[TierOption]
) -> None:
    assert lean(options, WANTS, None, ASKED, held, LEADS, fixed) == (ASKED, None)


def test_a_held_tier_spares_only_what_its_room_takes() -> None:
    # batch at 12 req/s: two fast replicas at 50% hold realtime's 0.4 and 6 req/s of batch
    # (0.6); the other 6 req/s take 1.2 cheap replica-seconds/s at 90%: two of three.
    wants = [_need("realtime", 4.0, True), _need("batch", 12.0, False)]
    asked = {"fast": 1, "cheap": 3}
    lowered, _ = lean([FAST, CHEAP], wants, None, asked, _held(2), LEADS)
    assert lowered == {"fast": 1, "cheap": 2}


def test_how_long_a_hold_lasts_is_the_delay_from_the_recommendation_holding_it() -> None:
    now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    decisions = {
        "fast": ScaleDecision(2, now - timedelta(seconds=100), 1),  # held since 100 s ago
        "cheap": ScaleDecision(3),  # nothing held: this pass's own
    }
    assert holds(decisions, now, 300) == {"fast": Held(2, 200.0), "cheap": Held(3, 300.0)}


def test_the_planner_does_not_buy_a_cheap_fleet_beside_the_held_dear_one() -> None:
    """Realtime (H100 only) fell to a quarter of a peak that took two H100s; batch can go
    to either tier. The cheapest fleet for the new demand is one H100 and more RTX 4090s,
    but the delay holds the second H100 for 300 s and it serves batch: no RTX 4090 is
    added beside it, and the decision says why."""
    s = spec(tiers=[h100(maxReplicas=8), rtx4090()], classes=[realtime(), batch()])
    running = {"h100": 1, "rtx4090": 0}
    demand = {"realtime": 6000.0, "batch": 6000.0}
    seen = observe(s, demand, ready=running)
    first = plan(s, seen, previous(running, {"realtime": {"h100": 100}, "batch": {"h100": 100}}))
    fleet = replicas(first)
    assert fleet["h100"] == 2
    later = observe(s, {**demand, "realtime": 1500.0}, now=30.0, ready=fleet)
    second = plan(s, later, status_from(first, later))
    assert replicas(second) == fleet  # held, nothing added
    assert second.tiers["rtx4090"].spared_replicas >= 1
    assert "held replicas serve: rtx4090 recommended" in second.message
    assert "the scale-down delay holds on h100" in second.message
