"""Replay a `benchmark_serving` run through one simulated replica.

This is how the simulator's engine is checked on its own against the io.net measurements:
vLLM's benchmark sends N requests with exponential gaps at the offered rate (burstiness 1)
and reports P99 TTFT over them and tokens/s as all prompt plus generated tokens divided
by the run's duration (first send to last completion). Replaying the same run here and
comparing the two numbers with the raw files tests the engine's queueing, batching and
drain, none of which comes from the planner's fitted P99 curve.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpufleet.sim.replica import EngineParams, Replica, engine_params


@dataclass(frozen=True)
class BenchmarkResult:
    ttft_p99_seconds: float
    tokens_per_second: float
    completed_rps: float
    mean_tpot_seconds: float


class _Times:
    def __init__(self, n: int) -> None:
        self.first = np.full(n, np.nan)
        self.done = np.full(n, np.nan)

    def first_token(self, request: int, time: float) -> None:
        self.first[request] = time

    def generated(self, request: int, tokens: int, time: float) -> None:
        pass

    def completed(self, request: int, time: float) -> None:
        self.done[request] = time


def replay_benchmark(
    params: EngineParams,
    *,
    rate_rps: float,
    prompt_tokens: list[int],
    output_tokens: list[int],
    seed: int = 0,
) -> BenchmarkResult:
    """One benchmark run of len(prompt_tokens) requests at `rate_rps`, as benchmark_serving."""
    n = len(prompt_tokens)
    gaps = np.random.default_rng(seed).exponential(1.0 / rate_rps, size=n)
    arrival = np.concatenate(([0.0], np.cumsum(gaps[:-1])))
    times = _Times(n)
    replica = Replica(params, prompt_tokens, output_tokens, times)
    for i in range(n):
        replica.enqueue(i, float(arrival[i]) + params.overhead)
    replica.drain()
    ttft = times.first - arrival
    duration = float(np.max(times.done))
    decode = np.array(output_tokens) - 1
    has_decode = decode > 0
    tpot = (times.done - times.first)[has_decode] / decode[has_decode]
    return BenchmarkResult(
        ttft_p99_seconds=float(np.percentile(ttft, 99)),
        tokens_per_second=float(sum(prompt_tokens) + sum(output_tokens)) / duration,
        completed_rps=n / duration,
        mean_tpot_seconds=float(np.mean(tpot)) if len(tpot) else 0.0,
    )


# -- the io.net runs -------------------------------------------------------------------------

_SIZE_NAMES = {"1.5B": "m-1.5B", "8B": "m-8B", "14B": "m-14B", "32B": "m-32B", "70B": "m-70B"}


@dataclass(frozen=True)
class MeasuredRun:
    """One raw io.net `benchmark_serving` file of a built-in profile's model on one GPU."""

    path: Path
    accelerator: str
    size_class: str
    rate_rps: float
    prompt_tokens: float
    output_tokens: float
    ttft_p99_seconds: float
    tokens_per_second: float


@dataclass(frozen=True)
class Comparison:
    run: MeasuredRun
    ttft_p99_seconds: float  # simulated, median over seeds
    tokens_per_second: float
    below_saturation: bool  # offered at most the model's saturation rate at the run's shape

    @property
    def ttft_error(self) -> float:
        return self.ttft_p99_seconds / self.run.ttft_p99_seconds - 1.0

    @property
    def tokens_error(self) -> float:
        return self.tokens_per_second / self.run.tokens_per_second - 1.0


def measured_runs(data: Path) -> list[MeasuredRun]:
    """The single-GPU runs of every built-in profile's model, read from the raw JSON files."""
    from gpufleet.planning.profile_data import PROFILES

    runs = []
    for profile in PROFILES:
        if profile.gpus != 1:
            continue
        model = profile.model.split("/")[-1]
        for path in sorted(data.glob(f"vllm_200prompts*qps_{model}_sharegpt_1x*.json")):
            raw = json.loads(path.read_text().splitlines()[0])
            if ("H100" in raw["gpu_name"]) != profile.accelerator.startswith("H100"):
                continue
            n = raw["num_prompts"]
            runs.append(
                MeasuredRun(
                    path=path,
                    accelerator=profile.accelerator,
                    size_class=profile.size_class,
                    rate_rps=float(raw["request_rate"]),
                    prompt_tokens=raw["total_input_tokens"] / n,
                    output_tokens=raw["total_output_tokens"] / n,
                    ttft_p99_seconds=raw["p99_ttft_ms"] / 1000.0,
                    tokens_per_second=raw["total_token_throughput"],
                )
            )
    sizes = list(_SIZE_NAMES)
    return sorted(runs, key=lambda r: (r.accelerator, sizes.index(r.size_class), r.rate_rps))


def compare(run: MeasuredRun, seeds: int = 5) -> Comparison:
    """Replay `run` through one replica of its built-in profile (200 requests at its means)."""
    from gpufleet.api.types import ModelSpec, Tier
    from gpufleet.planning.profiles import replica_model

    tier = Tier.model_validate(
        {
            "name": "t",
            "accelerator": run.accelerator,
            "maxReplicas": 1,
            "pricePerGPUHour": "1",
        }
    )
    model = replica_model(tier, ModelSpec(name=_SIZE_NAMES[run.size_class]))
    params = engine_params(model)
    shape = [round(run.prompt_tokens)] * 200, [round(run.output_tokens)] * 200
    results = [
        replay_benchmark(
            params, rate_rps=run.rate_rps, prompt_tokens=shape[0], output_tokens=shape[1], seed=s
        )
        for s in range(seeds)
    ]
    return Comparison(
        run=run,
        ttft_p99_seconds=float(np.median([r.ttft_p99_seconds for r in results])),
        tokens_per_second=float(np.median([r.tokens_per_second for r in results])),
        below_saturation=run.rate_rps <= model.saturation_rps(run.prompt_tokens, run.output_tokens),
    )
