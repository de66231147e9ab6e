"""What a run comes to: attainment, $/Mtok, energy, and the bar's PASS/MISS lines."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from gpufleet.sim.engine import RunResult, Timeline
from gpufleet.sim.fleet import TierTotals
from gpufleet.sim.metrics import CutCause, Fate
from gpufleet.sim.report import bar, markdown, summarize, to_json
from tests.unit.sim.factories import mixed_pool

pytestmark = pytest.mark.timeout(2)


def _result(
    policy: str,
    ttft: Sequence[float],
    fate: Sequence[int],
    hours: float = 1.0,
    cause: Sequence[int] | None = None,
) -> RunResult:
    n = len(ttft)
    if cause is None:
        cause = [CutCause.NODE_LOST if f == Fate.CUT else CutCause.NONE for f in fate]
    return RunResult(
        policy=policy,
        description="",
        classes=("realtime", "batch"),
        class_of=np.array([0] * (n // 2) + [1] * (n - n // 2)),
        ttft=np.array(ttft),
        fate=np.array(fate),
        cut_cause=np.array(cause),
        prompt_tokens=np.full(n, 900),
        output_tokens=np.full(n, 100),
        tiers={"h100": TierTotals(replica_seconds=hours * 3600), "rtx4090": TierTotals()},
        price_per_replica_hour={"h100": 2.0, "rtx4090": 0.25},
        watts={"h100": 350.0, "rtx4090": 450.0},
        duration_seconds=3600.0,
        timeline=Timeline(),
        wall_seconds=0.0,
        decisions=1,
    )


def test_dropped_and_cut_requests_are_misses_and_serve_no_tokens() -> None:
    ok = Fate.COMPLETED
    result = _result(
        "gpufleet",
        [0.05, 0.05, np.inf, 0.05, 1.0, 1.0, 1.0, 3.0],
        [ok, ok, Fate.DROPPED, Fate.CUT, ok, ok, ok, ok],
    )
    s = summarize(result, mixed_pool().spec)
    assert s.classes["realtime"].attainment == pytest.approx(0.5)  # one dropped, one cut
    assert s.classes["batch"].attainment == pytest.approx(0.75)  # 3 s > 2 s
    assert s.tokens_served == 6 * 1000
    assert s.cost_dollars == pytest.approx(2.0)
    assert s.cost_per_million_tokens == pytest.approx(2.0 / 6000 * 1e6)
    assert s.energy_kwh == pytest.approx(0.35)
    assert s.carbon_grams_per_million_tokens == pytest.approx(0.35 / 6000 * 1e6 * 400)
    assert s.replica_hours == {"h100": 1.0, "rtx4090": 0.0}


def test_cut_requests_are_counted_per_cause_in_the_table_and_the_json() -> None:
    ok, cut, none = Fate.COMPLETED, Fate.CUT, CutCause.NONE
    lost, timeout = CutCause.NODE_LOST, CutCause.DRAIN_TIMEOUT
    result = _result(
        "gpufleet",
        [0.05, np.inf, 0.05, 0.05, 1.0, np.inf, 1.0, 1.0],
        [ok, cut, cut, ok, ok, cut, Fate.DROPPED, ok],
        cause=[none, lost, timeout, none, none, timeout, none, none],
    )
    s = summarize(result, mixed_pool().spec)
    assert s.cut == 3
    assert s.dropped == 1
    assert s.cut_by_cause == {lost: 1, timeout: 2}
    text = markdown([s], [])
    assert "| requests dropped (no Ready replica) | 1 |" in text
    assert "| requests cut: node lost | 1 |" in text
    assert "| requests cut: drain timeout | 2 |" in text
    document = to_json([s], {}, [])["policies"]["gpufleet"]
    assert document["cut"] == 3
    assert document["cutByCause"] == {"nodeLost": 1, "drainTimeout": 2}


def test_the_bar_says_pass_or_miss_per_criterion() -> None:
    spec = mixed_pool().spec
    ok = [Fate.COMPLETED] * 200
    fast = [0.05] * 100 + [1.0] * 100
    ours = summarize(_result("gpufleet", fast, ok, hours=1.1), spec)
    oracle = summarize(_result("oracle", fast, ok, hours=1.0), spec)
    lines = bar([ours, oracle])
    assert [(c.verdict, c.name) for c in lines] == [
        ("PASS", "gpufleet SLO attainment of realtime >= 99%"),
        ("PASS", "gpufleet SLO attainment of batch >= 99%"),
        ("PASS", "gpufleet $/Mtok <= 1.15x the oracle's"),
    ]
    slow = [0.05] * 98 + [0.5] * 2 + [1.0] * 100
    pricey = summarize(_result("gpufleet", slow, ok, hours=1.2), spec)
    verdicts = [c.verdict for c in bar([pricey, oracle])]
    assert verdicts == ["MISS", "PASS", "MISS"]
    assert "1.20x" in bar([pricey, oracle])[2].detail
    assert "the oracle attains realtime 100.00%, batch 100.00%" in lines[2].detail
    # Cheaper than the oracle by serving realtime worse is said to be so.
    cheap = summarize(_result("gpufleet", slow, ok, hours=0.5), spec)
    cost = bar([cheap, oracle])[2]
    assert cost.verdict == "PASS"
    assert cost.detail.endswith("gpufleet attains less for realtime: not the same service")


def test_the_table_puts_every_policy_side_by_side_with_its_ratio() -> None:
    spec = mixed_pool().spec
    ok = [Fate.COMPLETED] * 4
    summaries = [
        summarize(_result("gpufleet", [0.05, 0.05, 1.0, 1.0], ok, hours=1.0), spec),
        summarize(_result("h100-only", [0.05, 0.05, 1.0, 1.0], ok, hours=3.0), spec),
    ]
    text = markdown(summaries, bar(summaries))
    assert "| policy | gpufleet | h100-only |" in text
    assert "| $/Mtok / gpufleet's | 1.00x | 3.00x |" in text
    document = to_json(summaries, {"seed": 0}, bar(summaries))
    assert document["policies"]["h100-only"]["costRatioToGpufleet"] == pytest.approx(3.0)
    assert document["seed"] == 0


def test_the_attainment_ceiling_counts_prompts_too_long_for_the_objective() -> None:
    from gpufleet.sim.engine import models_of
    from gpufleet.sim.report import attainment_bound
    from tests.unit.sim.factories import trace

    pool = mixed_pool()
    models = models_of(pool)
    # On an idle H100 a 4000-token prompt takes ~230 ms, a 200-token one ~28 ms.
    t = trace([0.0, 1.0, 2.0, 3.0], prompt=[200, 4000, 200, 4000], classes=[0, 0, 1, 1])
    assert models["h100"].ttft_base_seconds(4000) > 0.1
    assert attainment_bound(pool.spec, models, t) == {"realtime": 0.5, "batch": 1.0}


def test_requests_refused_for_their_length_are_misses_and_lower_the_ceiling() -> None:
    import dataclasses

    from gpufleet.sim.engine import models_of
    from gpufleet.sim.report import attainment_bound
    from tests.unit.sim.factories import trace

    ok = Fate.COMPLETED
    result = _result("gpufleet", [0.05, 0.05, 1.0, 1.0], [ok, ok, ok, ok])
    s = summarize(result, mixed_pool().spec, {"batch": 2})
    assert s.classes["realtime"].attainment == 1.0
    assert s.classes["batch"].attainment == pytest.approx(0.5)  # 2 in time of 4 offered
    assert (s.classes["batch"].requests, s.classes["batch"].refused) == (2, 2)
    assert to_json([s], {}, [])["policies"]["gpufleet"]["classes"]["batch"]["refused"] == 2
    # A class whose every request was refused still has an objective it missed.
    none_served = _result("gpufleet", [0.05, 0.05], [ok, ok])
    none_served = dataclasses.replace(none_served, class_of=np.array([0, 0]))
    alone = summarize(none_served, mixed_pool().spec, {"batch": 3})
    assert alone.classes["batch"].attainment == 0.0
    [line] = [c for c in bar([alone]) if "of batch" in c.name]
    assert not line.passed and line.detail.startswith("0.00% within")
    pool = mixed_pool()
    t = dataclasses.replace(
        trace([0.0, 1.0], prompt=[200, 200], classes=[0, 1]), refused={"batch": 3}
    )
    assert attainment_bound(pool.spec, models_of(pool), t) == {
        "realtime": 1.0,
        "batch": pytest.approx(0.25),
    }
    # A class whose every request was refused has a ceiling of nothing.
    only_refused = dataclasses.replace(trace([0.0], classes=[0]), refused={"batch": 2})
    ceiling = attainment_bound(pool.spec, models_of(pool), only_refused)
    assert ceiling == {"realtime": 1.0, "batch": 0.0}


def test_a_class_the_trace_sent_nothing_has_no_line_in_the_bar() -> None:
    import dataclasses

    spec = mixed_pool().spec
    ok = [Fate.COMPLETED] * 100
    only_batch = dataclasses.replace(
        _result("gpufleet", [0.05] * 100, ok), class_of=np.ones(100, dtype=int)
    )
    ours = summarize(only_batch, spec)
    assert ours.classes["realtime"].requests == 0
    oracle = summarize(dataclasses.replace(only_batch, policy="oracle"), spec)
    lines = bar([ours, oracle])
    assert [c.name for c in lines] == [
        "gpufleet SLO attainment of batch >= 99%",
        "gpufleet $/Mtok <= 1.15x the oracle's",
    ]
    assert "the oracle attains batch 100.00%" in lines[1].detail
    assert "realtime" not in lines[1].detail
