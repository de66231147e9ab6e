"""The optimizer: integer replicas per tier and a split of each class over tiers, at least cost.

A mixed-integer program solved by HiGHS (`scipy.optimize.milp`):

    minimize    sum_t price_t * y_t                       (+ tie-breaks below 1% of a replica)
    subject to  sum_t x[c,t] = s_c                          each class served (s_c = 1 normally)
                load_t = sum_c R_c * S[c,t] * x[c,t]        replica-seconds per second on tier t
                load_t <= rho*[c,t] * y_t  if z[c,t] = 1    the tier holds the P99 objective of
                x[c,t] <= z[c,t]                            every class it serves (big-M)
                min_t <= y_t <= max_t                       (max_t already capped by reality)
                sum_t price_t * y_t <= budget               hard
    y_t integer, z binary, 0 <= x <= 1, only eligible (class, tier) pairs have an x.

R_c is the class's demand with headroom in requests/s, S[c,t] the replica time one of its
requests costs on tier t and rho*[c,t] the highest utilization at which the class's P99
TTFT holds on that tier (`ReplicaModel.max_utilization`). Counting load in replica-seconds
is the "fractions of a replica per class" rule (load_c / capacity_c summed over classes
fits the replicas), made strict: every class on a tier sees the same queue, so the tier's
whole load must fit the tightest objective it serves.

Head-of-line blocking: a class c waits behind the prefills of another class k's longer
prompts when both share tier t, so its objective holds there only up to a lower
utilization rho*[c,t|k] (`ClassNeed.shared_utilization`), or not at all (0):

                load_t <= rho*[c,t|k] * y_t  if z[c,t] = z[k,t] = 1   (big-M on both)
                z[c,t] + z[k,t] <= 1                        when rho*[c,t|k] = 0

so a strict class is isolated from long prompts when sharing would break its tail, and
shares a tier with them when the cost of that is worth it.

When every class cannot be served (max replicas, budget, caps), classes are served in
priority order: maximize the served tokens/s of the highest priority first, fix it, then
the next, then minimize cost with all of that fixed. The plan never exceeds max replicas
or the budget. Deterministic: one solver, fixed options, variables in spec order.

Where that leaves some class with nothing at all, classes give way: the program runs
again with each class sharing the tiers it was kept from at its own limit there (the wait
behind the other's prompts accepted), a class planned best effort at the limit of the
classes whose objective the tier holds (`ClassNeed.giving_way`), and that plan is taken
when it serves more, class by class in priority order. Without this, one H100 tier serving
realtime (100 ms) beside batch's longer prompts serves batch nothing, however many
replicas it may add; and so does one RTX 4090 tier serving a realtime class no 4090 holds
in 100 ms. A class merely short does not make another give way: its objective is worth
more than the rest of a lower class's demand (a priority says which), and giving way at
every shortage made the simulator's oracle, whose search for a fleet raises demand until
tiers run out, share realtime's H100s with batch and pay up to 38% more for its fleets.
A plan whose classes give way costs no less than keeping them apart would, up to the
tiers' maximums and the budget (`_no_smaller`): a higher demand, too much to keep them
apart, does not plan a cheaper fleet than a lower one that kept them apart.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy.optimize import Bounds, LinearConstraint

from gpufleet.planning.memo import Lru
from gpufleet.planning.program import ClassNeed, Layout, TierOption, layout_for, milp

_SERVED_TOLERANCE = 1e-6


@dataclass(frozen=True)
class Solution:
    replicas: Mapping[str, int]
    routing: Mapping[str, Mapping[str, float]]  # class -> tier -> share of what is served
    served: Mapping[str, float]  # class -> fraction of its demand-with-headroom served
    cost_per_hour: float
    shortage: bool  # some class could not be fully served
    optimal: bool  # False when the solver ran out of time (the best found is returned)
    given_way: tuple[str, ...] = ()  # classes planned as giving way (see the module doc)
    # $/h of the fleet keeping those classes apart would take, where the plan was raised
    # toward it (`_no_smaller`); 0 where it was not.
    apart_per_hour: float = 0.0


# Solutions by their exact inputs. An idle pool asks for the same program every pass, and
# a pass may ask twice (a capped tier's ask, a burst reserve with equal demand); 4,096
# answers cover a thousand pools' few programs each. For 4 tiers x 4 classes an answer
# and its key take about 4 KiB: this cache and the routing one full, about 30 MiB.
SOLUTIONS: Lru[Solution] = Lru("optimizer", 4096)


def optimize(
    tiers: Sequence[TierOption], classes: Sequence[ClassNeed], budget_per_hour: float | None
) -> Solution:
    """The cheapest plan serving every class, or the priority-ordered best when none exists."""
    key = (tuple(tiers), tuple(_need_key(c) for c in classes), budget_per_hour)
    solution = SOLUTIONS.get(key)
    if solution is None:
        solution = _optimize(tiers, classes, budget_per_hour)
        # A solve cut short by the time limit is not a function of its inputs alone.
        if solution.optimal:
            SOLUTIONS.put(key, solution)
    return _copy(solution)


def _need_key(need: ClassNeed) -> tuple[object, ...]:
    """Everything of a class the program reads, exact, in its order (an order the layout
    follows, so two needs listing tiers differently are different keys). The numbers go
    in as the bytes of their float64 values, the form the program holds them in: equal
    bytes, equal program; and a key takes a few bytes a number, not a Python float's 24."""
    shared, yielding = need.shared_utilization, need.yielding_utilization
    numbers = [
        need.rate_rps,
        need.tokens_per_request,
        *need.service_seconds.values(),
        *need.max_utilization.values(),
        *(rho for other in shared.values() for rho in other.values()),
        *(rho for other in yielding.values() for rho in other.values()),
    ]
    return (
        need.name,
        need.priority,
        tuple(need.service_seconds),
        tuple(need.max_utilization),
        tuple((t, tuple(other)) for t, other in shared.items()),
        tuple((t, tuple(other)) for t, other in yielding.items()),
        np.array(numbers, dtype=np.float64).tobytes(),
    )


