"""The planner's replica model fitted on the first-principles engine at steady state.

The built-in profiles (`profile_data`) are fitted on io.net's 200-request runs, whose
completed rate is capped by the drain of the last long outputs rather than by the GPU: they
put an H100 PCIe with Llama 3 8B at 14.7 req/s where the engine (`gpufleet.perf`, calibrated
on those same runs) sustains about 71 (`make bench-profiles`). This module fits the same
`capacity.Fit` to the engine instead, run as a replica runs in production:

- P99 TTFT and mean TPOT: the engine's, at STEADY_FRACTIONS of its sustained throughput
  (`perf.capacity.sustained_rps`: completions per second while a backlog keeps its batch
  full), each a Poisson stream of at least 400 requests and 90 s of arrivals
  (`perf.capacity`'s what-if);
- fitted as base + queue x (rho / (1 - rho))^m in log space, the saturation with them, at
  most the sustained throughput and above every rate whose queue drained
  (`fitting.fit_at_most`). A steady stream's queue stops draining below the backlog's
  throughput: an H100 PCIe with Llama 3 8B (206/202-token requests) sustains 71 req/s under
  a backlog, while a 90 s Poisson stream at 61 req/s has a P99 TTFT of 12 s and growing;
  the fit puts its saturation at 52. A rate whose P99 is infinite (requests never served)
  is left out;
- prefill of the reference prompt: the engine's step time for that prompt alone.

`engine_fit` takes the replica as gpufleet.perf names it, on vLLM 0.8.5's defaults unless told
(the io.net runs' server); `profiles.replica_model` builds a pool's tier with it, as the
operator runs it, when the pool asks for spec.scaling.performanceModel: Engine.

`make bench-profiles` puts the model built here beside the built-in profile at every io.net
run (P99 TTFT at the run's rate against the measurement). It is not the default: it does not
read those runs' P99 better than the built-in profiles (the table says why: prefix-cache hits
and 200-request bursts), and making it so moves every cost and capacity number the planner,
the simulator and the fleet twin give.

Cost: about 0.2-2.5 s of engine time per (GPU type, model, GPU count, vLLM settings, request
shape), the most for the fastest replicas (the longest streams); cached for the process
(CACHED_FITS).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from gpufleet.perf.capacity import MAX_REQUESTS, REQUESTS, STEADY_SECONDS, lengths, sustained_rps
from gpufleet.perf.engine import simulate
from gpufleet.perf.hardware import Gpu
from gpufleet.perf.models import ModelArch
from gpufleet.perf.roofline import Replica
from gpufleet.perf.vllm import EngineConfig
from gpufleet.perf.workload import poisson_arrivals
from gpufleet.planning.capacity import ReplicaModel
from gpufleet.planning.derived import NotDerivable, engine_replica
from gpufleet.planning.fitting import MeasuredPoint, fit_at_most

STEADY_FRACTIONS = (1 / 64, 0.25, 0.5, 0.7, 0.85, 0.95)
# Fits kept per process: an operator refits a (card, model, GPUs, vLLM settings) only when
# more distinct ones than this are in use, each a few kilobytes.
CACHED_FITS = 1024
# The offered -> completed curve of a 200-request benchmark (`capacity.served_from_offered`)
# has no meaning at steady state; a steep one keeps served = offered up to saturation.
STEADY_SHARPNESS = 8.0


@dataclass(frozen=True)
class SteadyPoint:
    """The engine at one steady rate."""

    rate_rps: float
    ttft_p99_seconds: float  # inf: some requests never served
    tpot_seconds: float


@dataclass(frozen=True)
class EngineFit:
    """A replica model fitted on the engine, with the points it was fitted on."""

    model: ReplicaModel
    sustained_rps: float
    points: tuple[SteadyPoint, ...]
    calibrated: bool  # the GPU type's efficiencies were fitted on io.net runs
    efficiencies_of: str | None  # not calibrated: the GPU type whose efficiencies it ran on

    def errors(self) -> tuple[float, ...]:
        """The fitted P99 / the engine's - 1 at each point below the fitted saturation (a
        point above it is a queue that grew for as long as the stream ran: the model's
        P99 there is infinite, the engine's the length of the stream)."""
        m = self.model
        return tuple(
            m.ttft_p99_seconds(p.rate_rps, m.prompt_tokens, m.output_tokens) / p.ttft_p99_seconds
            - 1.0
            for p in self.points
            if math.isfinite(p.ttft_p99_seconds) and p.rate_rps < m.fit.saturation_rps
        )


