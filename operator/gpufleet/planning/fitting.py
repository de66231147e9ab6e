"""Fit a replica's latency model (`gpufleet.planning.capacity`) to measured points.

Used offline by `tools/derive_profiles.py` (the built-in table) and at run time for a
tier's own `profile` in the spec. Deterministic: a fixed start, a fixed solver.

What is fitted, per profile, at the measured request shape (in log space, so every point
weighs by its relative error):
- the offered -> completed curve of the benchmark runs (saturation rate, sharpness), and
- P99 TTFT against completed rate (base, queue scale, exponent) sharing that saturation,
- then mean TPOT against completed rate (base, scale, exponent).
Weak priors keep the exponents near 1 and 2 when points are few (a spec may give two).

Points the model cannot represent are left out, by two stated rules, and reported:
- *erratic*: a P99 more than 1.5x the P99 of a run at a higher rate (warm-up or
  tensor-parallel stalls seen in some multi-GPU RTX 4090 runs at 1-4 req/s);
- *collapsed*: a run that completed fewer requests/s than a run offered less (overload
  past saturation, only 32 req/s runs of multi-GPU tiers).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

from gpufleet.planning.capacity import Fit, queue_pressure, served_from_offered

ERRATIC_RATIO = 1.5
_PRIOR_WEIGHT = 0.05
# The utilization a steady-state point at or above the fitted saturation is read at.
MAX_STEADY_RHO = 0.99
# A steady point whose P99 is at most this many times the lowest point's drained its queue.
STABLE_MULTIPLE = 10.0
# fit_at_most's parameters (saturation's position, log base, log queue, log exponent): the
# exponent between 0.1 and 5, so that no step of the search overflows.
_STEADY_LOWER = (-np.inf, -np.inf, -np.inf, math.log(0.1))
_STEADY_UPPER = (np.inf, np.inf, np.inf, math.log(5.0))


@dataclass(frozen=True)
class MeasuredPoint:
    """One benchmark run: offered rate, completed rate, P99 TTFT, tokens/s and mean TPOT."""

    offered_rps: float
    served_rps: float
    ttft_p99_seconds: float
    tokens_per_second: float
    tpot_seconds: float | None = None


@dataclass(frozen=True)
class PointError:
    """Relative error of the fitted model at one measured point (model / measured - 1)."""

    offered_rps: float
    ttft_p99: float
    tokens_per_second: float
    tpot: float | None
    excluded: str | None  # None, "erratic" or "collapsed"


@dataclass(frozen=True)
class FitResult:
    fit: Fit
    errors: tuple[PointError, ...]


def exclusions(points: Sequence[MeasuredPoint]) -> list[str | None]:
    """Why each point is left out of the fit (None: kept); see the module docstring."""
    reasons: list[str | None] = []
    for p in points:
        higher = [q for q in points if q.offered_rps > p.offered_rps]
        lower = [q for q in points if q.offered_rps < p.offered_rps]
        if any(q.served_rps > p.served_rps * 1.02 for q in lower):
            reasons.append("collapsed")
        elif any(p.ttft_p99_seconds > ERRATIC_RATIO * q.ttft_p99_seconds for q in higher):
            reasons.append("erratic")
        else:
            reasons.append(None)
    return reasons


def fit_points(points: Sequence[MeasuredPoint]) -> FitResult:
    """Fit the model to at least two points (sorted or not); see the module docstring."""
    pts = sorted(points, key=lambda p: p.offered_rps)
    if len(pts) < 2:
        raise ValueError("a profile needs at least two points")
    why = exclusions(pts)
    kept = [p for p, w in zip(pts, why, strict=True) if w is None]
    if len(kept) < 2:
        # Nothing consistent to fit: keep the two lowest-latency points rather than fail.
        kept = sorted(pts, key=lambda p: p.ttft_p99_seconds)[:2]
        why = [None if p in kept else w for p, w in zip(pts, why, strict=True)]
    latency = _fit_latency(kept)
    fit = _fit_tpot(kept, latency)
    return FitResult(fit, tuple(_error(p, w, fit) for p, w in zip(pts, why, strict=True)))


def _fit_latency(pts: Sequence[MeasuredPoint]) -> Fit:
    offered = np.array([p.offered_rps for p in pts])
    served = np.array([p.served_rps for p in pts])
    p99 = np.array([p.ttft_p99_seconds for p in pts])
    top = float(served.max())

    def unpack(v: np.ndarray) -> tuple[float, float, float, float, float]:
        saturation = top * (1.01 + math.exp(v[0]))
        return saturation, math.exp(v[1]), math.exp(v[2]), math.exp(v[3]), math.exp(v[4])

    def residuals(v: np.ndarray) -> np.ndarray:
        saturation, sharpness, base, queue, exponent = unpack(v)
        completed = np.array([served_from_offered(r, saturation, sharpness) for r in offered])
        pressure = np.array([queue_pressure(s / saturation) for s in served])
        model = base + queue * pressure**exponent
        priors = [_PRIOR_WEIGHT * v[4], _PRIOR_WEIGHT * (v[1] - math.log(2.0))]
        return np.concatenate([np.log(completed / served), np.log(model / p99), priors])

    start = np.array(
        [math.log(0.3), math.log(2.0), math.log(p99.min()), math.log(p99.min() * 0.2), 0.0]
    )
    solution = least_squares(residuals, start, method="trf")
    saturation, sharpness, base, queue, exponent = unpack(solution.x)
    return Fit(
        saturation_rps=saturation,
        sharpness=sharpness,
        ttft_base_seconds=base,
        ttft_queue_seconds=queue,
        ttft_queue_exponent=exponent,
    )


def fit_at_most(points: Sequence[MeasuredPoint], ceiling_rps: float, sharpness: float) -> Fit:
    """P99 TTFT (saturation, base, queue scale, exponent), then mean TPOT, against the served
    rate of `points` measured at steady state (each served at its offered rate), with the
    saturation at most `ceiling_rps` (a replica's throughput under a backlog) and above every
    point whose P99 is at most STABLE_MULTIPLE x the lowest (a queue that drains: a stream
    above its replica's capacity grows a P99 of seconds over 90 s). A point at or above the
    fitted saturation, whose queue grew for as long as it was measured, is read at
    utilization MAX_STEADY_RHO. Points with an infinite P99 are left out."""
    pts = [p for p in points if math.isfinite(p.ttft_p99_seconds) and p.served_rps > 0]
    if not pts:
        raise ValueError("no point with a finite P99 TTFT")
    served = np.array([p.served_rps for p in pts])
    p99 = np.array([p.ttft_p99_seconds for p in pts])

    stable = served[p99 <= STABLE_MULTIPLE * p99.min()]
    floor = min(float(stable.max()) * 1.01, ceiling_rps)

    def unpack(v: np.ndarray) -> tuple[float, float, float, float]:
        saturation = floor + (ceiling_rps - floor) / (1.0 + math.exp(-v[0]))
        return saturation, math.exp(v[1]), math.exp(v[2]), math.exp(v[3])

    def residuals(v: np.ndarray) -> np.ndarray:
        saturation, base, queue, exponent = unpack(v)
        rho = np.minimum(served / saturation, MAX_STEADY_RHO)
        model = base + queue * (rho / (1.0 - rho)) ** exponent
        return np.concatenate([np.log(model / p99), [_PRIOR_WEIGHT * v[3]]])

    # Several starts across the saturation's range: the misfit has a local minimum at each
    # end (everything saturated, or nothing), the cheapest answer is kept.
    solution = min(
        (
            least_squares(
                residuals,
                np.array([v, math.log(p99.min()), math.log(p99.min() * 0.2), 0.0]),
                method="trf",
                bounds=(_STEADY_LOWER, _STEADY_UPPER),
            )
            for v in (-3.0, -1.0, 1.0, 3.0)
        ),
        key=lambda r: float(r.cost),
    )
    saturation, base, queue, exponent = unpack(solution.x)
    fit = Fit(
        saturation_rps=saturation,
        sharpness=sharpness,
        ttft_base_seconds=base,
        ttft_queue_seconds=queue,
        ttft_queue_exponent=exponent,
    )
    return _fit_tpot([p for p in pts if p.served_rps < saturation], fit)


def _fit_tpot(pts: Sequence[MeasuredPoint], fit: Fit) -> Fit:
    measured = [p for p in pts if p.tpot_seconds is not None]
    if len(measured) < 2:
        return fit
    pressure = np.array([queue_pressure(p.served_rps / fit.saturation_rps) for p in measured])
    tpot = np.array([p.tpot_seconds or 0.0 for p in measured])

    def residuals(v: np.ndarray) -> np.ndarray:
        base, scale, exponent = math.exp(v[0]), math.exp(v[1]), math.exp(v[2])
        model = base + scale * pressure**exponent
        return np.concatenate([np.log(model / tpot), [_PRIOR_WEIGHT * v[2]]])

    start = np.array([math.log(tpot.min()), math.log(tpot.min() * 0.1), 0.0])
    solution = least_squares(residuals, start, method="trf")
    base, scale, exponent = (math.exp(x) for x in solution.x)
    return Fit(
        saturation_rps=fit.saturation_rps,
        sharpness=fit.sharpness,
        ttft_base_seconds=fit.ttft_base_seconds,
        ttft_queue_seconds=fit.ttft_queue_seconds,
        ttft_queue_exponent=fit.ttft_queue_exponent,
        tpot_base_seconds=base,
        tpot_queue_seconds=scale,
        tpot_queue_exponent=exponent,
    )


def _error(p: MeasuredPoint, excluded: str | None, fit: Fit) -> PointError:
    pressure = queue_pressure(p.served_rps / fit.saturation_rps)
    ttft = fit.ttft_base_seconds + fit.ttft_queue_seconds * pressure**fit.ttft_queue_exponent
    completed = served_from_offered(p.offered_rps, fit.saturation_rps, fit.sharpness)
    tpot_error = None
    if p.tpot_seconds is not None and fit.tpot_base_seconds > 0:
        tpot = fit.tpot_base_seconds + fit.tpot_queue_seconds * pressure**fit.tpot_queue_exponent
        tpot_error = tpot / p.tpot_seconds - 1.0
    return PointError(
        offered_rps=p.offered_rps,
        ttft_p99=ttft / p.ttft_p99_seconds - 1.0,
        tokens_per_second=completed / p.served_rps - 1.0,
        tpot=tpot_error,
        excluded=excluded,
    )


@dataclass(frozen=True)
class BuiltinProfile:
    """One row of the built-in table (`gpufleet.planning.profile_data`)."""

    accelerator: str  # an Accelerator value with measurements
    size_class: str  # "1.5B", "8B", "14B", "32B", "70B"
    gpus: int
    model: str  # the model measured
    parameters_billions: float
    prompt_tokens: float  # mean of the runs
    output_tokens: float
    points: tuple[MeasuredPoint, ...]
    fit: Fit
    errors: tuple[PointError, ...]
    source: str