def _copy(solution: Solution) -> Solution:
    """A solution whose mappings the caller may change without touching the cached one."""
    return replace(
        solution,
        replicas=dict(solution.replicas),
        routing={c: dict(shares) for c, shares in solution.routing.items()},
        served=dict(solution.served),
    )


def _optimize(
    tiers: Sequence[TierOption], classes: Sequence[ClassNeed], budget_per_hour: float | None
) -> Solution:
    active = tuple(c for c in classes if c.rate_rps > 0 and c.max_utilization)
    full = {c.name: 1.0 for c in active}
    layout = layout_for(tiers, active)
    result = _solve(layout, budget_per_hour, served_at_least=full, maximize=None)
    shortage = result is None
    given_way: tuple[str, ...] = ()
    if result is None:
        result = _by_priority(layout, budget_per_hour)
        starved = any(result.served.get(c.name, 0.0) <= _SERVED_TOLERANCE for c in active)
        if starved and any(c.yielding_utilization for c in active):  # classes give way
            given = layout_for(tiers, tuple(c.giving_way() for c in active))
            other = _solve(given, budget_per_hour, served_at_least=full, maximize=None)
            other = other or _by_priority(given, budget_per_hour)
            if _serves_more(other, result, active):
                result = _no_smaller(layout, given, other, budget_per_hour)
                given_way = tuple(c.name for c in active if c.yielding_utilization)
                shortage = False  # from what it serves, below
    served = dict(result.served)
    for c in classes:
        served.setdefault(c.name, 1.0 if c.rate_rps <= 0 else 0.0)
    shortage = shortage or any(v < 1.0 - 1e-6 for v in served.values())
    return replace(result, served=served, shortage=shortage, given_way=given_way)


