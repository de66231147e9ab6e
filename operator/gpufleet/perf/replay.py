"""Replay one io.net run through the engine and compute the benchmark's four numbers."""

from __future__ import annotations

import numpy as np

from gpufleet.perf.engine import EngineResult, simulate
from gpufleet.perf.hardware import gpu
from gpufleet.perf.ionet import Run
from gpufleet.perf.models import model
from gpufleet.perf.roofline import Efficiency, Replica
from gpufleet.perf.vllm import EngineConfig
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


def replica_for(run: Run, eff: Efficiency, config: EngineConfig | None = None) -> Replica:
    """The run's replica; `config` replaces vLLM's defaults (a what-if: the io.net files
    do not record the server's flags)."""
    return Replica(gpu(run.gpu), model(run.model), run.gpus, eff, config)


def cached_prompt_tokens(run: Run, replica: Replica, prompts: np.ndarray) -> np.ndarray:
    """Prompt tokens found in vLLM's prefix cache (V1 enables it by default).

    A run that follows another on the same server (gpufleet.perf.ionet: the same 200
    prompts a minute earlier) finds each prompt's full 16-token blocks still cached when the
    cache held the whole previous run, prompts and outputs (total_input + total_output
    tokens): freed blocks keep their contents until reused, least recently used first, so
    this run's allocations evict older content before the prompts it is about to reuse.
    vLLM always recomputes at least a prompt's last token, so at most (prompt - 1) // 16
    blocks hit. The first run of a server (32 req/s in every io.net session), or a cache
    smaller than a run, finds none."""
    block = replica.engine.block_size
    footprint = run.total_input + run.total_output
    if not run.follows or replica.kv_capacity_tokens() < footprint:
        return np.zeros(len(prompts), dtype=np.int64)
    return ((prompts - 1) // block * block).astype(np.int64)


def replay(
    run: Run, eff: Efficiency, config: EngineConfig | None = None
) -> tuple[dict[str, float], EngineResult]:
    work = benchmark_workload(run.rate, run.num_prompts, run.mean_prompt, run.mean_output)
    replica = replica_for(run, eff, config)
    cached = cached_prompt_tokens(run, replica, work.prompts)
    result = simulate(replica, work.arrivals, work.prompts, work.outputs, cached)
    return metrics(result, work), result
