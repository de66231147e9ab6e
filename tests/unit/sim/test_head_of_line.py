"""Head-of-line blocking: the planner's model against the simulator's engine.

A class of short prompts sharing replicas with a class of long ones waits behind their
prefills (vLLM prefills first come, first served). The planner models the wait as
`ReplicaModel.head_of_line_seconds`; here the engine, which knows nothing of that model,
says whether a 100 ms class can share an H100 with 1,500-token prompts.
"""

from __future__ import annotations

import numpy as np
import pytest

from gpufleet.planning.profiles import replica_model
from gpufleet.sim.replica import Replica, engine_params
from tests.unit.planning.factories import LLAMA_8B, tier_spec

pytestmark = pytest.mark.timeout(20)

SHORT = (290, 112)  # the Azure conversation trace's shortest 30% of prompts, on average
LONG = (1525, 254)  # the other 70%


class _FirstTokens:
    def __init__(self, n: int) -> None:
        self.at = np.full(n, np.nan)

    def first_token(self, request: int, time: float) -> None:
        self.at[request] = time

    def generated(self, request: int, tokens: int, time: float) -> None:
        pass

    def completed(self, request: int, time: float) -> None:
        pass


def _short_p99(short_rps: float, long_rps: float, seconds: float = 2000.0) -> float:
    """P99 TTFT of the short prompts on one simulated H100 replica (Poisson arrivals)."""
    model = replica_model(tier_spec(accelerator="H100-PCIe-80GB"), LLAMA_8B)
    params = engine_params(model)
    generator = np.random.default_rng(0)
    arrivals: list[tuple[float, int, int, bool]] = []
    for rate, (prompt, output), short in ((short_rps, SHORT, True), (long_rps, LONG, False)):
        count = generator.poisson(rate * seconds)
        arrivals += [(t, prompt, output, short) for t in generator.uniform(0, seconds, count)]
    arrivals.sort()
    sink = _FirstTokens(len(arrivals))
    replica = Replica(params, [a[1] for a in arrivals], [a[2] for a in arrivals], sink)
    for i, (t, *_) in enumerate(arrivals):
        replica.enqueue(i, t + params.overhead)
    replica.drain()
    ttft = sink.at - np.array([a[0] for a in arrivals])
    return float(np.percentile(ttft[np.array([a[3] for a in arrivals])], 99))


def test_short_prompts_alone_hold_100ms_and_beside_long_ones_do_not() -> None:
    model = replica_model(tier_spec(accelerator="H100-PCIe-80GB"), LLAMA_8B)
    blocking = model.head_of_line_seconds(LONG[0])
    # The model: eligible alone, not eligible beside the long prompts.
    assert model.max_utilization(0.1, *SHORT) > 0.9
    assert model.max_utilization(0.1, *SHORT, blocking_seconds=blocking) == 0.0
    # The engine agrees: 42 ms alone, over 100 ms once the long prompts keep it ~15% busy.
    assert _short_p99(2.0, 0.0) < 0.06
    assert _short_p99(2.0, 1.0) > 0.1
    assert _short_p99(2.0, 3.0) > _short_p99(2.0, 1.0)


def test_prompts_no_longer_than_the_benchmarks_block_little() -> None:
    model = replica_model(tier_spec(accelerator="H100-PCIe-80GB"), LLAMA_8B)
    reference = model.prompt_tokens  # the io.net runs' prompts, ~200 tokens
    assert model.head_of_line_seconds(reference / 2) == 0.0
    assert model.head_of_line_seconds(reference) == pytest.approx(
        model.prefill_seconds_for(reference)
    )
    assert (
        model.max_utilization(0.1, 200, 200, blocking_seconds=model.head_of_line_seconds(200)) > 0.8
    )