def _by_priority(layout: Layout, budget_per_hour: float | None) -> Solution:
    """The plan serving the most of each priority in turn, at least cost."""
    active = layout.classes
    achieved: dict[str, float] = {c.name: 0.0 for c in active}
    found: Solution | None = None
    for priority in sorted({c.priority for c in active}, reverse=True):
        group = [c.name for c in active if c.priority == priority]
        best = _solve(layout, budget_per_hour, served_at_least=achieved, maximize=group)
        if best is not None:
            achieved.update({n: best.served[n] for n in group})
            found = best
    floor = {n: max(v - _SERVED_TOLERANCE, 0.0) for n, v in achieved.items()}
    result = _solve(layout, budget_per_hour, served_at_least=floor, maximize=None)
    if result is None:
        # The cheapest plan at what was achieved can be out of the solver's reach
        # numerically (a served share held to its tolerance at a capped tier): the last
        # plan that achieved it serves as much, at a cost maybe not the least.
        result = found if found is not None else _minimum(layout)
    return result


def _no_smaller(
    apart: Layout, layout: Layout, given: Solution, budget_per_hour: float | None
) -> Solution:
    """`given`, the plan of `layout` (classes giving way), on a fleet costing no less than
    keeping the classes apart would (`apart`, its tiers unbounded), up to what the tiers'
    maximums and the budget allow. Classes give way because the tiers' limits leave no
    room to keep them apart, not to make the fleet cheaper: the capacity keeping them apart
    would take is bought still and lowers the load the classes that give way wait behind.
    Without this more demand could plan less: a world served in full with its classes kept
    apart on 5 RTX 4090s, at 1.5x its demand (too much to keep them apart on the tiers'
    maximums), was served in full on 4 with classes giving way.

    The extra replicas go where a plan for more demand would put them: the plan taken is
    the cheapest giving-way plan for the demand scaled up until it costs that much (so
    they carry load, not sit idle). Where keeping the classes apart is impossible however
    many replicas (two classes that cannot share the only tier), or `given` serves some
    class in part (the fleet is at its limit), `given` stands."""
    full = {c.name: 1.0 for c in layout.classes}
    if any(given.served.get(n, 0.0) < 1.0 for n in full):
        return given
    unbounded = replace(
        apart,
        tiers=tuple(
            replace(t, max_replicas=_enough(apart, ti)) for ti, t in enumerate(apart.tiers)
        ),
    )
    wanted = _solve(unbounded, None, served_at_least=full, maximize=None)
    if wanted is None:
        return given
    most = sum(t.price_per_replica_hour * t.max_replicas for t in layout.tiers)
    spend = min(wanted.cost_per_hour, most, most if budget_per_hour is None else budget_per_hour)
    if spend <= given.cost_per_hour + 1e-9:
        return given

    def at(scale: float) -> Solution | None:
        grown = tuple(replace(c, rate_rps=c.rate_rps * scale) for c in layout.classes)
        scaled = replace(layout, classes=grown)
        return _solve(scaled, budget_per_hour, served_at_least=full, maximize=None)

    # The least scale whose plan costs `spend`; short of that (the tiers' maximums or the
    # budget), the most the fleet serves in full.
    low, high, best, enough = 1.0, 2.0, given, None
    while high <= _MOST_SCALE:
        found = at(high)
        if found is None or found.cost_per_hour >= spend - 1e-9:
            enough = found
            break
        low, best, high = high, found, 2 * high
    for _ in range(_BISECTIONS):
        middle = (low + high) / 2
        found = at(middle)
        if found is None or found.cost_per_hour >= spend - 1e-9:
            high, enough = middle, found or enough
        else:
            low, best = middle, found
    chosen = enough or best
    if chosen.cost_per_hour <= given.cost_per_hour + 1e-9:
        return given  # no larger fleet serves it in full within the maximums and budget
    return replace(chosen, served=given.served, apart_per_hour=spend)


# How far `_no_smaller` scales demand, and in how many halvings it finds the scale.
_MOST_SCALE = 64.0
_BISECTIONS = 10


