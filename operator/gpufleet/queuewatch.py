"""Early passes: a surge between two passes wakes its pool at once.

A pool is reconciled every `intervalSeconds` (30 s by default), so a step in demand waits
on average half an interval before any pass sees it, and requests queue on the replicas
meanwhile. The watch closes that gap, in the role of Knative's "panic" mode. Every
`period_seconds` it reads, for every pool at once (four Prometheus queries for the whole
fleet, however many pools), each tier's queue (`vllm:num_requests_waiting`: requests a
replica accepted but cannot schedule, its batch or KV cache full), its pods and its prompt
tokens/s over a short window (`vllm:prompt_tokens_total` over `WINDOW_CHECKS` periods:
what the tier is sent, as long as it keeps up with prefill; the period is the scrape
interval unless set, and a window of fewer than two scrapes reads no rate). A pool's loop
is woken when one of its tiers shows a *surge* (`surge`), in two checks in a row, the
second no lower:

- **a queue**: at least `MIN_WAITING_PER_REPLICA` requests waiting per pod (a request or
  two between two steps of a busy replica is no queue), and at least `GROWTH` times what
  waited at the pool's last pass (a queue the last pass saw and planned for wakes nothing;
  a class with a loose objective may queue by design);
- **a step in what the tier is sent**: its short-window prompt tokens/s at least `GROWTH`
  times their level at the pool's last pass (smoothed over the checks before it, so one
  quiet window does not lower the bar), where that level held at least
  `MIN_REQUESTS_IN_WINDOW` requests per window (`vllm:request_success_total` over the same
  window): with fewer, one long prompt more or less doubles a window's tokens, and the
  step would be noise. This one comes first on a tier that keeps up: in
  `make demo`, with the queue alone the early pass came 6 and 9 s after the sixfold
  realtime step (two runs); with this too, 3 and 4 s after it.

Each early pass raises the bars for the next (they are taken again at every pass), so a
surge that keeps growing wakes the pool a handful of times, not every period. An early
pass that did not resize the tier that surged (it read its demand a few seconds into the
step, when the window had seen part of it) leaves the bars where they were, so the surge
wakes the pool again at the next check that still shows it, at most `QUIET_EARLY_PASSES`
times in a row: in the closed loop, a sixfold realtime step on an interval of 120 s woke a
pass 3 s after it that kept one H100 (its demandQuery's 10 s window had seen 40% of the
step), and with the bars raised to what that pass saw, the rest of the step never doubled
them on an H100 already at its limit; the H100s waited for the next interval. A pass that
moves a class onto a tier raises that tier's level to what its new weights send there
(the class's measured prompt tokens/s times its new share), so the traffic a pass moved
is not read as a surge that wakes another. The pass a surge starts is an ordinary pass
(the planner reads demand, the queue and its drain as usual);
only its timing and its message differ ("Early pass, 9 requests waiting on h100 (0 at the
last pass): ..." or "Early pass, prompt tokens/s on h100 at 2.6x their level at the last
pass: ..."), and `gpufleet_early_passes_total` counts it. A pool is woken once per surge
until its next pass has run. Pools backing off a failure are not woken
(`Loops.wake_early`). Without Prometheus, or with the period at 0, nothing runs.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

MIN_WAITING_PER_REPLICA = 2.0
GROWTH = 2.0
LEVEL_ALPHA = 0.2  # weight of a check in the smoothed levels of prompt tokens and requests
MIN_REQUESTS_IN_WINDOW = 20.0  # a window's tokens vary by about 1/sqrt(count/2) at random
WINDOW_CHECKS = 5  # the window of prompt tokens/s, in periods: a step shows within seconds
QUIET_EARLY_PASSES = 3  # early passes in a row that may leave the surged tier as it was

Key = tuple[str, str]


@dataclass(frozen=True)
class TierLoad:
    """One tier's reading: requests waiting, pods reporting, prompt tokens/s and requests
    completed over the short window (None when Prometheus has no rate for it yet)."""

    waiting: float
    pods: int
    prompt_tokens_per_second: float | None = None
    requests_in_window: float | None = None


TierLoads = Mapping[str, TierLoad]
Reading = Mapping[Key, TierLoads]


def reading_of(
    raw: Mapping[Key, Mapping[str, tuple[float, int, float | None, float | None]]] | None,
) -> Reading | None:
    """The watch's reading from the Prometheus adapter's (`PrometheusMetrics.queues`)."""
    if raw is None:
        return None
    return {
        key: {t: TierLoad(*values) for t, values in tiers.items()} for key, tiers in raw.items()
    }


@dataclass(frozen=True)
class AtLastPass:
    """What a tier showed when the pool's last pass ran: the bars' base."""

    waiting: float = 0.0
    prompt_tokens_per_second: float | None = None  # smoothed over the checks before it
    requests_in_window: float | None = None  # the same


@dataclass(frozen=True)
class Surge:
    """A queue formed, or a step in what a tier is sent, since the pool's last pass."""

    tier: str
    waiting: float
    at_last_pass: AtLastPass
    step: float | None = None  # prompt tokens/s now over their level at the last pass

    def describe(self) -> str:
        if self.step is not None:
            return (
                f"prompt tokens/s on {self.tier} at {self.step:.1f}x their level at the last pass"
            )
        return (
            f"{self.waiting:.0f} requests waiting on {self.tier} "
            f"({self.at_last_pass.waiting:.0f} at the last pass)"
        )


