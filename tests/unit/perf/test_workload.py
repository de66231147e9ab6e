"""The benchmark's request stream: vLLM's seeded gamma draws, the run's mean lengths."""

from __future__ import annotations

import numpy as np
import pytest

from gpufleet.perf.workload import MAX_PROMPT, MAX_TOTAL, benchmark_workload, poisson_arrivals

pytestmark = pytest.mark.timeout(5)


def test_arrivals_scale_with_the_rate_and_match_the_measured_span() -> None:
    one, sleep = poisson_arrivals(1.0, 200)
    four, _ = poisson_arrivals(4.0, 200)
    assert one[0] == 0.0 and np.all(np.diff(one) > 0)
    np.testing.assert_allclose(four * 4, one, rtol=1e-9)
    # Every io.net 1 req/s run lasted 189.3 s or more: the seed-42 span plus the last sleep.
    assert one[-1] + sleep == pytest.approx(189.1, abs=0.1)


def test_lengths_have_the_runs_means_and_the_sharegpt_limits() -> None:
    w = benchmark_workload(8.0, 200, 205.8, 211.6)
    assert w.prompts.mean() == pytest.approx(205.8, rel=0.01)
    assert w.outputs.mean() == pytest.approx(211.6, rel=0.01)
    assert w.prompts.max() <= MAX_PROMPT and w.prompts.min() >= 4
    assert (w.prompts + w.outputs).max() <= MAX_TOTAL