def _enough(layout: Layout, ti: int) -> int:
    """Replicas of tier `ti` that hold every class's whole load there at the tightest
    limit on it (no plan needs more), and at least its maximum."""
    tier = layout.tiers[ti]
    on = [layout.classes[ci] for ci, t in layout.pairs if t == ti]
    if not on:
        return tier.max_replicas
    load = sum(c.rate_rps * c.service_seconds[tier.name] for c in on)
    tightest = min(c.max_utilization[tier.name] for c in on)
    return max(tier.max_replicas, math.ceil(load / tightest) + 1)


def _serves_more(a: Solution, b: Solution, classes: Sequence[ClassNeed]) -> bool:
    """Whether `a` serves more tokens/s than `b` at the first priority where they differ
    (by more than the solver's tolerance), highest first."""
    for priority in sorted({c.priority for c in classes}, reverse=True):
        group = [c for c in classes if c.priority == priority]
        rate = sum(c.rate_rps * c.tokens_per_request for c in group)
        difference = sum(
            (a.served.get(c.name, 0.0) - b.served.get(c.name, 0.0))
            * c.rate_rps
            * c.tokens_per_request
            for c in group
        )
        if abs(difference) > 10 * _SERVED_TOLERANCE * rate:
            return difference > 0
    return False


def _minimum(layout: Layout) -> Solution:
    replicas = {t.name: t.min_replicas for t in layout.tiers}
    return Solution(
        replicas=replicas,
        routing={c.name: {} for c in layout.classes},
        served={c.name: 0.0 for c in layout.classes},
        cost_per_hour=sum(t.price_per_replica_hour * t.min_replicas for t in layout.tiers),
        shortage=True,
        optimal=False,
    )


