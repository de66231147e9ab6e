"""Stability: how a recommendation becomes a decision without flapping or dropping traffic.

- Scale up at once; scale down to the highest recommendation of the last
  `scaleDownDelaySeconds` (a rolling maximum, state in TierStatus.recommendations).
- Never shrink a tier below what carries the traffic its current weights send it: weights
  move first, replicas go in a later pass (`protect_traffic`).
- Weights move only onto Ready replicas (make before break): a tier's share of each class
  is bounded by its Ready capacity (`route_on_ready`); new replicas get traffic once Ready.
  While they start, a class stays where it is or goes where the plan sends it, never onto
  a tier neither gives it (that tier may serve a class its prompts would block); a lower
  class yields a tier over its Ready replicas to a higher one where its other tiers have
  room.
- Integer weights per class summing to 100, by largest remainder (`integer_weights`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
from scipy.optimize import linprog

from gpufleet.planning.memo import Lru, array_key

# Overload of Ready capacity costs this much more than moving a share away from the target.
_OVERLOAD_PENALTY = 1000.0
_STAY_WEIGHT = 0.01


@dataclass(frozen=True)
class ScaleDecision:
    replicas: int
    scale_down_since: datetime | None = None  # when the recommendation holding it was made
    scale_down_to: int | None = None  # what it goes to when that one is older than the delay
    # The recommendations of the delay window that can still hold the tier up: each later
    # one lower, the newest last (TierStatus.recommendations).
    window: tuple[tuple[datetime, int], ...] = ()


MAX_WINDOW = 64  # TierStatus.recommendations' bound


def hold_for_delay(
    *,
    current: int,
    recommended: int,
    window: Sequence[tuple[datetime, int]],
    now: datetime,
    delay_seconds: int,
) -> ScaleDecision:
    """The highest recommendation of the last `delay_seconds`: a rolling maximum.

    Scale up at once; scale down only when every recommendation that was higher is older
    than the delay, and then to the highest of the newer ones: a tier follows a falling
    demand one delay behind it, step by step, instead of holding its peak for a whole
    delay and then dropping at once. Only recommendations that could still decide are
    kept: each is higher than every later one. Without a window (a new tier, or a status
    from before the window existed) the current size counts as recommended now.
    """
    recent = [(t, r) for t, r in window if t <= now and (now - t).total_seconds() < delay_seconds]
    if not window and current > recommended and delay_seconds > 0:
        recent = [(now, current)]
    kept = [(t, r) for t, r in recent if r > recommended] + [(now, recommended)]
    if len(kept) > MAX_WINDOW:
        kept = kept[:1] + kept[len(kept) - MAX_WINDOW + 1 :]
    top = kept[0][1]
    if top > recommended:
        return ScaleDecision(top, kept[0][0], kept[1][1], tuple(kept))
    return ScaleDecision(recommended, window=tuple(kept))


@dataclass(frozen=True)
class Load:
    """What one class's requests cost a tier: used to size and route."""

    rate_rps: float  # the class's demand (requests/s) routed by its weights
    service_seconds: Mapping[str, float]  # tier -> replica-seconds per request
    max_utilization: Mapping[str, float]  # tier -> rho* (0 or absent: not eligible)


def replicas_for(
    tier: str, shares: Mapping[str, float], loads: Mapping[str, Load], fallback_rho: float
) -> int:
    """Replicas tier needs to carry `shares` (class -> share of its demand on this tier)."""
    work = 0.0
    tightest = math.inf
    for name, share in shares.items():
        if share <= 0 or name not in loads:
            continue
        load = loads[name]
        work += share * load.rate_rps * load.service_seconds.get(tier, 0.0)
        rho = load.max_utilization.get(tier, 0.0)
        tightest = min(tightest, rho if rho > 0 else fallback_rho)
    if work <= 0:
        return 0
    return math.ceil(work / tightest - 1e-9)


