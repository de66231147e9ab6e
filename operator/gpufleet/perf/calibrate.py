"""Fit the efficiencies of one GPU type on measured runs (scipy least squares, log errors).

The residuals are log(predicted / measured) of each run's P99 TTFT, median TTFT, median
TPOT and output tokens/s, under a soft-L1 loss (a run the model cannot explain, such as an
erratic multi-GPU one, pulls like a 20%-off run, not like a 10x one). Every efficiency is
bounded to 20%-90% of its peak; deterministic (a fixed start, no random restarts).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from scipy.optimize import least_squares

from gpufleet.perf.ionet import METRICS, Run
from gpufleet.perf.replay import replay
from gpufleet.perf.roofline import Efficiency

EFF_LOW, EFF_HIGH = 0.20, 0.90

# name, lower bound, upper bound (the efficiencies are shares of a datasheet peak).
PARAMETERS: tuple[tuple[str, float, float], ...] = (
    ("compute", EFF_LOW, EFF_HIGH),
    ("memory", EFF_LOW, EFF_HIGH),
    ("link", EFF_LOW, EFF_HIGH),
    ("step_overhead_s", 0.0, 0.02),
    ("per_seq_overhead_s", 0.0, 2e-4),
    ("api_overhead_s", 0.0, 0.05),
    ("allreduce_latency_s", 1e-6, 1e-3),
    ("layer_launch_s", 0.0, 1e-3),
)
START = Efficiency()


@dataclass(frozen=True)
class Fit:
    efficiency: Efficiency
    runs: int
    cost: float
    evaluations: int


def _free(runs: Sequence[Run]) -> list[str]:
    names = [p[0] for p in PARAMETERS]
    if all(r.gpus == 1 for r in runs):  # nothing measures the interconnect
        names = [n for n in names if n not in ("link", "allreduce_latency_s")]
    return names


def residuals(eff: Efficiency, runs: Sequence[Run]) -> np.ndarray:
    out = []
    for run in runs:
        predicted, _ = replay(run, eff)
        for key in METRICS:
            p, m = predicted[key], run.measured[key]
            out.append(math.log(p / m) if math.isfinite(p) and p > 0 else 5.0)
    return np.asarray(out)


def fit(runs: Sequence[Run], start: Efficiency = START, max_evaluations: int = 200) -> Fit:
    names = _free(runs)
    bounds = {p[0]: (p[1], p[2]) for p in PARAMETERS}
    lo = np.array([bounds[n][0] for n in names])
    hi = np.array([bounds[n][1] for n in names])
    x0 = np.clip(np.array([getattr(start, n) for n in names], dtype=float), lo, hi)
    # Work in [0, 1] per parameter so one step size suits all.
    u0 = (x0 - lo) / (hi - lo)
    count = 0

    def make(u: np.ndarray) -> Efficiency:
        x = lo + np.clip(u, 0, 1) * (hi - lo)
        values: dict[str, Any] = {n: float(v) for n, v in zip(names, x, strict=True)}
        return replace(start, **values)

    def f(u: np.ndarray) -> np.ndarray:
        nonlocal count
        count += 1
        return residuals(make(u), runs)

    result = least_squares(
        f,
        u0,
        bounds=(0.0, 1.0),
        loss="soft_l1",
        f_scale=0.2,
        diff_step=0.02,
        max_nfev=max_evaluations,
        x_scale=1.0,
    )
    eff = replace(make(result.x), measured=tuple(names))
    return Fit(eff, len(runs), float(result.cost), count)
