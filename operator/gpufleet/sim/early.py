"""The queue watch in the simulator: early passes where the operator would run them.

The operator's queue watch (`gpufleet.queuewatch`) reads every tier's queue, pods, prompt
tokens/s and completed requests each check period (the scrape interval unless set) and
wakes a pool for a pass when a tier surged; that pass runs `EARLY_PASS_DELAY_SECONDS`
later (the loop's debounce), and the pool's next pass an interval after it. Here the same
`QueueWatch` decides, on the reading the simulated Prometheus would answer at each check:
per tier with Ready replicas, the requests waiting on them (vLLM's
`num_requests_waiting`), their count, and the prompt tokens prefilled and requests
completed over the watch's short window (`WINDOW_CHECKS` periods; no rate until it spans
two scrapes). Without it a step waits for the next interval here while the operator
answers it within seconds, so the simulator understated the operator's step response.

Only a policy whose `early_passes` is true is woken (the gpufleet planner, as the
operator runs it); the baselines keep their own cadence.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from gpufleet.queuewatch import WINDOW_CHECKS, QueueWatch, TierLoad, TierLoads
from gpufleet.sim.fleet import TierFleet
from gpufleet.sim.metrics import Recorder

EARLY_PASS_DELAY_SECONDS = 0.5  # the pool loop's debounce (gpufleet.runtime.DEBOUNCE_SECONDS)
_POOL = ("", "")  # the one pool the simulator runs, as the watch's key


def watch_window_seconds(period: float) -> float:
    """The watch's rate window for a check period, as the operator sets it
    (`gpufleet.commands.run`)."""
    return float(max(1, round(WINDOW_CHECKS * period)))


@dataclass
class EarlyPasses:
    """The queue watch over one run: a check every period, and the early passes it woke."""

    period: float
    watch: QueueWatch = field(init=False)
    window: float = field(init=False)
    count: int = 0  # early passes run
    woken: bool = False  # the watch woke the pool and its pass has not run yet

    def __post_init__(self) -> None:
        self.watch = QueueWatch(lambda: None, lambda *_: False, self.period)
        self.window = watch_window_seconds(self.period)

    def check(self, fleets: Sequence[TierFleet], recorder: Recorder, now: float) -> bool:
        """Read the tiers at `now`; whether a surge wakes the pool (once until its pass)."""
        if self.woken:
            return False
        reading = {_POOL: tier_loads(fleets, recorder, now, self.window, self.period)}
        for key, seen in self.watch.check(reading):
            self.watch.woke(*key, seen.tier)
            self.woken = True
            return True
        return False

    def passed(
        self, sent: Mapping[str, float] | None, before: Mapping[str, int], after: Mapping[str, int]
    ) -> None:
        """A pass ran (early or not) and moved each tier from `before` replicas to `after`
        (the warm start: none before, none resized): the bars' new base
        (`QueueWatch.passed`)."""
        self.count += self.woken
        self.woken = False
        resized = [tier for tier, n in before.items() if after.get(tier, 0) != n]
        self.watch.passed(*_POOL, sent, resized)


def tier_loads(
    fleets: Sequence[TierFleet], recorder: Recorder, now: float, window: float, scrape: float
) -> TierLoads:
    """What the watch's four queries answer at `now` for the tiers with Ready replicas (a
    tier without a pod reporting has no series)."""
    start = max(now - window, 0.0)
    span = now - start
    counts = recorder.prompts_and_completions(start, now)
    loads = {}
    for fleet in fleets:
        ready = fleet.ready(now)
        if not ready:
            continue
        prompt, completed = counts[fleet.index]
        rated = span >= 2 * scrape  # Prometheus's rate needs two samples in its window
        loads[fleet.name] = TierLoad(
            waiting=float(sum(r.engine.waiting for r in ready)),
            pods=len(ready),
            prompt_tokens_per_second=prompt / span if rated else None,
            requests_in_window=float(completed) if rated else None,
        )
    return loads