def route_on_ready(
    targets: Mapping[str, Mapping[str, float]],
    loads: Mapping[str, Load],
    capacity: Mapping[str, int],
    current: Mapping[str, Mapping[str, float]],
    tiers: Sequence[str],
    priority: Mapping[str, int] | None = None,
    starting: frozenset[str] = frozenset(),
) -> dict[str, dict[str, float]]:
    """Shares per class as close to `targets` as Ready capacity allows (a linear program).

    `capacity` is the Ready replicas each tier can give (never more than it keeps) and
    `current` the shares the live weights send. No tier is given more load than its Ready
    replicas carry or than it carries now, whichever is more: traffic that has nowhere to
    go stays where it is rather than swamp a tier serving someone else, while the replicas
    that will take it are `starting`. When none are (every tier the plan sends a class to
    is Ready), staying is no bridge to anything: on a tier where a class of higher
    `priority` is planned, the class then takes no more than the plan gives it there, and
    a shortage is borne by the lower class on its own tiers, not by the higher one. A
    class whose eligible tiers have no Ready replica at all keeps its target: nothing
    serves it yet, and its weights should point where replicas are coming.

    What a tier carries now counts only for its highest class there: a lower one on a tier
    over its Ready replicas moves to its other tiers as far as they have room, rather than
    hold a higher class's replicas until new ones are Ready (batch's prefills on an H100
    that realtime just surged on).
    """
    result = {c: dict(v) for c, v in targets.items()}
    rank = priority or {}

    def most(c: str, t: str) -> float | None:  # the most of t that c may take (None: any)
        waiting = any(share > 0 and o in starting for o, share in targets[c].items())
        higher = any(
            rank.get(o, 0) > rank.get(c, 0) and shares.get(t, 0.0) > 0
            for o, shares in targets.items()
        )
        return targets[c].get(t, 0.0) if higher and not waiting else None

    def usable(c: str, t: str) -> bool:  # Ready, eligible, and planned or live for c
        live = current.get(c, {}).get(t, 0.0) > 0 and most(c, t) is None
        planned = targets[c].get(t, 0.0) > 0 or live
        return planned and capacity.get(t, 0) > 0 and loads[c].max_utilization.get(t, 0) > 0

    routable = [c for c in targets if targets[c] and any(usable(c, t) for t in tiers)]
    if not routable:
        return result
    # Fast path: the targets already fit Ready capacity.
    if all(
        replicas_for(t, {c: targets[c].get(t, 0.0) for c in routable}, loads, 1.0)
        <= capacity.get(t, 0)
        for t in tiers
    ):
        return result
    pairs = [(c, t) for c in routable for t in tiers if usable(c, t)]

    def work(c: str, t: str) -> float:  # replicas one whole class would take on tier t
        load = loads[c]
        return load.rate_rps * load.service_seconds[t] / load.max_utilization[t]

    allowed = {}
    for t in tiers:
        # What a tier carries now may stay on it, over its Ready replicas, only for the
        # highest class there: a lower one yields the Ready replicas to it, moving where
        # others have room (so it stays too where none has).
        there = [c for c in routable if current.get(c, {}).get(t, 0.0) > 0 or targets[c].get(t)]
        top = max((rank.get(c, 0) for c in there), default=0)
        now = sum(
            current.get(c, {}).get(t, 0.0) * work(c, t)
            for c in routable
            if loads[c].max_utilization.get(t, 0) > 0 and rank.get(c, 0) >= top
        )
        allowed[t] = max(float(capacity.get(t, 0)), now) if capacity.get(t, 0) > 0 else 0.0
    n_x, n_t = len(pairs), len(tiers)
    # Variables: x (shares), u (|x - target|), v (|x - current|), overload per tier.
    # Moving toward the target matters most; among equally good routes, keep the live
    # one (a second pass on the same world must not swap equivalent tiers), then the
    # earlier tier.
    size = 3 * n_x + n_t
    order = np.array([1e-6 * tiers.index(t) for _, t in pairs])
    cost = np.concatenate(
        [order, np.ones(n_x), np.full(n_x, _STAY_WEIGHT), np.full(n_t, _OVERLOAD_PENALTY)]
    )
    a_eq = np.zeros((len(routable), size))
    for k, (c, _) in enumerate(pairs):
        a_eq[routable.index(c), k] = 1.0
    b_eq = np.ones(len(routable))
    rows, bounds_hi = [], []
    for k, (c, t) in enumerate(pairs):
        for offset, anchor in (
            (n_x, targets[c].get(t, 0.0)),
            (2 * n_x, current.get(c, {}).get(t, 0.0)),
        ):
            for sign in (1.0, -1.0):  # sign * (x - anchor) <= deviation
                row = np.zeros(size)
                row[k], row[offset + k] = sign, -1.0
                rows.append(row)
                bounds_hi.append(sign * anchor)
    for ti, t in enumerate(tiers):
        row = np.zeros(size)
        for k, (c, tier) in enumerate(pairs):
            if tier == t:
                row[k] = work(c, t)
        row[3 * n_x + ti] = -1.0
        rows.append(row)
        bounds_hi.append(allowed[t])
    upper = [most(c, t) for c, t in pairs] + [None] * (size - n_x)
    x = _route_lp(
        cost,
        np.array(rows),
        np.array(bounds_hi),
        a_eq,
        b_eq,
        np.array([np.inf if u is None else u for u in upper], dtype=float),
    )
    if x is None:
        return result
    for c in routable:
        result[c] = {}
    for k, (c, t) in enumerate(pairs):
        if x[k] > 1e-9:
            result[c][t] = float(x[k])
    return result


# The routing program's answers by its exact arrays: an unchanged pool whose Ready replicas
# lag its plan asks for the same program every pass until they come.
_ROUTES: Lru[tuple[np.ndarray | None]] = Lru("routing", 4096)


def _route_lp(
    cost: np.ndarray,
    a_ub: np.ndarray,
    b_ub: np.ndarray,
    a_eq: np.ndarray,
    b_eq: np.ndarray,
    upper: np.ndarray,
) -> np.ndarray | None:
    key = array_key(cost, a_ub, b_ub, a_eq, b_eq, upper)
    found = _ROUTES.get(key)
    if found is None:
        solved = linprog(
            cost,
            A_ub=a_ub,
            b_ub=b_ub,
            A_eq=a_eq,
            b_eq=b_eq,
            bounds=[(0, None if math.isinf(u) else float(u)) for u in upper],
            method="highs",
        )
        found = (None if solved.x is None else np.array(solved.x, copy=True),)
        _ROUTES.put(key, found)
    return None if found[0] is None else found[0].copy()


def integer_weights(shares: Mapping[str, float], order: Sequence[str]) -> dict[str, int]:
    """Integer weights summing to 100 by largest remainder; ties go to the earlier tier."""
    positive = {t: s for t, s in shares.items() if s > 0}
    total = sum(positive.values())
    if total <= 0:
        return {}
    exact = {t: 100.0 * positive[t] / total for t in order if t in positive}
    weights = {t: math.floor(v + 1e-9) for t, v in exact.items()}
    left = 100 - sum(weights.values())
    by_remainder = sorted(exact, key=lambda t: (-(exact[t] - weights[t]), order.index(t)))
    for t in by_remainder[:left]:
        weights[t] += 1
    return {t: w for t, w in weights.items() if w > 0}
