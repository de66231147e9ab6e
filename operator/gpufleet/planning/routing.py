"""Integer weights per class: where each class's traffic goes this pass.

The optimizer splits what it serves of each class over tiers; `shed_overflow` decides
where an under-served class's remainder goes, `stabilization.route_on_ready` moves
traffic only onto Ready replicas (make before break), `spread` sends a class's traffic to
every Ready replica it has to itself (held ones too, not only those sized for it now),
`yield_to_steps` gives a class no more of a tier than it has there while a higher class
steps up on it, and `weights_for` turns shares into
integer weights that sum to 100, keeping the live weights when the change is rounding;
`settle` keeps every class's live weights when they moved by a few points only and still
carry the planned demand on the Ready replicas (no route write, no Event, no flapping).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from gpufleet.planning.classes import ClassCapacity
from gpufleet.planning.inputs import Inputs
from gpufleet.planning.records import ClassDemand, Plan
from gpufleet.planning.stabilization import integer_weights

# Points per tier under which the pool's live weights are kept, if they still carry the
# demand: a demand that wobbles a few percent moves the optimizer's split of a class over
# tiers filled to their limit by a few points, back and forth every pass. Keeping them at
# any size of move (where they carry the demand on the replicas this pass keeps, and no
# class steps up or is kept off a tier) was measured: `make bench-sim` unchanged in every
# number; on `make bench-pools` $/Mtok -5.9% to +2.5% and attainment -0.13 to +0.38 points
# (three tiers / size worse on all three), so not taken.
SETTLE_POINTS = 5


def shed_overflow(
    inputs: Inputs,
    targets: Mapping[str, Mapping[str, float]],
    served: Mapping[str, float],
    cover: Mapping[str, float],
    stepping: frozenset[str] = frozenset(),
) -> tuple[dict[str, dict[str, float]], dict[str, tuple[str, ...]]]:
    """Where an under-served class's unserved traffic goes, and the tiers it was kept off.

    The optimizer's routing splits what it *serves*; the router splits *all* of a class's
    traffic by the same weights. For a class served only in part, that would push its
    overflow onto tiers sized for higher-priority classes and break their objectives.
    Keep the planned load on those tiers and send the remainder to the class's tiers that
    no higher-priority class uses (when it has any): the shortage stays with the class the
    priorities say should bear it. `served` is the optimizer's served share of what it was
    asked for, `cover` what it was asked for per unit of the class's demand.

    While the class, or a higher-priority class on such a tier, steps up (`stepping`: its
    demand above what its history predicted for now by more than the headroom and twice
    the usual error, `ClassForecast.stepping_up`), it gets none of that tier. A rate
    window that a step has filled only in part understates the demand: a share sized from
    it carries more than planned as the window fills, on a tier with no room to spare,
    where the higher class's own rise needs the room too.
    """
    priority = {c.name: c.priority for c in inputs.classes}
    result = {c: dict(shares) for c, shares in targets.items()}
    kept_off: dict[str, tuple[str, ...]] = {}
    for name, shares in targets.items():
        fraction = min(1.0, served.get(name, 1.0) * cover.get(name, 1 + inputs.headroom))
        if fraction >= 1.0 - 1e-9 or not shares:
            continue
        guarding: dict[str, set[str]] = {}  # tier -> the higher-priority classes sent there
        for other, other_shares in targets.items():
            if priority.get(other, 0) > priority.get(name, 0):
                for tier, share in other_shares.items():
                    if share > 0:
                        guarding.setdefault(tier, set()).add(other)
        own = {t: v for t, v in shares.items() if t not in guarding and v > 0}
        if not own or not set(guarding) & {t for t, v in shares.items() if v > 0}:
            continue
        closed = {
            t
            for t, v in shares.items()
            if v > 0 and t in guarding and (name in stepping or guarding[t] & stepping)
        }
        rest = 1.0 - fraction + sum(shares[t] * fraction for t in closed)
        own_total = sum(own.values())
        result[name] = {
            tier: 0.0
            if tier in closed
            else share * fraction + (share / own_total * rest if tier in own else 0.0)
            for tier, share in shares.items()
        }
        if closed:
            kept_off[name] = tuple(sorted(closed))
    return result, kept_off


def spread(
    routed: Mapping[str, Mapping[str, float]],
    targets: Mapping[str, Mapping[str, float]],
    ready: Mapping[str, int],
    capacities: Mapping[str, ClassCapacity],
) -> tuple[dict[str, dict[str, float]], dict[str, tuple[str, ...]]]:
    """Each class's traffic on tiers no other class is sent to, spread over all such tiers'
    Ready replicas it is eligible on, in proportion to what each carries of it at its limit;
    with the tiers each class was spread onto beyond the optimizer's.

    The optimizer splits a class over the replicas it sizes for the demand now. Replicas
    held for a burst, by the scale-down delay, or at minReplicas are Ready and paid for
    anyway, but got no traffic, so a burst within the interval met only the sized ones: on
    three tiers (H100, RTX 4090, L40S; bursts trace), batch sent all to one L40S while four
    RTX 4090s waited out their delay had 182 of 221 requests late in a burst. The same share
    of each tier's limit never loads the busiest of them more than the optimizer's split
    does, and costs nothing. Tiers another class is sent to (or planned for) keep their
    share as planned: the traffic there is sized against that class's objective too.

    Also moving a class off such a shared tier into its own tiers' idle Ready room (up to
    90% of it at the class's limit, never onto replicas the delay lets go by the next
    pass) was tried. In `make demo`'s quiet phase, with one RTX 4090 sized and a second held
    by the delay, the optimizer's split sends 8% to 50% of batch to realtime's H100 from
    pass to pass as the demand moves by 10%; with the move, 8% to 16%. But on the
    simulator's pools (bursts and flash crowd, seeds 0-2) batch lost 4.65 points on one run
    (loose objectives, bursts: its own tiers, full, met the burst alone) and $/Mtok moved
    by -7.6% to +4.3%, so it is not done.
    """
    result = {c: dict(shares) for c, shares in routed.items()}
    onto: dict[str, tuple[str, ...]] = {}
    for cls, shares in routed.items():
        capacity = capacities[cls]
        others = {
            t
            for o, theirs in [*routed.items(), *targets.items()]
            if o != cls
            for t, v in theirs.items()
            if v > 0
        }
        own = {t: v for t, v in shares.items() if v > 0 and t not in others}
        mass = sum(own.values())
        if mass <= 0 or any(ready.get(t, 0) <= 0 for t in own):
            continue
        room = {
            t: ready[t] * capacity.max_utilization[t] / capacity.service_seconds[t]
            for t in capacity.eligible
            if t not in others and ready.get(t, 0) > 0 and capacity.service_seconds.get(t, 0) > 0
        }
        if not set(own) <= set(room) or len(room) < 2:
            continue
        total = sum(room.values())
        result[cls] = {
            **{t: v for t, v in shares.items() if t not in own},
            **{t: mass * r / total for t, r in room.items()},
        }
        added = tuple(t for t in room if t not in own)
        if added:
            onto[cls] = added
    return result, onto


def yield_to_steps(
    routed: Mapping[str, Mapping[str, float]],
    live: Mapping[str, Mapping[str, float]],
    stepping: frozenset[str],
    priority: Mapping[str, int],
    kept_off: Mapping[str, tuple[str, ...]],
) -> tuple[dict[str, dict[str, float]], dict[str, tuple[str, ...]]]:
    """Each class's shares on the tiers where a class of higher priority steps up held to
    what its `live` weights send there, the rest onto its other planned tiers in proportion
    to their shares; with the tiers each class was kept off (`kept_off`, those
    `shed_overflow` kept it off, with those this holds at none).

    `shed_overflow` keeps a class served only in part off such a tier. A class served in
    full is split by a demand the rate window shows only in part while the higher class
    steps up (`ClassForecast.stepping_up`), so a split that fits on paper adds the lower
    class's prefills to the queue the step is filling. In `make demo`'s realtime surge, the
    pass after the early one put batch back on the H100s that realtime was overloading (0%
    to 11%); realtime held 98.4% within 100 ms that phase, 99.6% in a run where batch stayed
    off. Moving a class *off* such a tier is left to `route_on_ready`, which knows where
    the Ready room is: tried here, onto the class's other tiers by their room at the
    limit, it moved batch onto tiers the step left short in the simulator's pools, up to
    5.8 points of batch attainment lost. A class planned nowhere else stays as planned.
    """
    result = {c: dict(shares) for c, shares in routed.items()}
    off = dict(kept_off)
    for cls, shares in routed.items():
        now = live.get(cls, {})
        held = {
            t: now.get(t, 0.0)
            for t, v in shares.items()
            if v > now.get(t, 0.0) + 1e-9
            and any(
                o in stepping and priority.get(o, 0) > priority.get(cls, 0) and theirs.get(t, 0) > 0
                for o, theirs in routed.items()
            )
        }
        others = {t: v for t, v in shares.items() if v > 0 and t not in held}
        mass = sum(others.values())
        if not held or mass <= 0:
            continue
        excess = sum(shares[t] - h for t, h in held.items())
        result[cls] = {
            t: held[t] if t in held else v + (excess * v / mass if t in others else 0.0)
            for t, v in shares.items()
        }
        none = {t for t, h in held.items() if h <= 0}
        if none:
            off[cls] = tuple(sorted({*off.get(cls, ()), *none}))
    return result, off


def weights_for(
    inputs: Inputs,
    capacity: ClassCapacity,
    shares: Mapping[str, float],
    target: Mapping[str, int],
) -> dict[str, int]:
    """Integer weights for a class: its shares, else where it can go now (Ready first).

    A change of at most one point per tier is rounding, not a decision: the live weights
    stay (no HTTPRoute write, no Event, for a share that moved by a hair).
    """
    names = inputs.names
    cls = capacity.name
    weights = integer_weights(shares, names)
    live = inputs.previous_weights(cls)
    if (
        weights
        and live
        and all(target.get(t, 0) > 0 and capacity.is_eligible(t) for t in live)
        and max(abs(weights.get(t, 0) - live.get(t, 0)) for t in set(weights) | set(live)) <= 1
    ):
        weights = live
    if not weights:
        ready = {n: min(inputs.seen(n).ready_replicas, target.get(n, 0)) for n in names}
        still = {
            t: float(w) for t, w in live.items() if ready.get(t, 0) > 0 and capacity.is_eligible(t)
        }
        weights = integer_weights(still, names)
        if not weights:
            choice = capacity.cheapest(ready, inputs.prices) or capacity.cheapest(
                target, inputs.prices
            )
            if choice is None and not capacity.max_utilization:  # no profile: any replica
                choice = next((n for n in names if target.get(n, 0) > 0), None)
            weights = {choice: 100} if choice else {}
    return {n: weights.get(n, 0) for n in names}


def settle(
    inputs: Inputs,
    weights: Mapping[str, Mapping[str, int]],
    carries: Callable[[Mapping[str, Mapping[str, float]]], bool],
) -> Mapping[str, Mapping[str, int]]:
    """The live weights of every class instead of `weights` when each class's weights
    moved by at most SETTLE_POINTS on any tier and the live split still `carries` the
    planned demand (each tier within its limit on its Ready replicas); `weights` otherwise.
    All classes or none: the tiers' loads depend on every class's split."""
    live = {name: inputs.previous_weights(name) for name in weights}
    for name, new in weights.items():
        old = live[name]
        if sum(old.values()) != 100 or sum(new.values()) != 100:
            return weights
        if max(abs(new.get(t, 0) - old.get(t, 0)) for t in set(new) | set(old)) > SETTLE_POINTS:
            return weights
    if all(dict(live[n]) == {t: w for t, w in weights[n].items() if w} for n in weights):
        return weights  # nothing moved
    shares = {n: {t: w / 100.0 for t, w in live[n].items() if w} for n in weights}
    if not carries(shares):
        return weights
    names = inputs.names
    return {n: {t: live[n].get(t, 0) for t in names} for n in weights}


def prompt_tokens_sent(demand: Mapping[str, ClassDemand | None], plan: Plan) -> dict[str, float]:
    """Prompt tokens/s the plan's weights send each tier: each class's measured demand split
    by its weights (tiers no class is sent to are absent; classes without a measured demand
    count for nothing). The queue watch takes it as a tier's level after the pass, so
    traffic a pass moves onto a tier is not read as a surge there."""
    sent: dict[str, float] = {}
    for name, planned in plan.classes.items():
        measured = demand.get(name)
        total = sum(w for w in planned.weights.values() if w > 0)
        if measured is None or total <= 0:
            continue
        for tier, weight in planned.weights.items():
            if weight > 0:
                share = measured.prompt_tokens_per_second * weight / total
                sent[tier] = sent.get(tier, 0.0) + share
    return sent
