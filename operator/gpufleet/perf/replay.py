"""Replay one io.net run through the engine and compute the benchmark's four numbers."""

from __future__ import annotations

import numpy as np

from gpufleet.perf.engine import EngineResult, simulate
from gpufleet.perf.hardware import gpu
from gpufleet.perf.ionet import Run
from gpufleet.perf.models import model
from gpufleet.perf.roofline import Efficiency, Replica
from gpufleet.perf.workload import Workload, benchmark_workload


def metrics(result: EngineResult, workload: Workload) -> dict[str, float]:
    """P99 and median TTFT, median TPOT (ms) and output tokens/s as the benchmark reports
    them (numpy percentiles over the requests; duration until the last response or the
    client's last sleep). Requests never served count as infinite."""
    ttft = np.where(np.isnan(result.ttft), np.inf, result.ttft)
    tpot = result.tpot
    tpot = tpot[~np.isnan(tpot)]
    end = float(np.nanmax(result.finish)) if np.any(~np.isnan(result.finish)) else np.inf
    duration = max(end, workload.min_duration)
    served = float(np.sum(result.outputs[~np.isnan(result.finish)]))
    return {
        "p99TtftMs": float(np.percentile(ttft, 99)) * 1e3,
        "medianTtftMs": float(np.median(ttft)) * 1e3,
        "medianTpotMs": float(np.median(tpot)) * 1e3 if len(tpot) else float("inf"),
        "outputTokensPerSecond": served / duration,
    }


def replica_for(run: Run, eff: Efficiency) -> Replica:
    return Replica(gpu(run.gpu), model(run.model), run.gpus, eff)


def replay(run: Run, eff: Efficiency) -> tuple[dict[str, float], EngineResult]:
    work = benchmark_workload(run.rate, run.num_prompts, run.mean_prompt, run.mean_output)
    result = simulate(replica_for(run, eff), work.arrivals, work.prompts, work.outputs)
    return metrics(result, work), result
