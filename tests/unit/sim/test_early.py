"""Early passes in the simulator: the operator's queue watch, on the simulated series."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from gpufleet.runtime import DEBOUNCE_SECONDS
from gpufleet.sim.early import EARLY_PASS_DELAY_SECONDS, EarlyPasses, tier_loads
from gpufleet.sim.engine import SimConfig, _Run, models_of, simulate
from gpufleet.sim.fleet import Preemption
from tests.unit.sim.factories import Recording, mixed_pool, trace

pytestmark = pytest.mark.timeout(20)

FLEET = {"h100": 1, "rtx4090": 1}
WEIGHTS = {"realtime": {"h100": 100}, "batch": {"rtx4090": 100}}
NO_PREEMPTION = Preemption(mean_up_seconds=0)


class Watched(Recording):
    """A fixed fleet the queue watch may wake, as it wakes the gpufleet planner."""

    early_passes = True


def _step() -> Any:
    """Batch at 1 req/s for 95 s, then at 12 req/s (prompts of 1,000 tokens) to 180 s: far
    more than one RTX 4090 prefills."""
    quiet = np.arange(0.0, 95.0, 1.0)
    surge = np.arange(95.0, 180.0, 1.0 / 12.0)
    return trace(np.concatenate([quiet, surge]), prompt=1000, output=100)


def _pass_times(config: SimConfig) -> tuple[list[float], int]:
    policy = Watched(FLEET, WEIGHTS)
    result = simulate(mixed_pool(), _step(), policy, config)
    return [s.time for s in policy.seen], result.early_passes


def test_a_surge_wakes_a_pass_between_intervals_and_the_next_comes_an_interval_later() -> None:
    times, early = _pass_times(SimConfig(preemption=NO_PREEMPTION, scrape_interval_seconds=5.0))
    off_grid = [t for t in times if not math.isclose(t / 30.0, round(t / 30.0))]
    assert early >= 1
    assert off_grid, times
    first = off_grid[0]
    # Woken within a few checks of the step, at a check plus the loop's debounce.
    assert 95.0 < first <= 95.0 + 4 * 5.0 + EARLY_PASS_DELAY_SECONDS
    assert math.isclose((first - EARLY_PASS_DELAY_SECONDS) % 5.0, 0.0, abs_tol=1e-9)
    # Before it, every interval; after it, each pass an interval after the one before
    # unless woken again (at most QUIET_EARLY_PASSES more while the fleet stays as it is).
    before = [t for t in times if t < first]
    assert before == pytest.approx([30.0, 60.0, 90.0])
    gaps = np.diff([t for t in times if t >= first])
    assert all(g <= 30.0 + 1e-9 for g in gaps)
    assert len(off_grid) == early


def test_without_the_watch_passes_come_every_interval() -> None:
    for config in (
        SimConfig(preemption=NO_PREEMPTION, scrape_interval_seconds=5.0, queue_check_seconds=0),
        SimConfig(preemption=NO_PREEMPTION),  # no scrape interval: no watch
    ):
        times, early = _pass_times(config)
        assert early == 0
        assert times == pytest.approx([30.0 * k for k in range(1, len(times) + 1)])


def test_a_policy_without_early_passes_is_not_woken() -> None:
    policy = Recording(FLEET, WEIGHTS)
    config = SimConfig(preemption=NO_PREEMPTION, scrape_interval_seconds=5.0)
    result = simulate(mixed_pool(), _step(), policy, config)
    assert result.early_passes == 0
    assert all(math.isclose(s.time % 30.0, 0.0, abs_tol=1e-9) for s in policy.seen)


def test_the_reading_is_what_the_watchs_four_queries_answer() -> None:
    pool = mixed_pool()
    run = _Run(pool, models_of(pool), _step(), SimConfig(preemption=NO_PREEMPTION), 30.0)
    run.apply(Recording(FLEET, WEIGHTS).decision, 0.0, warm=True)
    readings = {}
    for k in range(1, 25):
        now = 5.0 * k
        run.run_span(now - 5.0, now)
        run.recorder.report(now)
        readings[now] = tier_loads(run.fleets, run.recorder, now, 25.0, 5.0)
    # Too little history for a rate at the first check: no rate, as Prometheus.
    assert readings[5.0]["rtx4090"].prompt_tokens_per_second is None
    at = readings[120.0]
    rtx = run.by_name["rtx4090"]
    ready = rtx.ready(120.0)
    assert at["rtx4090"].pods == len(ready) == 1
    assert at["rtx4090"].waiting == sum(r.engine.waiting for r in ready) > 0
    prompts, done = run.recorder.prompts_and_completions(95.0, 120.0)[rtx.index]
    assert at["rtx4090"].prompt_tokens_per_second == pytest.approx(prompts / 25.0)
    assert at["rtx4090"].requests_in_window == done
    # The step shows: prompt tokens/s well above the quiet level (1,000 tokens/s).
    assert readings[60.0]["rtx4090"].prompt_tokens_per_second == pytest.approx(1000.0, rel=0.1)
    assert at["rtx4090"].prompt_tokens_per_second > 2 * 1000.0
    # The h100 gets nothing here: its series answer zeros, not nothing.
    assert at["h100"].waiting == 0 and at["h100"].prompt_tokens_per_second == 0.0


def test_an_early_pass_counts_once_and_a_fixed_fleet_resizes_nothing() -> None:
    watch = EarlyPasses(5.0)
    assert watch.window == 25.0
    watch.woken = True
    watch.passed({"rtx4090": 100.0}, {"rtx4090": 1}, {"rtx4090": 1})
    assert (watch.count, watch.woken) == (1, False)
    watch.passed(None, {"rtx4090": 1}, {"rtx4090": 2})
    assert watch.count == 1


def test_the_early_pass_waits_the_operators_debounce() -> None:
    assert EARLY_PASS_DELAY_SECONDS == DEBOUNCE_SECONDS
