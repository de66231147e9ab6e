"""Keep the optimizer's last answer while nothing it depends on moved beyond a tolerance.

A real pool's demand moves a little every pass, so the exact caches (`memo`) rarely hit
and every pass would hand HiGHS a new program (most of a pass's time) to get, almost
always, the same replicas. The pool's status carries the last answer and what it was
solved for (`InferencePoolStatus.sizing`), so a pass may keep it without solving, and
stays a function of its inputs (spec, observation, status): nothing is remembered in
process memory. The answer is kept when all of these hold, and the optimizer runs
otherwise:

1. every input of the program but demand is what it was: the tiers, their prices and
   planned bounds, the classes and their priorities, the budget, exactly; each class's
   measured quantities (tokens per request, service times, utilization and head-of-line
   limits, which move a little every pass with the observed lengths) on a logarithmic
   grid of TOLERANCE steps. All compared by a digest of them; the check in 3. uses this
   pass's exact values, so the grid only decides when to look again, never what holds;
2. each class's demand to buy (forecast with headroom or burst reserve, plus the drain)
   is within TOLERANCE of the demand the answer was sized for, relative, either way
   (a class without demand then must still have none);
3. the answer still holds the demand of this pass: its replicas within the bounds and the
   budget, and its split of every class over tiers within each tier's utilization limit
   (the tightest objective it serves, head-of-line blocking included): the program's own
   constraints, checked with the new demand. Under-provisioning is impossible; what
   reuse may over-buy is what the demand fell by, under TOLERANCE, plus rounding.

The reference is the demand the answer was solved for, not last pass's: a demand that
creeps down is re-solved once it has fallen TOLERANCE below it. An answer with a
shortage (priority-ordered), one where classes gave way (it breaks the program it would be
checked against, so it could never hold), or one cut short by the time limit is never kept.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from datetime import datetime

import numpy as np

from gpufleet.api.status import SizedClass, SizedTier, Sizing, TierShare
from gpufleet.planning.optimizer import Solution, optimize
from gpufleet.planning.program import ClassNeed, TierOption

# Relative move of any class's demand under which the last answer is kept (if it still
# holds the demand). 5%: well above one interval's noise (a few percent), well below the
# headroom (20% by default) that the answer already carries; what it may over-buy is that
# share at most. A constant, not a spec field: it trades CPU for a bounded over-buy, not
# anything a pool's owner decides (the headroom is that knob), and feasibility is checked.
TOLERANCE = 0.05
_SLACK = 1e-9  # relative, on a tier's utilization limit: the solver's own tolerance is 1e-7
_MAX_STEPS = 32  # paths tried per pass before the optimizer runs instead


def solve(
    options: Sequence[TierOption],
    needs: Sequence[ClassNeed],
    budget: float | None,
    previous: Sizing | None,
    now: datetime,
) -> tuple[Solution, Sizing | None, bool]:
    """The optimizer's answer, kept from `previous` where it may be: (solution, the sizing
    the status carries on, whether it was kept)."""
    digest = inputs_digest(options, needs, budget)
    if previous is not None and previous.inputs == digest:
        solution = kept(previous, options, needs, budget)
        if solution is not None:
            return solution, previous, True
    solution = optimize(options, needs, budget)
    if solution.shortage or solution.given_way or not solution.optimal:
        return solution, None, False
    return solution, sizing(now, digest, needs, solution), False


def inputs_digest(
    options: Sequence[TierOption], needs: Sequence[ClassNeed], budget: float | None
) -> str:
    """Every input of the program but the classes' rates: names, bounds, prices and the
    budget exact (names as text, numbers as the bytes of their float64 values; a repr of
    each float is exact too, but costs a tenth of a kept pass), the classes' measured
    quantities by their step on the TOLERANCE grid (`grid`)."""
    names: list[object] = [budget is None]
    exact: list[float] = [budget or 0.0]
    numbers: list[float] = []
    for o in options:
        names.append((o.name, o.min_replicas, o.max_replicas))
        exact.append(o.price_per_replica_hour)
    for n in needs:
        shared = n.shared_utilization
        names.append(
            (
                n.name,
                n.priority,
                tuple(n.service_seconds),
                tuple(n.max_utilization),
                tuple((t, tuple(o)) for t, o in shared.items()),
            )
        )
        numbers += [n.tokens_per_request, *n.service_seconds.values()]
        numbers += [*n.max_utilization.values()]
        numbers += [rho for o in shared.values() for rho in o.values()]
    digest = hashlib.sha256(repr(names).encode())
    digest.update(np.array(exact, dtype=np.float64).tobytes())
    digest.update(grid(np.array(numbers, dtype=np.float64)).tobytes())
    return digest.hexdigest()[:32]


def grid(values: np.ndarray) -> np.ndarray:
    """Each value's step on a logarithmic grid of TOLERANCE (1.05x) steps, as integers
    (zero and below: their own steps), so a quantity that moves by less than a step
    mostly keeps its step, and one that creeps further crosses a step in the end."""
    steps = np.full(values.shape, np.iinfo(np.int64).min, dtype=np.int64)
    positive = values > 0
    steps[positive] = np.floor(np.log(values[positive]) / np.log1p(TOLERANCE)).astype(np.int64)
    steps[values < 0] = np.iinfo(np.int64).min + 1
    return steps


def sizing(now: datetime, digest: str, needs: Sequence[ClassNeed], solution: Solution) -> Sizing:
    return Sizing(
        time=now,
        inputs=digest,
        tiers=[SizedTier(name=t, replicas=r) for t, r in solution.replicas.items()],
        classes=[
            SizedClass(
                name=n.name,
                tokens_per_second=n.rate_rps * n.tokens_per_request,
                shares=[
                    TierShare(tier=t, share=s) for t, s in solution.routing.get(n.name, {}).items()
                ],
            )
            for n in needs
        ],
    )


def kept(
    previous: Sizing,
    options: Sequence[TierOption],
    needs: Sequence[ClassNeed],
    budget: float | None,
) -> Solution | None:
    """The previous answer as a Solution, if demand is within TOLERANCE of what it was
    sized for and it still holds this demand; None when the optimizer must run."""
    sized = {c.name: c for c in previous.classes}
    for need in needs:
        before = sized.get(need.name)
        if before is None or not within(need.rate_rps * need.tokens_per_request, before):
            return None
    replicas = {t.name: t.replicas for t in previous.tiers}
    if set(replicas) != {o.name for o in options}:
        return None
    split = {
        n.name: {s.tier: s.share for s in sized[n.name].shares}
        for n in needs
        if n.rate_rps > 0 and n.max_utilization
    }
    routing = reroute(options, needs, replicas, split)
    if routing is None or not holds(options, needs, budget, replicas, routing):
        return None
    return Solution(
        replicas=replicas,
        routing=routing,
        served={n.name: 1.0 for n in needs},
        cost_per_hour=sum(o.price_per_replica_hour * replicas[o.name] for o in options),
        shortage=False,
        optimal=True,
    )


def reroute(
    options: Sequence[TierOption],
    needs: Sequence[ClassNeed],
    replicas: Mapping[str, int],
    routing: Mapping[str, Mapping[str, float]],
) -> dict[str, dict[str, float]] | None:
    """The split moved, where this demand overloads a tier, onto tiers with room among
    those each class was already split over (so every tier's limit stays what it was);
    None when no such move is found (the optimizer runs).

    The optimizer fills its cheapest tiers to their limit, so a demand a little higher no
    longer fits the same split although the same replicas hold it: each step frees an
    overloaded tier along a path of classes to a tier with room (tier -> a class it serves
    -> another of that class's tiers ...), each hop moving as much load as the previous
    hop handed it, and stops when no tier is over. A path changes a share, a spare room or
    the overload to zero, so a few steps do; a search that finds none is conservative."""
    tiers = {o.name: o for o in options}
    active = {n.name: n for n in needs if n.name in routing}
    split = {c: {t: s for t, s in shares.items() if s > 0} for c, shares in routing.items()}
    if any(t not in tiers for shares in split.values() for t in shares):
        return None  # holds() refuses it
    cost = {(c, t): n.rate_rps * n.service_seconds[t] for c, n in active.items() for t in split[c]}
    room = {t: _limit(t, active, split) * replicas[t] for t in tiers}
    for _ in range(_MAX_STEPS):
        load = dict.fromkeys(tiers, 0.0)
        for (c, t), a in cost.items():
            load[t] += a * split[c][t]
        over = {t: load[t] - room[t] for t in tiers if load[t] > room[t] * (1 + _SLACK)}
        if not over:
            return {
                c: {t: v for t, v in shares.items() if v > 1e-12} for c, shares in split.items()
            }
        start = max(over, key=lambda t: (over[t], t))
        path = _path(start, split, load, room)
        if path is None:
            return None
        gain, most = 1.0, over[start]  # load freed at start, and the most that may be
        for tier, cls, to in path:
            most = min(most, split[cls][tier] * cost[cls, tier] / gain)
            gain *= cost[cls, to] / cost[cls, tier]
        most = min(most, (room[path[-1][2]] - load[path[-1][2]]) / gain)
        gain = 1.0
        for tier, cls, to in path:
            moved = most * gain / cost[cls, tier]
            split[cls][tier] = max(split[cls][tier] - moved, 0.0)
            split[cls][to] += moved
            gain *= cost[cls, to] / cost[cls, tier]
    return None


def _path(
    start: str,
    split: Mapping[str, Mapping[str, float]],
    load: Mapping[str, float],
    room: Mapping[str, float],
) -> list[tuple[str, str, str]] | None:
    """Breadth first from an overloaded tier to one with room: (tier, class, to) hops."""
    came: dict[str, tuple[str, str] | None] = {start: None}
    queue = [start]
    for tier in queue:
        for cls, shares in split.items():
            if shares.get(tier, 0.0) <= 1e-12:
                continue
            for to in shares:
                if to in came:
                    continue
                came[to] = (tier, cls)
                if load[to] < room[to] * (1 - _SLACK):
                    hops = []
                    while (step := came[to]) is not None:
                        hops.append((step[0], step[1], to))
                        to = step[0]
                    return hops[::-1]
                queue.append(to)
    return None


def _limit(
    tier: str, active: Mapping[str, ClassNeed], split: Mapping[str, Mapping[str, float]]
) -> float:
    """The utilization a tier may run at with the classes the split puts on it."""
    served = [n for c, n in active.items() if split[c].get(tier, 0.0) > 0]
    names = {n.name for n in served}
    limit = min((n.max_utilization.get(tier, 0.0) for n in served), default=0.0)
    for n in served:
        for other, rho in n.shared_utilization.get(tier, {}).items():
            if other in names and other != n.name:
                limit = min(limit, max(rho, 0.0))
    return limit


def within(tokens_per_second: float, sized: SizedClass) -> bool:
    return abs(tokens_per_second - sized.tokens_per_second) <= TOLERANCE * sized.tokens_per_second


def holds(
    options: Sequence[TierOption],
    needs: Sequence[ClassNeed],
    budget: float | None,
    replicas: Mapping[str, int],
    routing: Mapping[str, Mapping[str, float]],
) -> bool:
    """Whether these replicas and this split satisfy the optimizer's program for `needs`
    (see `optimizer`): bounds, budget, every class fully served on eligible tiers, and each
    tier's load within the tightest limit of the classes it serves."""
    tiers = {o.name: o for o in options}
    if set(replicas) != set(tiers):
        return False
    if any(not o.min_replicas <= replicas[o.name] <= o.max_replicas for o in options):
        return False
    cost = sum(o.price_per_replica_hour * replicas[o.name] for o in options)
    if budget is not None and cost > budget + 1e-9:
        return False
    return fits(options, needs, replicas, routing)


def fits(
    options: Sequence[TierOption],
    needs: Sequence[ClassNeed],
    replicas: Mapping[str, int],
    routing: Mapping[str, Mapping[str, float]],
) -> bool:
    """Whether this split serves every class fully on eligible tiers with each tier's load
    within the tightest limit of the classes it serves, on `replicas` (bounds and budget
    aside: `holds` checks those)."""
    tiers = {o.name: o for o in options}
    if set(replicas) != set(tiers):
        return False
    active = {n.name: n for n in needs if n.rate_rps > 0 and n.max_utilization}
    split = {c: {t: s for t, s in routing.get(c, {}).items() if s > 0} for c in active}
    load = dict.fromkeys(tiers, 0.0)
    for name, need in active.items():  # the others are not in the program
        if abs(sum(split[name].values()) - 1.0) > 1e-6:
            return False
        for tier, share in split[name].items():
            if tier not in tiers or tiers[tier].max_replicas <= 0:
                return False
            if need.max_utilization.get(tier, 0.0) <= 0:
                return False
            load[tier] += need.rate_rps * need.service_seconds[tier] * share
    return all(
        load[t] <= _limit(t, active, split) * replicas[t] * (1 + _SLACK)
        for t in tiers
        if load[t] > 0
    )
