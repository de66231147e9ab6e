"""The requests `vllm bench serve` (benchmark_serving) sends: arrivals and ShareGPT-like lengths.

Arrivals: request 0 at t=0, request i+1 one gamma(shape=1, scale=1/rate) interval (Poisson)
after request i, drawn from numpy's legacy global generator seeded with `seed`, exactly as
vllm/benchmarks/serve.py `get_request` does; after the last request the client sleeps one more
interval before it waits for the outstanding responses, so the run lasts at least that long.
The io.net runs' durations pin the seed: with seed 42 the 200 requests span 187.6 s at 1 req/s
plus a 1.5 s last sleep (189.1 s), and every measured 1 req/s run lasted 189.3-212 s, the
fastest ones within 0.2 s of it; seed 0 (the default) would give 196.4 s, longer than six of
them. So the replay uses seed 42, an inference from the durations (io.net's command line is
not published with the results).

Lengths: the files give only the 200 requests' total prompt and output tokens, not each
request's. The replay draws ShareGPT-like lengths: prompt ~ lognormal(sigma 0.5) clipped to
[4, 1024] tokens, output ~ lognormal(sigma 0.6) clipped to [4, 2048 - prompt] (vLLM's
ShareGPT filter drops prompts over 1024 and pairs over 2048 tokens, and pairs with fewer than
4 tokens either side), independent, from a fixed seed, then scaled so that their means are the
run's. The same draw serves every run, as the same 200 prompts did. Which of them come
last is unknown, and sets when a run ends: `replay` takes output tokens/s over several
orders of the drawn outputs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

ARRIVAL_SEED = 42
LENGTH_SEED = 20250610
SIGMA_PROMPT = 0.5
SIGMA_OUTPUT = 0.6
MAX_PROMPT = 1024
MAX_TOTAL = 2048
MIN_LEN = 4


@dataclass(frozen=True)
class Workload:
    arrivals: NDArray[np.float64]  # seconds from the start, ascending
    prompts: NDArray[np.int64]
    outputs: NDArray[np.int64]
    last_sleep: float  # the client's sleep after the last request, seconds

    @property
    def min_duration(self) -> float:
        return float(self.arrivals[-1]) + self.last_sleep


def poisson_arrivals(
    rate: float, n: int, seed: int = ARRIVAL_SEED
) -> tuple[NDArray[np.float64], float]:
    """Arrival times and the client's last sleep, as vLLM's benchmark draws them."""
    draws = np.random.RandomState(seed).gamma(1.0, 1.0 / rate, n)
    times = np.concatenate(([0.0], np.cumsum(draws[: n - 1])))
    return times, float(draws[n - 1])


def _scaled(
    base: NDArray[np.float64], mean: float, upper: NDArray[np.float64]
) -> NDArray[np.int64]:
    factor = mean / float(np.mean(base))
    values = np.clip(np.rint(base * factor), MIN_LEN, upper)
    for _ in range(30):  # clipping moves the mean: rescale until it holds
        err = mean / float(np.mean(values))
        if abs(err - 1) < 1e-4:
            break
        factor *= err
        values = np.clip(np.rint(base * factor), MIN_LEN, upper)
    return values.astype(np.int64)


def sharegpt_lengths(
    n: int,
    mean_prompt: float,
    mean_output: float,
    seed: int = LENGTH_SEED,
    *,
    max_prompt: int = MAX_PROMPT,
    max_total: int = MAX_TOTAL,
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Prompt and output lengths with the given means (see the module's docstring); a
    what-if for longer requests than ShareGPT's filter keeps raises the two limits."""
    rng = np.random.default_rng(seed)
    base_p = rng.lognormal(0.0, SIGMA_PROMPT, n)
    base_o = rng.lognormal(0.0, SIGMA_OUTPUT, n)
    prompts = _scaled(base_p, mean_prompt, np.full(n, float(max_prompt)))
    outputs = _scaled(base_o, mean_output, (max_total - prompts).astype(np.float64))
    return prompts, outputs


def benchmark_workload(rate: float, n: int, mean_prompt: float, mean_output: float) -> Workload:
    """The requests of one `vllm bench serve --dataset-name sharegpt` run."""
    arrivals, last = poisson_arrivals(rate, n)
    prompts, outputs = sharegpt_lengths(n, mean_prompt, mean_output)
    return Workload(arrivals, prompts, outputs, last)
