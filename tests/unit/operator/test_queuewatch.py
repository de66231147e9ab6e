"""The queue watch: which readings of every pool's tiers start an early pass."""

from __future__ import annotations

import asyncio
import math

import pytest

from gpufleet.queuewatch import (
    QUIET_EARLY_PASSES,
    AtLastPass,
    QueueWatch,
    TierLoad,
    reading_of,
    surge,
)

pytestmark = pytest.mark.timeout(5)


def test_a_queue_that_formed_and_held_for_two_checks_is_a_surge() -> None:
    found = surge(
        {"h100": TierLoad(12.0, 2)}, {"h100": TierLoad(9.0, 2)}, {"h100": AtLastPass(4.0)}
    )
    assert found is not None and found.tier == "h100"
    assert found.describe() == "12 requests waiting on h100 (4 at the last pass)"


def test_a_step_in_prompt_tokens_held_for_two_checks_is_a_surge() -> None:
    found = surge(
        {"h100": TierLoad(0.0, 1, 2600.0)},
        {"h100": TierLoad(0.0, 1, 2100.0)},
        {"h100": AtLastPass(0.0, 1000.0, 25.0)},
    )
    assert found is not None and found.step == pytest.approx(2.6)
    assert found.describe() == "prompt tokens/s on h100 at 2.6x their level at the last pass"


@pytest.mark.parametrize(
    ("now", "before", "at_last_pass", "why"),
    [
        (TierLoad(3.0, 2), TierLoad(3.0, 2), AtLastPass(), "under two waiting per pod"),
        (TierLoad(12.0, 2), TierLoad(1.0, 2), AtLastPass(), "one check only: a scrape's spike"),
        (TierLoad(12.0, 2), TierLoad(14.0, 2), AtLastPass(), "shrinking since the last check"),
        (TierLoad(12.0, 2), TierLoad(12.0, 2), AtLastPass(7.0), "under twice the last pass's"),
        (TierLoad(12.0, 2), None, AtLastPass(), "no earlier reading"),
        (TierLoad(0, 1, 1900.0), TierLoad(0, 1, 2500.0), AtLastPass(0, 1000, 25), "under twice"),
        (TierLoad(0, 1, 2500.0), TierLoad(0, 1, 1500.0), AtLastPass(0, 1000, 25), "one check over"),
        (TierLoad(0, 1, 2500.0), TierLoad(0, 1, 2600.0), AtLastPass(0, 1000, 25), "falling"),
        (TierLoad(0, 1, 2500.0), TierLoad(0, 1, 2500.0), AtLastPass(0, None, 25), "no level"),
        (TierLoad(0, 1, 2500.0), TierLoad(0, 1, 2500.0), AtLastPass(0, 0.0, 25), "from nothing"),
        (TierLoad(0, 1, None), TierLoad(0, 1, 2500.0), AtLastPass(0, 1000, 25), "no rate now"),
        (TierLoad(0, 1, 2500), TierLoad(0, 1, 2500), AtLastPass(0, 1000, 19), "under 20 requests"),
        (TierLoad(0, 1, 2500), TierLoad(0, 1, 2500), AtLastPass(0, 1000), "requests unknown"),
    ],
)
def test_what_is_not_a_surge(
    now: TierLoad, before: TierLoad | None, at_last_pass: AtLastPass, why: str
) -> None:
    earlier = {"h100": before} if before is not None else {}
    assert surge({"h100": now}, earlier, {"h100": at_last_pass}) is None, why


def test_of_several_tiers_the_one_furthest_over_its_bar_is_named() -> None:
    now = {"h100": TierLoad(10.0, 1), "rtx4090": TierLoad(40.0, 4)}  # bars: 2 and 8
    found = surge(now, now, {})
    assert found is not None and found.tier == "rtx4090"


def test_a_pool_is_woken_once_per_surge_until_its_pass_and_the_pass_raises_the_bar() -> None:
    watch = QueueWatch(lambda: None, lambda namespace, name, why: True, period_seconds=1.0)
    key = ("ns", "p")

    def check(waiting: float) -> list[tuple[str, str]]:
        return [k for k, _ in watch.check({key: {"h100": TierLoad(waiting, 1)}})]

    assert check(0.0) == []
    assert check(4.0) == []  # one check over the bar
    assert check(6.0) == [key]
    watch.woke(*key, "h100")  # what run() does once the loop took the wake
    assert check(9.0) == []  # woken, its pass not run yet
    watch.passed("ns", "p")  # the pass saw 9 waiting: the bar is 18 now
    assert check(12.0) == []
    assert check(17.0) == []
    assert check(18.0) == []  # over 18 once only
    assert check(20.0) == [key]
    watch.passed("ns", "p")
    assert watch.check({}) == []  # the pool's series are gone: its bases are forgotten
    assert watch._at_last_pass == {} and watch._level == {}


def test_the_level_of_prompt_tokens_at_a_pass_is_smoothed_over_the_checks_before() -> None:
    watch = QueueWatch(lambda: None, lambda namespace, name, why: True, period_seconds=1.0)
    key = ("ns", "p")
    for rate in (1000.0, 1000.0, 500.0):  # one quiet window
        assert watch.check({key: {"h100": TierLoad(0.0, 1, rate, 40.0)}}) == []
    watch.passed("ns", "p")
    base = watch._at_last_pass[key]["h100"]
    assert base.prompt_tokens_per_second == pytest.approx(900.0)  # 20% of the way to 500
    assert base.requests_in_window == pytest.approx(40.0)
    # 1700 tokens/s is over twice the quiet window's 500, not twice the level: no surge.
    assert watch.check({key: {"h100": TierLoad(0.0, 1, 1700.0)}}) == []
    assert watch.check({key: {"h100": TierLoad(0.0, 1, 1700.0)}}) == []
    assert watch.check({key: {"h100": TierLoad(0.0, 1, 1900.0)}}) == []  # twice 900, once
    assert watch.check({key: {"h100": TierLoad(0.0, 1, 1900.0)}}) != []  # and twice