def _solve(
    layout: Layout,
    budget: float | None,
    *,
    served_at_least: Mapping[str, float],
    maximize: Sequence[str] | None,
) -> Solution | None:
    """One MILP: minimize cost (maximize is None) or the served tokens/s of `maximize`."""
    n = layout.size
    objective = np.zeros(n)
    prices = [t.price_per_replica_hour for t in layout.tiers]
    smallest = min((p for p in prices if p > 0), default=1.0)
    # Tie-breaks worth under 1% of the cheapest replica in all: serve load where its
    # capacity is cheapest, and mix classes on a tier only when it buys something.
    tie = 0.01 * smallest / max(1, len(layout.pairs) + len(layout.binaries))
    if maximize is None:
        objective[: layout.n_y] = prices
        for k, (ci, ti) in enumerate(layout.pairs):
            need, tier = layout.classes[ci], layout.tiers[ti]
            per_load = tier.price_per_replica_hour / need.max_utilization[tier.name]
            worst = max(t.price_per_replica_hour for t in layout.tiers) / min(
                need.max_utilization.values()
            )
            objective[layout.x(k)] = tie * per_load / max(worst, 1e-12)
        for j in range(len(layout.binaries)):
            objective[layout.z(j)] = tie
    else:
        for ci, need in enumerate(layout.classes):
            if need.name in maximize:
                objective[layout.s(ci)] = -need.rate_rps * need.tokens_per_request
        objective[: layout.n_y] = 1e-9 * np.array(prices)  # fewer replicas among equals

    lower = np.zeros(n)
    upper = np.ones(n)
    integrality = np.zeros(n)
    for ti, tier in enumerate(layout.tiers):
        lower[ti], upper[ti], integrality[ti] = tier.min_replicas, tier.max_replicas, 1
    for j in range(len(layout.binaries)):
        integrality[layout.z(j)] = 1
    for ci, need in enumerate(layout.classes):
        lower[layout.s(ci)] = min(served_at_least.get(need.name, 0.0), 1.0)

    rows: list[np.ndarray] = []
    lo: list[float] = []
    hi: list[float] = []
    for ci in range(len(layout.classes)):
        row = np.zeros(n)
        for k, (cj, _) in enumerate(layout.pairs):
            if cj == ci:
                row[layout.x(k)] = 1.0
        row[layout.s(ci)] = -1.0
        rows.append(row)
        lo.append(0.0)
        hi.append(0.0)
    loads = {}
    for ti, tier in enumerate(layout.tiers):
        load = np.zeros(n)
        for k, (cj, tj) in enumerate(layout.pairs):
            if tj == ti:
                other = layout.classes[cj]
                load[layout.x(k)] = other.rate_rps * other.service_seconds[tier.name]
        loads[ti] = load
        if not load.any():
            continue
        row = load.copy()  # the loosest objective served on the tier
        row[ti] = -layout.loosest(ti)
        rows.append(row)
        lo.append(-np.inf)
        hi.append(0.0)
    for j, k in enumerate(layout.binaries):  # stricter ones, when served (big-M on z)
        ci, ti = layout.pairs[k]
        tier = layout.tiers[ti]
        rho = layout.classes[ci].max_utilization[tier.name]
        # With load <= loosest * y already, load - rho * y never exceeds this: the
        # smallest big-M that switches the row off, so the LP relaxation stays tight.
        big_m = (layout.loosest(ti) - rho) * tier.max_replicas + 1e-9
        row = loads[ti].copy()
        row[ti] = -rho
        row[layout.z(j)] = big_m
        rows.append(row)
        lo.append(-np.inf)
        hi.append(big_m)
        link = np.zeros(n)
        link[layout.x(k)], link[layout.z(j)] = 1.0, -1.0
        rows.append(link)
        lo.append(-np.inf)
        hi.append(0.0)
    z_of = {k: j for j, k in enumerate(layout.binaries)}
    for k, kj, rho in layout.blocking:  # head-of-line blocking between two classes
        ti = layout.pairs[k][1]
        zc, zk = layout.z(z_of[k]), layout.z(z_of[kj])
        row = np.zeros(n)
        if rho <= 0:  # they cannot share the tier
            row[zc], row[zk] = 1.0, 1.0
            rows.append(row)
            lo.append(-np.inf)
            hi.append(1.0)
            continue
        big_m = (layout.loosest(ti) - rho) * layout.tiers[ti].max_replicas + 1e-9
        row = loads[ti].copy()
        row[ti] = -rho
        row[zc], row[zk] = big_m, big_m
        rows.append(row)
        lo.append(-np.inf)
        hi.append(2 * big_m)
    if budget is not None:
        row = np.zeros(n)
        row[: layout.n_y] = prices
        rows.append(row)
        lo.append(-np.inf)
        hi.append(budget + 1e-9)

    constraints = [LinearConstraint(np.array(rows), lo, hi)] if rows else []
    result = milp(objective, integrality, Bounds(lower, upper), constraints)
    if result.x is None:
        return None
    return _read(layout, np.asarray(result.x), optimal=result.status == 0)


def _read(layout: Layout, values: np.ndarray, *, optimal: bool) -> Solution:
    replicas = {t.name: round(float(values[ti])) for ti, t in enumerate(layout.tiers)}
    routing: dict[str, dict[str, float]] = {}
    served: dict[str, float] = {}
    for ci, need in enumerate(layout.classes):
        shares = {
            layout.tiers[ti].name: max(float(values[layout.x(k)]), 0.0)
            for k, (cj, ti) in enumerate(layout.pairs)
            if cj == ci
        }
        total = sum(shares.values())
        value = min(max(float(values[layout.s(ci)]), 0.0), 1.0)
        served[need.name] = 1.0 if value > 1.0 - 10 * _SERVED_TOLERANCE else value
        routing[need.name] = (
            {t: v / total for t, v in shares.items() if v / total > 1e-9} if total > 1e-12 else {}
        )
    cost = sum(t.price_per_replica_hour * replicas[t.name] for t in layout.tiers)
    return Solution(
        replicas=replicas,
        routing=routing,
        served=served,
        cost_per_hour=cost,
        shortage=False,
        optimal=optimal,
    )
