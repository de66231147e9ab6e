"""Every io.net run replayed, side by side with its measurement, and the summary shares."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gpufleet.perf.calibration import calibration
from gpufleet.perf.hardware import gpu
from gpufleet.perf.ionet import METRICS, Run
from gpufleet.perf.replay import replay
from gpufleet.perf.roofline import Efficiency


@dataclass(frozen=True)
class Row:
    run: Run
    predicted: dict[str, float]
    preemptions: int
    kv_tokens: int

    def error(self, key: str) -> float:
        """predicted / measured - 1 (inf when the model never serves a request)."""
        p = self.predicted[key]
        return p / self.run.measured[key] - 1 if math.isfinite(p) else math.inf

    def as_json(self) -> dict[str, Any]:
        r = self.run
        return {
            "file": r.file,
            "line": r.line,
            "gpu": r.gpu,
            "gpus": r.gpus,
            "model": r.model,
            "rate": r.rate,
            "measured": {k: round(r.measured[k], 3) for k in METRICS},
            "predicted": {k: _num(self.predicted[k]) for k in METRICS},
        }


def _num(value: float) -> float | None:
    return round(value, 3) if math.isfinite(value) else None


def validate(
    runs: Sequence[Run],
    table: dict[str, Efficiency] | None = None,
    on_run: Callable[[], None] | None = None,
) -> list[Row]:
    """Every run replayed; `on_run` is called after each (a progress bar)."""
    rows = []
    for run in runs:
        eff = calibration(run.gpu, table).efficiency
        predicted, result = replay(run, eff)
        rows.append(Row(run, predicted, result.preemptions, result.kv_blocks * 16))
        if on_run is not None:
            on_run()
    return rows


TARGETS = (
    ("p99TtftMs", 0.15, 0.80),
    ("p99TtftMs", 0.30, 0.95),
    ("medianTtftMs", 0.15, None),
    ("medianTpotMs", 0.10, 0.90),
    ("outputTokensPerSecond", 0.10, 0.90),
)


def share_within(rows: Sequence[Row], key: str, tolerance: float) -> float:
    if not rows:
        return 0.0
    return sum(abs(r.error(key)) <= tolerance for r in rows) / len(rows)


def summary(rows: Sequence[Row]) -> list[tuple[str, float, float, float | None]]:
    """(metric, tolerance, share of runs within it, the issue's target share or None)."""
    return [(k, tol, share_within(rows, k, tol), target) for k, tol, target in TARGETS]


def gpu_name(run: Run) -> str:
    return gpu(run.gpu).name
