"""The optimizer on small hand-made problems whose answers can be worked out by hand."""

from __future__ import annotations

import pytest

from gpufleet.planning.optimizer import optimize
from gpufleet.planning.program import ClassNeed, TierOption

pytestmark = pytest.mark.timeout(2)

# Two tiers: "fast" (1 replica = 1.0 replica-second per second, holds everything),
# "cheap" (a quarter of the price, half the speed, too slow for "tight").
FAST = TierOption("fast", 2.0, 0, 10)
CHEAP = TierOption("cheap", 0.5, 0, 10)


def need(name: str, rate: float, *, tight: bool = False, priority: int = 0) -> ClassNeed:
    service = {"fast": 0.1, "cheap": 0.2}  # seconds of replica time per request
    rho = {"fast": 0.5} if tight else {"fast": 0.9, "cheap": 0.9}
    return ClassNeed(
        name=name,
        priority=priority,
        rate_rps=rate,
        tokens_per_request=400,
        service_seconds={t: service[t] for t in rho},
        max_utilization=rho,
    )


def test_cheapest_capacity_wins_and_replicas_are_just_enough() -> None:
    s = optimize([FAST, CHEAP], [need("batch", 40)], None)
    # 40 req/s x 0.2 s = 8 replica-seconds/s at 90%: 9 cheap ($4.5) beat 5 fast ($10).
    assert s.replicas == {"fast": 0, "cheap": 9}
    assert s.routing == {"batch": {"cheap": 1.0}}
    assert not s.shortage and s.cost_per_hour == pytest.approx(4.5)


def test_a_tier_serving_a_tight_class_is_sized_for_it_with_all_its_load() -> None:
    # tight: 4 req/s x 0.1 = 0.4 of a fast replica, allowed 50%: fits one.
    # Adding 1 req/s of batch on that replica would make 0.5: still fits; 2 would not.
    s = optimize([FAST, CHEAP], [need("tight", 4, tight=True), need("batch", 1)], None)
    assert s.replicas["fast"] == 1
    load = 4 * 0.1 + 1 * 0.1 * s.routing["batch"].get("fast", 0.0)
    assert load <= 0.5 + 1e-9


@pytest.mark.parametrize(
    ("fast", "budget", "served_tight"),
    [
        pytest.param(TierOption("fast", 2.0, 0, 1), None, 1.0, id="max-replicas"),
        pytest.param(FAST, 2.0, 1.0, id="budget"),
    ],
)
def test_shortage_serves_higher_priority_first(
    fast: TierOption, budget: float | None, served_tight: float
) -> None:
    classes = [need("batch", 40, priority=1), need("tight", 4, tight=True, priority=9)]
    s = optimize([fast, TierOption("cheap", 0.5, 0, 0)], classes, budget)
    assert s.shortage
    assert s.served["tight"] == pytest.approx(served_tight)
    assert s.served["batch"] < 0.1
    if budget is not None:
        assert s.cost_per_hour <= budget


def test_min_replicas_are_kept_and_used() -> None:
    s = optimize([TierOption("fast", 2.0, 2, 10), CHEAP], [need("batch", 10)], None)
    # Two fast replicas at 90% carry 18 req/s of batch: no cheap replica needed.
    assert s.replicas == {"fast": 2, "cheap": 0}
    assert s.routing["batch"] == {"fast": 1.0}


def test_zero_demand_buys_nothing_above_minimum() -> None:
    s = optimize([FAST, CHEAP], [need("batch", 0)], 100.0)
    assert s.replicas == {"fast": 0, "cheap": 0}
    assert s.served == {"batch": 1.0}


def test_same_problem_same_answer() -> None:
    classes = [need("tight", 3, tight=True, priority=5), need("batch", 33)]
    assert optimize([FAST, CHEAP], classes, 20.0) == optimize([FAST, CHEAP], classes, 20.0)


def _blocked(rho: float) -> ClassNeed:
    """tight, whose objective holds on "fast" only up to `rho` beside batch's prompts."""
    base = need("tight", 4, tight=True)
    return ClassNeed(
        name=base.name,
        priority=base.priority,
        rate_rps=base.rate_rps,
        tokens_per_request=base.tokens_per_request,
        service_seconds=base.service_seconds,
        max_utilization=base.max_utilization,
        shared_utilization={"fast": {"batch": rho}},
    )


@pytest.mark.parametrize(
    ("rho", "batch_on_fast"),
    [
        pytest.param(0.5, True, id="no-blocking-shares"),
        pytest.param(0.45, False, id="blocking-leaves-no-room-isolates"),
        pytest.param(0.0, False, id="cannot-share-isolates"),
    ],
)
def test_head_of_line_blocking_keeps_a_tight_class_away_from_long_prompts(
    rho: float, batch_on_fast: bool
) -> None:
    # tight alone: 0.4 of a fast replica (50% allowed). Sharing the one replica it needs
    # with 1 req/s of batch (0.1 more) is free, unless batch's prompts block tight.
    s = optimize([FAST, CHEAP], [_blocked(rho), need("batch", 1)], None)
    assert s.replicas["fast"] == 1
    assert (s.routing["batch"].get("fast", 0.0) > 0) is batch_on_fast
    if not batch_on_fast:
        assert s.replicas["cheap"] == 1  # batch pays for its own replica