def surge(
    now: TierLoads, before: TierLoads, at_last_pass: Mapping[str, AtLastPass]
) -> Surge | None:
    """The tier that surged (see the module docstring), the largest over its bar when
    several did; None when none did. `before` is the previous check's reading."""
    found: list[tuple[float, Surge]] = []
    for tier, load in now.items():
        base = at_last_pass.get(tier, AtLastPass())
        earlier = before.get(tier)
        if earlier is None:
            continue
        bar = max(MIN_WAITING_PER_REPLICA * max(load.pods, 1), GROWTH * base.waiting)
        if load.waiting >= bar and earlier.waiting >= bar and load.waiting >= earlier.waiting:
            found.append((load.waiting / bar, Surge(tier, load.waiting, base)))
        level, count = base.prompt_tokens_per_second, base.requests_in_window or 0.0
        rate, was = load.prompt_tokens_per_second, earlier.prompt_tokens_per_second
        if level and count >= MIN_REQUESTS_IN_WINDOW and rate is not None and was is not None:
            bar = GROWTH * level
            if rate >= bar and was >= bar and rate >= was:
                found.append((rate / bar, Surge(tier, load.waiting, base, step=rate / level)))
    return max(found, key=lambda f: (f[0], f[1].tier))[1] if found else None


@dataclass
class QueueWatch:
    """Reads every pool's tiers each period and wakes the pools that surged."""

    # Blocking: every pool's tiers, or None when Prometheus does not answer.
    read: Callable[[], Reading | None]
    # Wake a pool's loop for an early pass, saying why; whether it was woken.
    wake: Callable[[str, str, str], bool]
    period_seconds: float
    _before: dict[Key, TierLoads] = field(default_factory=dict)
    # Smoothed prompt tokens/s and requests per window, per tier.
    _level: dict[Key, dict[str, tuple[float | None, float | None]]] = field(default_factory=dict)
    _at_last_pass: dict[Key, dict[str, AtLastPass]] = field(default_factory=dict)
    # Woken and their pass not run yet: the tier that surged.
    _woken: dict[Key, str] = field(default_factory=dict)
    # Early passes in a row that left the tier that surged as it was.
    _quiet: dict[Key, int] = field(default_factory=dict)

    def passed(
        self,
        namespace: str,
        name: str,
        sent: Mapping[str, float] | None = None,
        resized: Collection[str] | None = None,
    ) -> None:
        """A pass of the pool ran: what its tiers showed then is the bars' new base. `sent`:
        the prompt tokens/s the pass's weights send each tier; where that is more than the
        tier's level, it is the level (traffic the pass moved there is no surge).
        `resized`: the tiers whose Deployment the pass changed (None: not known). An early
        pass that did not resize the tier that surged keeps the bars as they were, up to
        QUIET_EARLY_PASSES in a row (see the module docstring)."""
        key = (namespace, name)
        surged = self._woken.pop(key, None)
        quiet = self._quiet.get(key, 0)
        kept = surged is not None and resized is not None and surged not in resized
        if kept and quiet < QUIET_EARLY_PASSES:
            self._quiet[key] = quiet + 1
            return
        self._quiet.pop(key, None)
        level = self._level.get(key, {})
        sent = sent or {}
        bases = {}
        for t, load in self._before.get(key, {}).items():
            tokens, count = level.get(t, (None, None))
            if t in sent and (tokens is None or sent[t] > tokens):
                tokens = sent[t]
            bases[t] = AtLastPass(load.waiting, tokens, count)
        self._at_last_pass[key] = bases

    def woke(self, namespace: str, name: str, tier: str) -> None:
        """The pool was woken for a surge on `tier`: not again until its pass has run."""
        self._woken[(namespace, name)] = tier

    def check(self, reading: Reading) -> list[tuple[Key, Surge]]:
        """The pools this reading shows a surge on (not woken already); remembers it as the
        previous reading of the next check."""
        found = []
        for key, tiers in reading.items():
            if key in self._woken:
                continue
            seen = surge(tiers, self._before.get(key, {}), self._at_last_pass.get(key, {}))
            if seen is not None:
                found.append((key, seen))
        self._before = dict(reading)
        for key, tiers in reading.items():
            level = self._level.setdefault(key, {})
            for tier, load in tiers.items():
                tokens, count = level.get(tier, (None, None))
                level[tier] = (
                    _smoothed(tokens, load.prompt_tokens_per_second),
                    _smoothed(count, load.requests_in_window),
                )
        for gone in set(self._at_last_pass) - set(reading):  # no series: deleted or idle
            del self._at_last_pass[gone]
        for gone in set(self._level) - set(reading):
            del self._level[gone]
        for gone in set(self._quiet) - set(reading):
            del self._quiet[gone]
        return found

    async def run(self) -> None:
        """Until cancelled: a check every period."""
        while True:
            try:
                reading = await asyncio.to_thread(self.read)
                for (namespace, name), seen in self.check(reading) if reading else []:
                    if self.wake(namespace, name, seen.describe()):
                        self.woke(namespace, name, seen.tier)
                        log.info("Early pass of %s/%s: %s", namespace, name, seen.describe())
            except Exception:  # never let the watch die: the passes go on without it
                log.exception("The queue watch failed to check; trying again")
            await asyncio.sleep(self.period_seconds)


def _smoothed(old: float | None, new: float | None) -> float | None:
    if new is None:
        return old
    return new if old is None else old + LEVEL_ALPHA * (new - old)
