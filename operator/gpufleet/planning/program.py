"""The optimizer's program: its inputs, its variables' layout and the HiGHS call (`optimizer`).

A `Layout` places the variables of one mixed-integer program: replicas per tier (y), the
share of each class served on each eligible tier (x), a binary per pair that needs one
(z: "tier t serves class c") and the served share per class (s), in that order.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from scipy.optimize import Bounds, LinearConstraint
from scipy.optimize import milp as _highs

TIME_LIMIT_SECONDS = 2.0


@dataclass(frozen=True)
class TierOption:
    """A tier as the optimizer sees it."""

    name: str
    price_per_replica_hour: float
    min_replicas: int
    max_replicas: int


@dataclass(frozen=True)
class ClassNeed:
    """A class's demand with headroom and what serving it costs on each eligible tier."""

    name: str
    priority: int
    rate_rps: float  # demand with headroom, requests/s
    tokens_per_request: float
    service_seconds: Mapping[str, float]  # tier -> replica-seconds per request (eligible only)
    max_utilization: Mapping[str, float]  # tier -> rho* (eligible only, > 0)
    # tier -> other class -> rho* of this class on that tier when the other class shares
    # it (head-of-line blocking; 0: it cannot share); only where lower than max_utilization.
    shared_utilization: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    # A class planned best effort: tier -> other class -> that class's limit there, where
    # this one gives way to it (see the module docstring).
    yielding_utilization: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    def giving_way(self) -> ClassNeed:
        """This class as it is planned when it gives way: on each tier where it may, at the
        loosest limit of the classes it gives way to, and not kept from their prompts."""
        if not self.yielding_utilization:
            return self
        limits = dict(self.max_utilization)
        shared = {t: dict(o) for t, o in self.shared_utilization.items()}
        for tier, others in self.yielding_utilization.items():
            limits[tier] = max(limits.get(tier, 0.0), *others.values())
            for other in others:
                shared.get(tier, {}).pop(other, None)
        return replace(
            self,
            max_utilization=limits,
            shared_utilization={t: o for t, o in shared.items() if o},
            yielding_utilization={},
        )


@dataclass(frozen=True)
class Layout:
    tiers: tuple[TierOption, ...]
    classes: tuple[ClassNeed, ...]
    pairs: tuple[tuple[int, int], ...]  # (class index, tier index), eligible only
    # Pairs whose class is stricter than the loosest class on that tier, or that take part
    # in head-of-line blocking: only these need a binary "tier t serves class c"; the
    # loosest objective holds whenever t serves anything (and trivially when it serves
    # nothing).
    binaries: tuple[int, ...]  # indexes into pairs
    # (pair of the blocked class, pair of the class blocking it, rho* when they share).
    blocking: tuple[tuple[int, int, float], ...] = ()

    @property
    def n_y(self) -> int:
        return len(self.tiers)

    def x(self, k: int) -> int:
        return self.n_y + k

    def z(self, j: int) -> int:
        return self.n_y + len(self.pairs) + j

    def s(self, c: int) -> int:
        return self.n_y + len(self.pairs) + len(self.binaries) + c

    @property
    def size(self) -> int:
        return self.n_y + len(self.pairs) + len(self.binaries) + len(self.classes)

    def loosest(self, ti: int) -> float:
        name = self.tiers[ti].name
        return max(
            (self.classes[c].max_utilization[name] for c, t in self.pairs if t == ti),
            default=0.0,
        )


def layout_for(tiers: Sequence[TierOption], active: tuple[ClassNeed, ...]) -> Layout:
    pairs = tuple(
        (ci, ti)
        for ci, c in enumerate(active)
        for ti, t in enumerate(tiers)
        if c.max_utilization.get(t.name, 0.0) > 0 and t.max_replicas > 0
    )
    partial = Layout(tuple(tiers), active, pairs, ())
    index = {pair: k for k, pair in enumerate(pairs)}
    names = {c.name: ci for ci, c in enumerate(active)}
    blocking = []
    for k, (ci, ti) in enumerate(pairs):
        need, tier = active[ci], tiers[ti]
        for other, rho in need.shared_utilization.get(tier.name, {}).items():
            kj = index.get((names.get(other, -1), ti))
            if kj is not None and kj != k and rho < need.max_utilization[tier.name] - 1e-9:
                blocking.append((k, kj, max(rho, 0.0)))
    involved = {k for k, _, _ in blocking} | {kj for _, kj, _ in blocking}
    binaries = tuple(
        k
        for k, (ci, ti) in enumerate(pairs)
        if active[ci].max_utilization[tiers[ti].name] < partial.loosest(ti) - 1e-9 or k in involved
    )
    return Layout(tuple(tiers), active, pairs, binaries, tuple(blocking))


def milp(
    objective: np.ndarray,
    integrality: np.ndarray,
    bounds: Bounds,
    constraints: list[LinearConstraint],
) -> Any:
    options: dict[str, Any] = {
        "time_limit": TIME_LIMIT_SECONDS,
        "mip_rel_gap": 1e-9,
        "presolve": True,
    }
    if _fast_options_work():
        options.update(_FAST_OPTIONS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # "passed to HiGHS verbatim"
        return _highs(
            objective,
            integrality=integrality,
            bounds=bounds,
            constraints=constraints,
            options=options,
        )


# HiGHS options scipy passes through verbatim. The sub-MIP heuristics (RINS, RENS) and
# feasibility jump cost more than these small programs take to solve (half of all plan
# time), and the optimum found is the same: every solve runs to a zero gap anyway.
_FAST_OPTIONS = {
    "mip_heuristic_run_rins": False,
    "mip_heuristic_run_rens": False,
    "mip_heuristic_run_feasibility_jump": False,
}


@functools.cache
def _fast_options_work() -> bool:
    """Whether this scipy's HiGHS knows _FAST_OPTIONS (checked once, on a trivial program)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            _highs(np.ones(1), integrality=np.ones(1), options=dict(_FAST_OPTIONS))
    except (AttributeError, KeyError, TypeError, ValueError):
        return False
    return True
