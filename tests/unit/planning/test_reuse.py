"""Keeping the optimizer's last answer while demand moves less than a tolerance (`reuse`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import timedelta

import numpy as np
import pytest

from gpufleet.api.status import InferencePoolStatus, Reason, Sizing
from gpufleet.planning import memo, reuse
from gpufleet.planning.optimizer import Solution, optimize
from gpufleet.planning.planner import plan
from gpufleet.planning.program import ClassNeed, TierOption
from gpufleet.planning.records import Plan
from tests.unit.planning.factories import at, observe, previous, replicas, spec, status_from

pytestmark = pytest.mark.timeout(60)

CHEAP = TierOption("cheap", 1.0, 0, 10)
FAST = TierOption("fast", 3.0, 0, 10)


def _need(rate: float, *, rho: float = 0.8, tiers: Sequence[str] = ("cheap",)) -> ClassNeed:
    # One replica-second per request: a tier holds `rho` requests/s per replica.
    return ClassNeed(
        name="c",
        priority=0,
        rate_rps=rate,
        tokens_per_request=100,
        service_seconds=dict.fromkeys(tiers, 1.0),
        max_utilization=dict.fromkeys(tiers, rho),
    )


def _solve(
    options: Sequence[TierOption],
    needs: Sequence[ClassNeed],
    sizing: Sizing | None,
    budget: float | None = None,
) -> tuple[Solution, Sizing | None, bool]:
    return reuse.solve(options, needs, budget, sizing, at(30))


@pytest.fixture
def solves(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The optimizer's solves, counted (caches off: each call is one)."""
    count: list[int] = []

    def counted(*args: object) -> Solution:
        count.append(1)
        return optimize(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(reuse, "optimize", counted)
    with memo.bypassed():
        yield count


def test_an_answer_within_tolerance_that_still_holds_is_kept_without_solving(
    solves: list[int],
) -> None:
    first, sizing, kept = _solve([CHEAP], [_need(7.0)], None)
    assert (first.replicas, kept, len(solves)) == ({"cheap": 9}, False, 1)  # 7 / 0.8 = 8.75
    assert sizing is not None and sizing.classes[0].tokens_per_second == pytest.approx(700)

    again, carried, kept = _solve([CHEAP], [_need(7.0 * 1.02)], sizing)  # 7.14 / 0.8 = 8.9
    assert kept is True and len(solves) == 1
    assert again.replicas == {"cheap": 9}
    assert carried is sizing  # the reference stays what it was solved for
    # Also within tolerance below: kept (over-buy of at most the tolerance).
    assert _solve([CHEAP], [_need(7.0 * 0.96)], sizing)[2] is True
    assert len(solves) == 1


def test_demand_beyond_tolerance_is_solved_again(solves: list[int]) -> None:
    _, sizing, _ = _solve([CHEAP], [_need(7.0)], None)
    lower, resized, kept = _solve([CHEAP], [_need(7.0 * 0.94)], sizing)  # 6.58 / 0.8 = 8.2
    assert kept is False and len(solves) == 2
    assert lower.replicas == {"cheap": 9}  # the same replicas, but solved again ...
    assert resized is not None and resized.classes[0].tokens_per_second == pytest.approx(658)
    fewer, _, kept = _solve([CHEAP], [_need(7.0 * 0.85)], sizing)  # 5.95 / 0.8 = 7.4
    assert (fewer.replicas, kept) == ({"cheap": 8}, False)


def test_an_answer_that_no_longer_holds_the_demand_is_solved_again_within_tolerance(
    solves: list[int],
) -> None:
    roomy = [TierOption("cheap", 1.0, 0, 20)]
    first, sizing, _ = _solve(roomy, [_need(8.0)], None)  # exactly 10 replicas at 0.8
    assert first.replicas == {"cheap": 10}
    more, resized, kept = _solve(roomy, [_need(8.0 * 1.01)], sizing)  # 1% more: 10.1
    assert kept is False and len(solves) == 2
    assert more.replicas == {"cheap": 11} and not more.shortage
    assert resized is not None and resized.tiers[0].replicas == 11


def test_the_split_moves_onto_tiers_with_room_when_the_same_replicas_hold_it(
    solves: list[int],
) -> None:
    # The optimizer fills the cheap tier to its limit and puts the rest on the fast one,
    # which has room left: 9.3 requests/s = 8 cheap x 0.8 + 2.9 on 4 fast (room 3.2).
    need = _need(9.3, tiers=("cheap", "fast"))
    first, sizing, _ = _solve([TierOption("cheap", 1.0, 0, 8), FAST], [need], None)
    assert first.replicas == {"cheap": 8, "fast": 4}
    grown = _need(9.3 * 1.02, tiers=("cheap", "fast"))  # 9.486: the same split overloads fast?
    kept, _, reused = _solve([TierOption("cheap", 1.0, 0, 8), FAST], [grown], sizing)
    assert reused is True and len(solves) == 1
    assert kept.replicas == {"cheap": 8, "fast": 4}
    load = {t: 9.3 * 1.02 * s for t, s in kept.routing["c"].items()}
    assert load["cheap"] <= 8 * 0.8 * (1 + 1e-9) and load["fast"] <= 4 * 0.8 * (1 + 1e-9)


def test_a_split_that_overloads_a_full_tier_is_moved_to_one_with_room() -> None:
    options = [CHEAP, FAST]
    need = _need(10.0, tiers=("cheap", "fast"))
    tight = {"c": {"cheap": 0.5, "fast": 0.5}}  # 5 on 6 cheap (room 4.8), 5 on 7 fast (5.6)
    replicas_ = {"cheap": 6, "fast": 7}
    assert not reuse.holds(options, [need], None, replicas_, tight)
    moved = reuse.reroute(options, [need], replicas_, tight)
    assert moved is not None and reuse.holds(options, [need], None, replicas_, moved)
    assert moved["c"]["cheap"] == pytest.approx(0.48)
    assert reuse.reroute(options, [_need(10.5, tiers=("cheap", "fast"))], replicas_, tight) is None


@pytest.mark.parametrize(
    ("options", "need", "budget"),
    [
        ([TierOption("cheap", 1.0, 0, 12)], _need(7.0), None),  # maxReplicas
        ([TierOption("cheap", 1.5, 0, 10)], _need(7.0), None),  # price
        ([CHEAP], _need(7.0, rho=0.6), None),  # objective (the utilization it allows)
        ([CHEAP], _need(7.0), 50.0),  # budget
    ],
    ids=["max-replicas", "price", "objective", "budget"],
)
def test_any_other_input_changed_is_solved_again(
    solves: list[int], options: list[TierOption], need: ClassNeed, budget: float | None
) -> None:
    _, sizing, _ = _solve([CHEAP], [_need(7.0)], None)
    assert sizing is not None
    assert reuse.inputs_digest(options, [need], budget) != sizing.inputs
    solution, _, kept = _solve(options, [need], sizing, budget)
    assert kept is False and len(solves) == 2
    assert solution.replicas == optimize(options, [need], budget).replicas


def test_measured_quantities_moving_within_a_grid_step_keep_the_answer_checked_exactly(
    solves: list[int],
) -> None:
    """Service times and utilization limits follow the observed lengths and move a little
    every pass: within a step of the grid the answer is kept, if it holds with this pass's
    exact values; a value that creeps across a step is solved again."""
    _, sizing, _ = _solve([CHEAP], [_need(7.0)], None)  # 9 replicas hold 7.2 requests/s
    assert sizing is not None

    def slower(factor: float) -> ClassNeed:
        need = _need(7.0)
        return ClassNeed(
            name=need.name,
            priority=need.priority,
            rate_rps=need.rate_rps,
            tokens_per_request=need.tokens_per_request,
            service_seconds={"cheap": factor},
            max_utilization=need.max_utilization,
        )

    assert reuse.grid(np.array([1.0]))[0] == reuse.grid(np.array([1.02]))[0]
    assert _solve([CHEAP], [slower(1.02)], sizing)[2] is True  # 7.14 s of work/s <= 7.2
    assert len(solves) == 1
    assert reuse.grid(np.array([1.04]))[0] == 0
    assert _solve([CHEAP], [slower(1.04)], sizing)[2] is False  # same step, 7.28 > 7.2
    assert reuse.grid(np.array([0.9]))[0] != 0
    assert _solve([CHEAP], [slower(0.9)], sizing)[2] is False  # holds, but another step
    assert len(solves) == 3


def test_an_answer_with_a_shortage_is_not_kept() -> None:
    with memo.bypassed():
        short, sizing, _ = _solve([CHEAP], [_need(9.0)], None)
    assert short.shortage and sizing is None


def test_an_answer_where_a_class_gave_way_is_not_kept() -> None:
    # realtime, kept from batch's prompts on the one tier, gives way rather than leave
    # batch with nothing (`optimizer`); that split breaks the program `kept` checks.
    realtime = ClassNeed(
        "realtime",
        100,
        2.0,
        100,
        {"cheap": 1.0},
        {"cheap": 0.5},
        shared_utilization={"cheap": {"batch": 0.0}},
        yielding_utilization={"cheap": {"batch": 0.5}},
    )
    batch = ClassNeed("batch", 1, 2.0, 100, {"cheap": 1.0}, {"cheap": 0.9})
    with memo.bypassed():
        given, sizing, _ = _solve([CHEAP], [realtime, batch], None)
    assert given.given_way == ("realtime",) and not given.shortage
    assert sizing is None


# -- the planner -------------------------------------------------------------------------


POOL = spec()
LIVE = {"realtime": {"h100": 100}, "batch": {"rtx4090": 100}}


def _stream(levels: Sequence[float], status: InferencePoolStatus | None = None) -> list[Plan]:
    """Passes 30 s apart, demand `level` x (2000 realtime, 20000 batch) tokens/s, replicas
    Ready as decided, the status carried as the reconciler writes it."""
    status = status or previous({"h100": 1, "rtx4090": 1}, LIVE)
    ready = {"h100": 1, "rtx4090": 1}
    plans = []
    for k, level in enumerate(levels):
        seen = observe(
            POOL, {"realtime": 2000 * level, "batch": 20000 * level}, now=30 * k, ready=ready
        )
        plans.append(plan(POOL, seen, status))
        status = status_from(plans[-1], seen)
        ready = replicas(plans[-1])
    return plans


def test_the_planner_keeps_its_answer_and_says_so() -> None:
    plans = _stream([1.0] * 4 + [1.02])
    sized, last = plans[-2].sizing, plans[-1].sizing
    assert sized is not None and last == sized  # kept: the status carries it on unchanged
    assert sized.time == at(0)  # as the first pass solved it
    assert "optimizer skipped" in plans[-1].message
    assert "optimizer skipped" not in plans[0].message
    assert replicas(plans[-1]) == replicas(plans[-2])


def test_real_growth_scales_up_at_once() -> None:
    plans = _stream([1.0] * 4 + [1.5])
    assert plans[-1].reason == Reason.DEMAND_INCREASED
    assert plans[-1].tiers["rtx4090"].replicas > plans[-2].tiers["rtx4090"].replicas
    assert plans[-1].sizing is not None and plans[-1].sizing.time == at(120)


def test_the_scale_down_delay_runs_as_before_through_kept_passes() -> None:
    # Demand falls by half, then wobbles within the tolerance. Every step down waits the
    # delay from the recommendation that allowed it, exactly (not from a later pass:
    # passes that keep the answer recommend what it recommended), and no longer.
    levels = [1.0] * 3 + [0.5] + [0.5, 0.51, 0.5, 0.49] * 6
    plans = _stream(levels)
    fall = plans[3].tiers["rtx4090"]
    assert fall.scale_down_since == at(60) and fall.replicas == 7  # held at 7, not 4
    delay = POOL.scaling.scale_down_delay_seconds
    steps = []
    for k in range(4, len(plans)):
        before, now = plans[k - 1].tiers["rtx4090"], plans[k].tiers["rtx4090"]
        if now.replicas < before.replicas:
            assert before.scale_down_since is not None
            assert at(30 * k) - before.scale_down_since >= timedelta(seconds=delay)
            assert at(30 * (k - 1)) - before.scale_down_since < timedelta(seconds=delay)
            assert now.replicas == before.scale_down_to
            steps.append(now.replicas)
    assert steps == [4, 3]
    assert plans[-1].tiers["rtx4090"].scale_down_since is None
    kept = [k for k in range(4, 12) if "optimizer skipped" in plans[k].message]
    assert kept  # the delay ran through passes that kept the answer


def test_plan_is_the_same_whatever_ran_before_it() -> None:
    """Pure: the same inputs give the same plan, first in a process or after other pools,
    with the caches off or on (reuse reads only the status)."""
    a = [1.0, 1.02, 0.99, 1.2, 1.21]
    b = [3.0, 2.0, 2.04, 0.5]
    memo.clear_all()
    first_a = _stream(a)
    first_b = _stream(b)
    memo.clear_all()
    second_b = _stream(b)
    second_a = _stream(a)
    with memo.bypassed():
        bare_a, bare_b = _stream(a), _stream(b)
    assert first_a == second_a == bare_a
    assert first_b == second_b == bare_b
