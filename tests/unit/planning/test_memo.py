"""The planner's solver caches: a plan is the same with them, cold or warm, as without."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpufleet.planning import memo
from gpufleet.planning.optimizer import SOLUTIONS, optimize
from gpufleet.planning.planner import plan
from gpufleet.planning.program import ClassNeed, TierOption
from gpufleet.planning.records import Plan
from tests.unit.planning.factories import observe, previous, status_from
from tests.unit.planning.test_planner_properties import PROPERTY, World, worlds

pytestmark = pytest.mark.timeout(120)


def _passes(world: World) -> list[Plan]:
    """A pool's first pass, then passes on the same world until it settles (these reach
    the routing program: Ready replicas lag the plan)."""
    seen = observe(world.spec, world.demand, ready=world.ready)
    plans = [plan(world.spec, seen, previous(dict(world.ready), {}))]
    for i in range(1, 4):
        running = {n: t.replicas for n, t in plans[-1].tiers.items()}
        seen = observe(world.spec, world.demand, now=30 * i, ready=running)
        plans.append(plan(world.spec, seen, status_from(plans[-1], seen)))
    return plans


@PROPERTY
@given(worlds(), st.sampled_from([1 + 1e-9, 1.001, 1.05]))
def test_a_plan_is_the_same_without_the_caches_and_with_them_cold_or_warm(
    world: World, nearby: float
) -> None:
    with memo.bypassed():
        uncached = _passes(world)
    memo.clear_all()
    # The caches first hold a neighbour's programs (demand a hair or a few percent off):
    # a key that rounded, or forgot an input, would answer the world with them.
    _passes(dataclasses.replace(world, demand={c: v * nearby for c, v in world.demand.items()}))
    assert _passes(world) == uncached
    assert _passes(world) == uncached  # warm: its own programs now
    assert SOLUTIONS.stats().hits > 0


def _need(name: str, rate: float) -> ClassNeed:
    return ClassNeed(
        name=name,
        priority=0,
        rate_rps=rate,
        tokens_per_request=400,
        service_seconds={"fast": 0.1, "cheap": 0.2},
        max_utilization={"fast": 0.9, "cheap": 0.9},
    )


TIERS = [TierOption("fast", 2.0, 0, 10), TierOption("cheap", 0.5, 0, 10)]


def test_the_same_program_is_solved_once_and_a_caller_cannot_change_the_remembered_answer() -> None:
    memo.clear_all()
    first = optimize(TIERS, [_need("batch", 40)], None)
    first.replicas["cheap"] = 99  # type: ignore[index]
    again = optimize(TIERS, [_need("batch", 40)], None)
    assert again.replicas == {"fast": 0, "cheap": 9}
    stats = SOLUTIONS.stats()
    assert (stats.hits, stats.misses) == (1, 1)


@pytest.mark.parametrize(
    "changed",
    [
        pytest.param(lambda: ([_need("batch", 40 * (1 + 1e-12))], TIERS, None), id="rate"),
        pytest.param(lambda: ([_need("batch", 40)], TIERS, 4.0), id="budget"),
        pytest.param(
            lambda: ([_need("batch", 40)], [TIERS[0], TierOption("cheap", 0.5, 0, 8)], None),
            id="max-replicas",
        ),
        pytest.param(
            lambda: (
                [dataclasses.replace(_need("batch", 40), tokens_per_request=401)],
                TIERS,
                None,
            ),
            id="tokens-per-request",
        ),
    ],
)
def test_any_input_that_differs_at_all_is_solved_anew(changed: object) -> None:
    memo.clear_all()
    optimize(TIERS, [_need("batch", 40)], None)
    classes, tiers, budget = changed()  # type: ignore[operator]
    optimize(tiers, classes, budget)
    assert SOLUTIONS.stats().misses == 2


def test_the_cache_holds_at_most_its_size_dropping_the_least_recently_used() -> None:
    cache: memo.Lru[int] = memo.Lru("test", 3)
    for k in range(5):
        cache.put(k, k)
    cache.get(2)  # now the most recently used
    cache.put(5, 5)
    assert cache.stats().size == 3
    assert [cache.get(k) for k in range(6)] == [None, None, 2, None, 4, 5]


def test_planning_many_pools_never_grows_the_optimizer_cache_past_its_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(SOLUTIONS, "maxsize", 4)
    memo.clear_all()
    for k in range(12):
        optimize(TIERS, [_need("batch", 10.0 + k)], None)
    assert SOLUTIONS.stats().size == 4
    assert SOLUTIONS.stats().misses == 12


def test_an_array_key_tells_apart_any_two_programs_the_solver_would_tell_apart() -> None:
    matrix = np.array([[1.0, 0.0], [0.0, 2.0]])
    vector = np.array([0.0, 1.0])
    key = memo.array_key(matrix, vector)
    assert memo.array_key(matrix.copy(), vector.copy()) == key
    assert memo.array_key(np.array([[1.0, 0.0], [0.0, 2.0 + 1e-15]]), vector) != key
    assert memo.array_key(np.array([[1.0, 0.0], [2.0, 0.0]]), vector) != key  # moved
    assert memo.array_key(matrix.T.reshape(1, 4), vector) != key  # another shape
    assert memo.array_key(matrix, np.array([-0.0, 1.0])) != key


def test_bypassed_caches_neither_answer_nor_remember() -> None:
    memo.clear_all()
    with memo.bypassed():
        optimize(TIERS, [_need("batch", 40)], None)
        optimize(TIERS, [_need("batch", 40)], None)
    assert SOLUTIONS.stats().size == 0
    assert SOLUTIONS.stats().hits == 0
