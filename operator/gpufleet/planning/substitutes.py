"""Replicas a tier need not be asked for while another tier's held replicas serve (pure).

The scale-down delay holds each tier at the highest recommendation of its window, tier by
tier. Where two tiers can serve the same class, the optimizer's cheapest fleet may swap
between them as demand moves across a threshold: on the qwen14b example at 12 req/s,
interactive (H100 only) needs one H100 or two depending on the interval's draw, and the
cheapest fleet is then (2 H100, 1 RTX 4090 x4) or (1 H100, 2 RTX 4090 x4). Held tier by
tier, the fleet becomes the union, (2, 2), at every pass's price of both, and the weights
swing between the two splits while the fleet stays put.

So before a pass's recommendations are recorded, each tier whose recommendation this pass
sets (not one the window already holds higher) is asked for no more than serves the
demand with the other tiers at what this pass runs anyway (their holds included): the
least count at which the optimizer's own program, with every tier's replicas fixed, still
serves every class in full (`optimize`, no shortage). The fleet then holds one of the two
(the one its peaks need) instead of both.

Another tier's held replicas count only while they stay held for at least this tier's own
lead time (`Held.seconds`): a hold that a recurring peak keeps renewing counts, the tail
of a peak that is over stops counting a lead time before it ends, so the tier's
recommendation is back in time for a replica started then to be Ready (and the replicas
it runs, held by its own window meanwhile, have not gone). A held tier goes when its
window has no higher recommendation left; its traffic moves first, onto Ready replicas
(`protect_traffic`). Tiers whose count carries the prompt tail or the preemption margin
are left as asked: the program does not see those needs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from gpufleet.planning.optimizer import Solution, optimize
from gpufleet.planning.program import ClassNeed, TierOption
from gpufleet.planning.stabilization import ScaleDecision


@dataclass(frozen=True)
class Held:
    """What the scale-down delay holds a tier at without this pass, and how much longer."""

    replicas: int
    seconds: float


def lean(
    options: Sequence[TierOption],
    wants: Sequence[ClassNeed],
    budget: float | None,
    asked: Mapping[str, int],
    held: Mapping[str, Held],
    leads: Mapping[str, float],
    fixed: frozenset[str] = frozenset(),
) -> tuple[dict[str, int], Solution | None]:
    """Per tier the recommendation to record, and the fleet's routing where it changed.

    `asked`: this pass's recommendation per tier; `held`: what the delay holds per tier
    without it, and for how long; `leads`: each tier's lead time, seconds; `fixed`: tiers
    not to lower (prompt tail, preemption margin). A tier is spared only what the other
    tiers' held replicas serve for at least its own lead time: when those go, its own
    replicas (held by its window meanwhile) are still there or have had the time to start.
    Returns `asked` and None where no tier is held above its recommendation (the usual
    pass: nothing to substitute)."""
    if not any(h.replicas > asked[n] for n, h in held.items() if n in asked):
        return dict(asked), None
    none = Held(0, 0.0)
    running = {n: max(held.get(n, none).replicas, asked[n]) for n in asked}
    serves = _serves(options, wants, budget)
    if serves(running) is None:
        return dict(asked), None
    lowered = dict(asked)
    # The dearest replicas first: those most worth not adding.
    for option in sorted(options, key=lambda o: -o.price_per_replica_hour):
        name = option.name
        if name in fixed or held.get(name, none).replicas > asked[name]:
            continue  # held higher anyway, or what it carries the program does not see
        lead = leads.get(name, 0.0)
        others = {
            n: count if held.get(n, none).seconds >= lead else lowered[n]
            for n, count in running.items()
        }
        low, high = option.min_replicas, asked[name]
        while low < high:  # the least count that still serves, the others as they run
            middle = (low + high) // 2
            if serves({**others, name: middle}) is not None:
                high = middle
            else:
                low = middle + 1
        lowered[name] = high
        running[name] = high  # the others are checked against what it will hold later
    if lowered == dict(asked):
        return lowered, None
    return lowered, serves({n: max(held.get(n, none).replicas, lowered[n]) for n in asked})


def holds(
    decisions: Mapping[str, ScaleDecision], now: datetime, delay_seconds: int
) -> dict[str, Held]:
    """Per tier, what its window holds without this pass's recommendation (`decisions`
    from `hold_for_delay` with none recommended), and for how long from `now`."""
    return {
        n: Held(
            d.replicas,
            delay_seconds
            + ((d.scale_down_since - now).total_seconds() if d.scale_down_since else 0.0),
        )
        for n, d in decisions.items()
    }


def _serves(
    options: Sequence[TierOption], wants: Sequence[ClassNeed], budget: float | None
) -> Callable[[Mapping[str, int]], Solution | None]:
    def check(fleet: Mapping[str, int]) -> Solution | None:
        # Within each tier's bounds: a replica its nodes cannot place serves nothing.
        count = {o.name: min(max(fleet[o.name], o.min_replicas), o.max_replicas) for o in options}
        pinned = [TierOption(o.name, o.price_per_replica_hour, count[o.name], count[o.name])
                  for o in options]  # fmt: skip
        solution = optimize(pinned, wants, budget)
        return None if solution.shortage or not solution.optimal else solution

    return check
