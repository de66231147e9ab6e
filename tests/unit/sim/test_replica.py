"""The continuous-batching engine on its own: prefill, decode, queueing, eviction, work."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpufleet.api.types import ModelSpec
from gpufleet.planning.profiles import replica_model
from gpufleet.sim.replay import replay_benchmark
from gpufleet.sim.replica import EngineParams, engine_params
from tests.unit.planning.factories import tier_spec
from tests.unit.sim.factories import PARAMS, engine

pytestmark = pytest.mark.timeout(2)


def test_an_idle_engine_prefills_a_prompt_in_one_step() -> None:
    replica, sink = engine([500], [1])
    replica.enqueue(0, 1.0)
    replica.drain()
    # max(floor 10 ms, 500 tokens x 0.1 ms) = 50 ms, starting at once.
    assert sink.first[0] == pytest.approx(1.05)
    assert sink.done[0] == pytest.approx(1.05)


def test_a_short_prompt_still_costs_a_whole_step() -> None:
    replica, sink = engine([10], [1])
    replica.enqueue(0, 0.0)
    replica.drain()
    assert sink.first[0] == pytest.approx(PARAMS.step_floor)


def test_decode_takes_one_step_per_generated_token() -> None:
    replica, sink = engine([100], [11])
    replica.enqueue(0, 0.0)
    replica.drain()
    # First token ends the prefill step; 10 more decode steps at the floor (1 x 1 ms < 10 ms).
    assert sink.done[0] - sink.first[0] == pytest.approx(10 * PARAMS.step_floor)


def test_tokens_are_counted_as_steps_generate_them_not_when_a_request_ends() -> None:
    # vLLM adds each step's new tokens to vllm:generation_tokens; a counter bumped only at
    # the end of a request would show a replica that has just taken a burst as idle.
    replica, sink = engine([100, 100], [101, 51])
    replica.enqueue(0, 0.0)
    replica.enqueue(1, 0.0)
    replica.advance(0.3)
    # Both prefilled in the first step (10 ms), then 10 ms decode steps: by 0.3 s about 29
    # steps gave each of them a token, and neither has finished.
    assert not sink.done
    so_far = sum(n for t, n in sink.tokens if t <= 0.3 + 1e-9)
    assert 2 * 28 <= so_far <= 2 * 31
    replica.drain()
    assert sum(n for _, n in sink.tokens) == 101 + 51  # every output token, counted once
    assert max(t for t, _ in sink.tokens) == pytest.approx(max(sink.done.values()))


def test_a_long_prompt_is_chunked_and_holds_back_the_next_one() -> None:
    replica, sink = engine([5000, 100], [1, 1])
    replica.enqueue(0, 0.0)
    replica.enqueue(1, 0.001)
    replica.drain()
    # 5000 tokens at 2048 a step: 3 steps (2048, 2048, 904); the short prompt rides the
    # third step's leftover budget, so it waits for the long one.
    assert sink.first[0] == pytest.approx(0.2048 + 0.2048 + 0.1004)
    assert sink.first[1] == pytest.approx(sink.first[0])


def test_ttft_grows_with_prompt_length() -> None:
    ttfts = []
    for prompt in (200, 1000, 4000):
        replica, sink = engine([prompt], [1])
        replica.enqueue(0, 0.0)
        replica.drain()
        ttfts.append(sink.first[0])
    assert ttfts[0] < ttfts[1] < ttfts[2]


def test_an_idle_replica_gives_a_prompt_the_least_ttft_the_engine_ever_gives_it() -> None:
    # By hand: the overhead (5 ms), then chunks of the 2,048-token budget, each at least the
    # 10 ms floor (0.1 ms a token).
    assert PARAMS.idle_ttft_seconds(10) == pytest.approx(0.005 + 0.010)
    assert PARAMS.idle_ttft_seconds(500) == pytest.approx(0.005 + 0.050)
    assert PARAMS.idle_ttft_seconds(5000) == pytest.approx(0.005 + 2 * 0.2048 + 0.0904)
    for prompt in (10, 500, 2048, 5000):  # the engine, alone with the request, agrees
        replica, sink = engine([prompt], [3])
        replica.enqueue(0, 2.0 + PARAMS.overhead)
        replica.drain()
        assert sink.first[0] - 2.0 == pytest.approx(PARAMS.idle_ttft_seconds(prompt))
    # Under load (Poisson at ~70% busy, lognormal prompts) no request gets its first token
    # sooner: others' chunks share its steps, their prefills and decodes come first.
    rng = np.random.default_rng(3)
    n = 400
    prompts = [int(x) for x in np.clip(rng.lognormal(np.log(600), 1.0, n), 1, 20000)]
    outputs = [int(x) for x in np.clip(rng.lognormal(np.log(100), 0.5, n), 1, 2000)]
    work = [PARAMS.work_seconds(p, o) for p, o in zip(prompts, outputs, strict=True)]
    mean_work = float(np.mean(work))
    arrivals = np.cumsum(rng.exponential(mean_work / 0.7, n))
    replica, sink = engine(prompts, outputs)
    for i, at in enumerate(arrivals):
        replica.enqueue(i, float(at) + PARAMS.overhead)
    replica.drain()
    ttft = np.array([sink.first[i] - arrivals[i] for i in range(n)])
    least = np.array([PARAMS.idle_ttft_seconds(p) for p in prompts])
    assert np.all(ttft >= least - 1e-9)
    assert np.mean(ttft > least + 1e-6) > 0.3  # the load did make others wait


@pytest.mark.parametrize("accelerator", ["H100-PCIe-80GB", "RTX4090"])
def test_the_planner_reads_the_idle_ttft_the_engine_runs(accelerator: str) -> None:
    # What status calls unservable (`prompts.longest_idle_within`) and the simulator's
    # ceiling are the same numbers.
    model = replica_model(
        tier_spec("t", accelerator), ModelSpec(name="meta-llama/Meta-Llama-3-8B-Instruct")
    )
    params = engine_params(model)
    for prompt in (1, 200, 1765, 2048, 2049, 9000):
        assert model.idle_ttft_seconds(prompt) == params.idle_ttft_seconds(prompt)
    assert params.step_floor == model.step_floor_seconds
    assert params.overhead == model.idle_overhead_seconds


def test_a_request_arriving_mid_step_waits_for_the_step_to_end() -> None:
    replica, sink = engine([1000, 100], [1, 1])
    replica.enqueue(0, 0.0)  # a 100 ms prefill step
    replica.enqueue(1, 0.03)
    replica.drain()
    assert sink.first[0] == pytest.approx(0.1)
    assert sink.first[1] == pytest.approx(0.1 + 0.01)


def test_steps_grow_with_the_batch() -> None:
    # 40 running sequences at 1 ms each make a 40 ms step, above the 10 ms floor.
    n = 40
    replica, sink = engine([10] * n, [3] * n)
    for i in range(n):
        replica.enqueue(i, 0.0)
    replica.drain()
    assert max(sink.done.values()) - max(sink.first.values()) == pytest.approx(2 * 0.040)


def _p99(params: EngineParams, rate: float) -> float:
    n = 600
    result = replay_benchmark(
        params, rate_rps=rate, prompt_tokens=[200] * n, output_tokens=[200] * n
    )
    return result.ttft_p99_seconds


def test_ttft_grows_as_the_replica_nears_saturation() -> None:
    saturation = 1.0 / PARAMS.work_seconds(200, 200)  # ~4.8 req/s
    low, mid, high = (_p99(PARAMS, f * saturation) for f in (0.2, 0.6, 0.95))
    assert low < mid < high
    assert high > 1.5 * low


def test_past_saturation_the_queue_grows_without_bound() -> None:
    saturation = 1.0 / PARAMS.work_seconds(200, 200)
    short, long = (
        replay_benchmark(
            PARAMS, rate_rps=1.5 * saturation, prompt_tokens=[200] * n, output_tokens=[200] * n
        )
        for n in (200, 800)
    )
    assert long.ttft_p99_seconds > 3 * short.ttft_p99_seconds


def test_an_overloaded_replica_completes_at_its_saturation_rate() -> None:
    saturation = 1.0 / PARAMS.work_seconds(200, 200)
    n = 400
    result = replay_benchmark(
        PARAMS, rate_rps=4 * saturation, prompt_tokens=[200] * n, output_tokens=[200] * n
    )
    assert result.completed_rps == pytest.approx(saturation, rel=0.1)


def test_busy_seconds_count_the_work_of_every_request() -> None:
    prompts, outputs = [300, 700, 50], [20, 5, 90]
    replica, _ = engine(prompts, outputs)
    for i, t in enumerate((0.0, 0.02, 0.5)):
        replica.enqueue(i, t)
    replica.drain()
    expected = sum(PARAMS.work_seconds(p, o) for p, o in zip(prompts, outputs, strict=True))
    # The first token of each request is made by its prefill step, not a decode step.
    expected -= 3 * PARAMS.decode_per_token
    assert replica.busy_seconds == pytest.approx(expected)


def test_evict_returns_waiting_and_cut_requests() -> None:
    replica, sink = engine([100, 100, 30000], [500, 1, 1])
    replica.enqueue(0, 0.0)
    replica.enqueue(2, 0.0)  # a long prompt: still prefilling at t=0.5
    waiting, cut = replica.evict(0.5)
    assert waiting == [2]
    assert cut == [0]
    assert replica.idle
    assert 2 not in sink.first


def test_the_batch_is_capped_at_max_running() -> None:
    params = EngineParams(0.01, 0.0, 0.00001, 0.0, max_running=2)
    replica, sink = engine([10] * 3, [100] * 3, params)
    for i in range(3):
        replica.enqueue(i, 0.0)
    replica.drain()
    # The third waits for a running one to finish its 100 tokens.
    assert sink.first[2] >= min(sink.done[0], sink.done[1])


def test_engine_params_come_from_the_replica_model() -> None:
    model = replica_model(tier_spec(accelerator="H100-PCIe-80GB"), ModelSpec(name="llama-8B"))
    params = engine_params(model)
    # Prefill and decode add up to the model's service time, so both saturate together.
    assert params.work_seconds(1155, 211) == pytest.approx(model.service_seconds(1155, 211))
    assert params.step_floor == pytest.approx(model.fit.tpot_base_seconds)
    # At the reference shape, a quiet engine (one step waited out) gives the profile's base.
    first_step = max(params.step_floor, model.prefill_seconds_for(model.prompt_tokens))
    assert params.overhead + params.step_floor + first_step == pytest.approx(
        model.ttft_base_seconds(model.prompt_tokens)
    )
    slower = engine_params(model.with_capacity_factor(0.5))
    assert slower.prefill_per_token == pytest.approx(2 * params.prefill_per_token)


def test_replay_is_deterministic_per_seed() -> None:
    a = replay_benchmark(PARAMS, rate_rps=3.0, prompt_tokens=[200] * 50, output_tokens=[50] * 50)
    b = replay_benchmark(PARAMS, rate_rps=3.0, prompt_tokens=[200] * 50, output_tokens=[50] * 50)
    c = replay_benchmark(
        PARAMS, rate_rps=3.0, prompt_tokens=[200] * 50, output_tokens=[50] * 50, seed=1
    )
    assert a == b
    assert a != c
    assert math.isfinite(a.tokens_per_second)
    assert np.isfinite(a.mean_tpot_seconds)
