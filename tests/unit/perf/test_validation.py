"""A few io.net runs replayed with the stored calibration: the model is near the measurement."""

from __future__ import annotations

import pytest

from gpufleet.perf.calibration import DEFAULT, FITTED
from gpufleet.perf.ionet import load_runs
from gpufleet.perf.validate import validate
from gpufleet.perf.vidur import compare
from tests.pools import SHARED_DATA

pytestmark = pytest.mark.timeout(10)
RUNS = load_runs(SHARED_DATA / "iog-llm-inference-benchmarks")


def _pick(model: str, gpu: str, gpus: int, rate: float) -> list[object]:
    return [
        r for r in RUNS if model in r.model and gpu in r.gpu and r.gpus == gpus and r.rate == rate
    ]


@pytest.mark.parametrize(
    ("model", "gpu", "gpus", "rate"),
    [
        ("Meta-Llama-3-8B", "H100", 1, 1.0),
        ("Meta-Llama-3-8B", "4090", 1, 8.0),
        ("Qwen-14B", "H100", 1, 4.0),
    ],
)
def test_single_gpu_runs_are_replayed_within_loose_bounds(
    model: str, gpu: str, gpus: int, rate: float
) -> None:
    rows = validate(_pick(model, gpu, gpus, rate))  # type: ignore[arg-type]
    assert rows
    for row in rows:
        assert abs(row.error("medianTpotMs")) < 0.25
        assert abs(row.error("outputTokensPerSecond")) < 0.25
        assert abs(row.error("medianTtftMs")) < 0.5


def test_the_vidur_comparison_covers_both_gpus_and_stays_within_a_factor_of_two() -> None:
    points = compare(
        SHARED_DATA / "vidur-profiling",
        {"H100-SXM": FITTED.get("H100-PCIe", DEFAULT), "A100-80GB": DEFAULT},
        tokens=(1, 512, 4096),
    )
    assert {p.gpu for p in points} == {"H100-SXM", "A100-80GB"}
    assert all(0.5 < p.predicted_ms / p.measured_ms < 2.0 for p in points if p.tokens >= 512)


def test_server_sessions_from_the_files_dates() -> None:
    # Every io.net server ran 32, 16, 8, 4, 1 req/s in that order: the 32 req/s run is the
    # first on its server, every other run follows one on the same server.
    assert all(r.follows == (r.rate != 32.0) for r in RUNS)


def test_a_following_run_finds_its_prompts_cached_when_the_cache_holds_a_run() -> None:
    from dataclasses import replace

    from gpufleet.perf.replay import cached_prompt_tokens, replica_for
    from gpufleet.perf.workload import sharegpt_lengths

    (h100,) = _pick("Meta-Llama-3-8B", "H100", 1, 1.0)  # 445k tokens of cache
    (rtx,) = _pick("Meta-Llama-3-8B", "4090", 1, 1.0)  # 47k: less than one run
    prompts, _ = sharegpt_lengths(200, h100.mean_prompt, h100.mean_output)  # type: ignore[attr-defined]
    hits = cached_prompt_tokens(h100, replica_for(h100, FITTED["H100-PCIe"]), prompts)  # type: ignore[arg-type]
    assert (hits == (prompts - 1) // 16 * 16).all()
    first = replace(h100, follows=False)  # type: ignore[type-var]
    assert not cached_prompt_tokens(first, replica_for(first, FITTED["H100-PCIe"]), prompts).any()
    small = cached_prompt_tokens(rtx, replica_for(rtx, FITTED["RTX-4090"]), prompts)  # type: ignore[arg-type]
    assert not small.any()


def test_a_replay_takes_other_engine_flags_as_a_what_if() -> None:
    """The files do not record the server's flags: a replay with a larger KV cache
    (gpu_memory_utilization 0.95) holds more tokens and preempts less on a KV-bound run."""
    from dataclasses import replace

    from gpufleet.perf.hardware import gpu
    from gpufleet.perf.replay import replay
    from gpufleet.perf.vllm import default_config

    (run,) = _pick("QwQ-32B", "H100", 1, 16.0)
    eff = FITTED["H100-PCIe"]
    default, base = replay(run, eff)  # type: ignore[arg-type]
    larger = replace(default_config(gpu(run.gpu).memory_gib), gpu_memory_utilization=0.95)  # type: ignore[attr-defined]
    what_if, more = replay(run, eff, larger)  # type: ignore[arg-type]
    assert base.preemptions > 0
    assert more.kv_blocks > 1.4 * base.kv_blocks
    assert more.preemptions < base.preemptions
    assert what_if["p99TtftMs"] < default["p99TtftMs"]


@pytest.mark.timeout(60)
def test_output_tokens_per_second_is_read_over_orders_of_the_outputs() -> None:
    """Which outputs come last sets when a run ends; the files do not say. At 4 and 8
    req/s on one GPU the draw's own order reads output tokens/s high (its last requests'
    outputs are short); the median over orders is within a few percent of the runs."""
    import numpy as np

    from gpufleet.perf.calibration import calibration
    from gpufleet.perf.replay import replay

    runs = [r for r in RUNS if r.gpus == 1 and r.rate in (4.0, 8.0)]
    assert len(runs) >= 20
    one, many = [], []
    for run in runs:
        eff = calibration(run.gpu).efficiency
        measured = run.measured["outputTokensPerSecond"]
        one.append(replay(run, eff, orders=1)[0]["outputTokensPerSecond"] / measured - 1)
        many.append(replay(run, eff)[0]["outputTokensPerSecond"] / measured - 1)
    assert float(np.median(one)) > 0.05  # the draw: about 8% high
    assert abs(float(np.median(many))) < 0.04
    assert sum(abs(e) <= 0.1 for e in many) > sum(abs(e) <= 0.1 for e in one)