def test_traffic_a_pass_moved_onto_a_tier_is_its_level_there_not_a_surge() -> None:
    watch = QueueWatch(lambda: None, lambda namespace, name, why: True, period_seconds=1.0)
    key = ("ns", "p")
    quiet = {"h100": TierLoad(0.0, 1, 1000.0, 40.0), "rtx4090": TierLoad(0.0, 2, 600.0, 30.0)}
    for _ in range(3):
        assert watch.check({key: quiet}) == []
    # The pass moves batch (2000 tokens/s) from the 4090s onto the H100.
    watch.passed("ns", "p", {"h100": 3000.0, "rtx4090": 400.0})
    bases = watch._at_last_pass[key]
    assert bases["h100"].prompt_tokens_per_second == pytest.approx(3000.0)
    # The 4090s keep their higher level: a surge there must double what they had.
    assert bases["rtx4090"].prompt_tokens_per_second == pytest.approx(600.0)
    moved = {"h100": TierLoad(0.0, 1, 3000.0, 90.0), "rtx4090": TierLoad(0.0, 2, 400.0, 20.0)}
    assert watch.check({key: moved}) == []
    assert watch.check({key: moved}) == []  # 3x the old level, the level the pass set
    doubled = {"h100": TierLoad(0.0, 1, 6200.0, 180.0), "rtx4090": moved["rtx4090"]}
    assert watch.check({key: doubled}) == []
    found = watch.check({key: doubled})
    assert [k for k, _ in found] == [key]
    assert found[0][1].describe() == (
        "prompt tokens/s on h100 at 2.1x their level at the last pass"
    )


def test_run_reads_every_period_and_wakes_the_surging_pool() -> None:
    key = ("ns", "p")
    readings = iter(
        [None, {key: {"t": (5.0, 1, None, None)}}, {key: {"t": (6.0, 1, None, None)}}]
        + [{key: {"t": (6.0, 1, None, None)}}] * 20
    )
    woken: list[str] = []

    def wake(namespace: str, name: str, why: str) -> bool:
        woken.append(why)
        return True

    async def scenario() -> None:
        watch = QueueWatch(lambda: reading_of(next(readings)), wake, period_seconds=0.01)
        task = asyncio.create_task(watch.run())
        await asyncio.sleep(0.2)
        task.cancel()

    asyncio.run(scenario())
    assert woken == ["6 requests waiting on t (0 at the last pass)"]  # once: no pass ran


def test_gpufleet_run_checks_every_scrape_by_default_and_refuses_a_negative_period(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from gpufleet.cli import build_parser, main

    parser = build_parser(["run"])
    assert math.isnan(parser.parse_args(["run"]).queue_check_seconds)
    assert parser.parse_args(["run", "--queue-check-seconds=0"]).queue_check_seconds == 0
    assert main(["run", "--queue-check-seconds=-1"]) == 2
    assert "--queue-check-seconds must be 0 (off) or more" in capsys.readouterr().err


def test_an_early_pass_that_left_the_surged_tier_as_it_was_keeps_the_bar_a_few_times() -> None:
    # A step read a few seconds in: the pass's demand window had seen part of it, so it
    # kept the tier's replicas. Raising the bar to what it saw would leave the rest of the
    # step, under twice that, unanswered until the next interval.
    watch = QueueWatch(lambda: None, lambda namespace, name, why: True, period_seconds=1.0)
    key = ("ns", "p")

    def check(waiting: float) -> list[tuple[str, str]]:
        found = [(k, s.tier) for k, s in watch.check({key: {"h100": TierLoad(waiting, 1)}})]
        for k, tier in found:
            watch.woke(*k, tier)  # what run() does once the loop took the wake
        return [k for k, _ in found]

    assert check(0.0) == [] and check(6.0) == [] and check(8.0) == [key]
    watch.passed("ns", "p", resized=())  # the bar stays at 2 (0 waited at the last pass)
    assert check(9.0) == [key]
    for _ in range(QUIET_EARLY_PASSES - 2):
        watch.passed("ns", "p", resized=())
        assert check(10.0) == [key]
    watch.passed("ns", "p", resized=("rtx4090",))  # another tier moved: still quiet on h100
    assert check(10.0) == [key]
    watch.passed("ns", "p", resized=())  # the last quiet one allowed: 10 is the base now
    assert check(12.0) == [] and check(20.0) == [] and check(20.0) == [key]
    watch.passed("ns", "p", resized=("h100",))  # it resized h100: 20 is the base, count reset
    assert check(30.0) == [] and check(40.0) == [] and check(41.0) == [key]
    watch.passed("ns", "p", resized=())
    assert check(41.0) == [key]


def test_a_regular_pass_that_resized_nothing_raises_the_bar() -> None:
    watch = QueueWatch(lambda: None, lambda namespace, name, why: True, period_seconds=1.0)
    key = ("ns", "p")
    for waiting in (0.0, 9.0, 9.0):
        watch.check({key: {"h100": TierLoad(waiting, 1)}})
    watch.passed("ns", "p", resized=())  # not woken early: its readings are the base
    assert watch._at_last_pass[key]["h100"].waiting == 9.0