def steady_point(replica: Replica, rate: float, prompt: float, output: float) -> SteadyPoint:
    """P99 TTFT and mean TPOT of a Poisson stream at `rate` through the engine."""
    n = max(REQUESTS, min(MAX_REQUESTS, math.ceil(rate * STEADY_SECONDS)))
    arrivals, _ = poisson_arrivals(rate, n)
    prompts, outputs = lengths(n, prompt, output)
    result = simulate(replica, arrivals, prompts, outputs)
    ttft = np.where(np.isnan(result.ttft), np.inf, result.ttft)
    tpot = result.tpot[~np.isnan(result.tpot)]
    return SteadyPoint(
        rate_rps=rate,
        ttft_p99_seconds=float(np.percentile(ttft, 99)),
        tpot_seconds=float(np.mean(tpot)) if len(tpot) else math.nan,
    )


def engine_fit(
    accelerator: str | Gpu,
    arch: ModelArch,
    gpus: int,
    prompt: float,
    output: float,
    config: EngineConfig | None = None,
    like: str | None = None,
) -> EngineFit:
    """The replica model of `gpus` x `accelerator` (a GPU name gpufleet.perf knows, or a
    datasheet's row) serving `arch` at this mean request shape, fitted on the engine with
    the GPU type's calibrated efficiencies (a GPU type with no runs: those of `like`, a
    measured one, else typical ones) and vLLM settings `config` (None: the 0.8.5 defaults
    the io.net runs had). NotDerivable: a GPU it does not know, or a replica that serves
    nothing (no room for the KV cache, or no finite P99)."""
    return _engine_fit(accelerator, arch, gpus, round(prompt, 1), round(output, 1), config, like)


@functools.lru_cache(maxsize=CACHED_FITS)
def _engine_fit(
    accelerator: str | Gpu,
    arch: ModelArch,
    gpus: int,
    prompt: float,
    output: float,
    config: EngineConfig | None,
    like: str | None,
) -> EngineFit:
    replica, calibration, carried = engine_replica(accelerator, arch, gpus, like, config)
    card = replica.gpu
    sustained = sustained_rps(replica, prompt, output)
    if sustained <= 0:
        raise NotDerivable(f"{arch.name} on {gpus} x {card.name}: most requests never served")
    points = tuple(steady_point(replica, f * sustained, prompt, output) for f in STEADY_FRACTIONS)
    try:
        fit = fit_at_most(
            [
                MeasuredPoint(
                    offered_rps=p.rate_rps,
                    served_rps=p.rate_rps,
                    ttft_p99_seconds=p.ttft_p99_seconds,
                    tokens_per_second=p.rate_rps * (prompt + output),
                    tpot_seconds=None if math.isnan(p.tpot_seconds) else p.tpot_seconds,
                )
                for p in points
            ],
            sustained,
            STEADY_SHARPNESS,
        )
    except ValueError as error:
        raise NotDerivable(f"{arch.name} on {gpus} x {card.name}: {error}") from None
    prefill = replica.step_seconds(int(prompt), 1, prompt * prompt / 2, 0.0)
    replica_model = ReplicaModel(
        name=f"{card.name}/{arch.name.split('/')[-1]}/x{gpus} (engine)",
        fit=fit,
        prompt_tokens=prompt,
        output_tokens=output,
        prefill_seconds=min(prefill, fit.ttft_base_seconds),
        gpus=gpus,
        watts=card.board_power_w * gpus,
        model_load_seconds=0.0,
        measured=False,
        source=f"gpufleet.perf at steady state: {arch.name} on {gpus}x {card.name}",
        max_batched_tokens=replica.engine.max_num_batched_tokens,
        max_running=replica.engine.max_num_seqs,
    )
    return EngineFit(replica_model, sustained, points, calibration.measured, carried)