def test_blocking_that_only_lowers_utilization_still_allows_sharing_within_it() -> None:
    # Beside batch, tight holds up to 48%: 0.4 + 0.05 of batch fits its one fast replica.
    s = optimize([FAST, CHEAP], [_blocked(0.48), need("batch", 0.5)], None)
    assert s.replicas == {"fast": 1, "cheap": 0}
    assert s.routing["batch"] == {"fast": 1.0}
    # 1 req/s of batch would take it to 0.5 > 0.48: batch gets its own replica instead.
    s = optimize([FAST, CHEAP], [_blocked(0.48), need("batch", 1.0)], None)
    assert s.replicas == {"fast": 1, "cheap": 1}
    assert s.routing["batch"] == {"cheap": 1.0}


def _best_effort(yielding: float | None) -> ClassNeed:
    """realtime, planned best effort on "fast" only: 25% busy at most, never beside batch's
    prompts; giving way to batch (limit `yielding` there) when that is set."""
    return ClassNeed(
        name="realtime",
        priority=100,
        rate_rps=2.0,
        tokens_per_request=400,
        service_seconds={"fast": 0.1},
        max_utilization={"fast": 0.25},
        shared_utilization={"fast": {"batch": 0.0}},
        yielding_utilization={} if yielding is None else {"fast": {"batch": yielding}},
    )


def _batch_on_fast(rate: float) -> ClassNeed:
    return ClassNeed("batch", 1, rate, 400, {"fast": 0.1}, {"fast": 0.9})


def test_a_best_effort_class_gives_way_where_keeping_apart_leaves_a_class_short() -> None:
    tiers = [TierOption("fast", 2.0, 0, 4)]
    kept = optimize(tiers, [_best_effort(None), _batch_on_fast(20.0)], None)
    assert kept.served == {"realtime": 1.0, "batch": 0.0} and kept.shortage
    assert kept.given_way == ()
    given = optimize(tiers, [_best_effort(0.9), _batch_on_fast(20.0)], None)
    # 2 x 0.1 + 20 x 0.1 = 2.2 replica-seconds/s at batch's 90%: 3 replicas, not realtime's
    # 25% (9, above the 4 allowed).
    assert given.served == {"realtime": 1.0, "batch": 1.0} and not given.shortage
    assert given.given_way == ("realtime",)
    assert given.replicas == {"fast": 3}
    assert given.routing == {"realtime": {"fast": 1.0}, "batch": {"fast": 1.0}}


def test_a_best_effort_class_keeps_its_limit_and_its_distance_when_all_are_served() -> None:
    tiers = [TierOption("fast", 2.0, 0, 4), TierOption("cheap", 0.5, 0, 10)]
    batch = ClassNeed(
        "batch", 1, 20.0, 400, {"fast": 0.1, "cheap": 0.2}, {"fast": 0.9, "cheap": 0.9}
    )
    s = optimize(tiers, [_best_effort(0.9), batch], None)
    assert s.given_way == ()
    assert s.replicas == {"fast": 1, "cheap": 5}  # realtime 0.2 of a replica at 25%
    assert s.routing == {"realtime": {"fast": 1.0}, "batch": {"cheap": 1.0}}


def test_giving_way_on_a_capped_tier_serves_the_higher_priority_first() -> None:
    # One replica: realtime's 0.2 first, then batch up to 90% busy: 7 of its 20 req/s.
    tiers = [TierOption("fast", 2.0, 0, 1)]
    s = optimize(tiers, [_best_effort(0.9), _batch_on_fast(20.0)], None)
    assert s.served["realtime"] == 1.0 and s.shortage
    assert s.served["batch"] == pytest.approx(0.35, abs=1e-6)


def test_a_class_only_short_of_capacity_does_not_make_another_give_way() -> None:
    # realtime on "fast" (up to 4 replicas), kept from batch's prompts there; batch also
    # has "cheap" (1 replica): short, but served in part. realtime does not give way.
    tiers = [TierOption("fast", 2.0, 0, 4), TierOption("cheap", 0.5, 0, 1)]
    realtime = ClassNeed(
        "realtime",
        100,
        2.0,
        400,
        {"fast": 0.1},
        {"fast": 0.5},
        shared_utilization={"fast": {"batch": 0.0}},
        yielding_utilization={"fast": {"batch": 0.5}},
    )
    batch = ClassNeed(
        "batch", 1, 20.0, 400, {"fast": 0.1, "cheap": 0.2}, {"fast": 0.9, "cheap": 0.9}
    )
    s = optimize(tiers, [realtime, batch], None)
    assert s.shortage and s.served["realtime"] == 1.0
    assert s.served["batch"] == pytest.approx(0.9 / 0.2 / 20.0, abs=1e-5)  # one cheap replica
    assert s.routing["batch"] == {"cheap": 1.0}
