"""tools/bench_hedging.py: the two pools, the sums over seeds and the table, on made-up runs."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from tools.bench_hedging import (
    POOL,
    Setting,
    Totals,
    command,
    findings,
    pool_body,
    section,
    table_rows,
)

from gpufleet.sim.metrics import CutCause
from gpufleet.sim.report import ClassSummary, Summary

pytestmark = pytest.mark.timeout(5)

LOST, TIMEOUT = CutCause.NODE_LOST, CutCause.DRAIN_TIMEOUT


def run(
    realtime: tuple[int, float],
    *,
    lost: int = 0,
    timeout: int = 0,
    preempted: int = 0,
    cost: float = 1.0,
    tokens: int = 1_000_000,
    rtx_hours: float = 2.0,
) -> Summary:
    fields: dict[str, Any] = {
        "policy": "gpufleet",
        "description": "",
        "cost_dollars": cost,
        "tokens_served": tokens,
        "cost_per_million_tokens": cost / tokens * 1e6,
        "energy_kwh": None,
        "kwh_per_million_tokens": None,
        "carbon_grams_per_million_tokens": None,
        "classes": {
            "realtime": ClassSummary(realtime[0], 0.05, realtime[1], 0.1),
            "batch": ClassSummary(300, 1.0, 1.0, 2.0),
        },
        "replica_hours": {"h100": 1.0, "rtx4090": rtx_hours},
        "cold_starts": {"h100": 0, "rtx4090": preempted},
        "preempted": {"h100": 0, "rtx4090": preempted},
        "dropped": 0,
        "cut": lost + timeout,
        "wall_seconds": 1.0,
        "cut_by_cause": {LOST: lost, TIMEOUT: timeout},
    }
    return Summary(**fields)


HEDGED = Totals(
    "hedged",
    5.0,
    [
        run((100, 0.90), lost=5, preempted=3, cost=2.0, rtx_hours=3.0),
        run((300, 0.98), lost=7, timeout=1, preempted=4, cost=2.0, rtx_hours=3.0),
    ],
)
UNHEDGED = Totals(
    "unhedged",
    5.0,
    [
        run((100, 0.80), lost=4, preempted=2, cost=1.5),
        run((300, 0.96), lost=6, preempted=3, cost=1.5),
    ],
)


def test_the_two_pools_differ_only_in_hedge_preemptible() -> None:
    example = yaml.safe_load(POOL.read_text())
    hedged, unhedged = pool_body(True), pool_body(False)
    assert hedged["spec"]["scaling"]["hedgePreemptible"] is True
    assert unhedged["spec"]["scaling"]["hedgePreemptible"] is False
    for body in (hedged, unhedged):
        del body["spec"]["scaling"]["hedgePreemptible"]
        assert body == example
    assert any(t.get("preemptible") for t in example["spec"]["tiers"])


def test_attainment_is_over_every_request_of_every_seed_and_cuts_are_summed() -> None:
    assert HEDGED.attainment("realtime") == pytest.approx((90 + 294) / 400)
    assert HEDGED.cut(LOST) == 12
    assert HEDGED.cut(TIMEOUT) == 1
    assert HEDGED.cut_per_seed(LOST) == [5, 7]
    assert HEDGED.preempted == 7
    assert HEDGED.dollars == pytest.approx(4.0)
    assert HEDGED.per_million_tokens == pytest.approx(2.0)
    assert HEDGED.replica_hours("rtx4090") == pytest.approx(6.0)


def test_the_table_puts_both_variants_side_by_side_with_cuts_by_cause() -> None:
    header, rows = table_rows([HEDGED, UNHEDGED])
    assert header[1:] == ["hedged, up 5 min", "unhedged, up 5 min"]
    by_label = {row[0]: row[1:] for row in rows}
    assert by_label["realtime SLO attainment % (obj 100 ms)"] == ["96.00", "92.00"]
    assert by_label["requests cut: node lost"] == ["12", "10"]
    assert by_label["requests cut: drain timeout"] == ["1", "0"]
    assert by_label["  per seed (node lost)"] == ["5 7", "4 6"]
    assert by_label["replicas preempted"] == ["7", "5"]
    assert by_label["requests cut by lost nodes per replica preempted"] == ["1.7", "2.0"]
    assert by_label["$ total"] == ["4.00", "3.00"]
    assert by_label["$/Mtok"] == ["2.0000", "1.5000"]
    assert by_label["rtx4090 replica-hours"] == ["6.00", "4.00"]
    (said,) = findings([HEDGED, UNHEDGED])
    assert said.startswith("Nodes up 5 min, hedged against unhedged: attainment realtime +4.00")
    assert "12 vs 10 requests cut by lost nodes" in said
    assert "rtx4090 +2.00 replica-hours" in said


def test_the_section_names_the_command_and_the_heading() -> None:
    setting = Setting(seeds=(0, 1), outage_minutes=5.0)
    argv = command("pool.yaml", 3, 15.0, setting)
    assert argv[argv.index("--seed") + 1] == "3"
    assert argv[argv.index("--preemption-mean-hours") + 1] == "0.25"
    assert argv[argv.index("--preemption-outage-minutes") + 1] == "5"
    assert argv[argv.index("--policy") + 1] == "gpufleet"
    assert "--duration" not in argv
    sliced = command("pool.yaml", 3, 15.0, Setting(duration=1800.0))
    assert sliced[sliced.index("--duration") + 1] == "1800"
    assert Setting(duration=1800.0).part == "the first 1800 s of the trace (a slice)"
    meta = {"requests": 19366, "durationSeconds": 3502.0, "drainSeconds": 32}
    text = section([HEDGED, UNHEDGED], setting, meta, 12.0)
    assert text.startswith("## Hedging preemptible tiers")
    assert "--seed SEED" in text and "-f POOL" in text and "--preemption-mean-hours HOURS" in text
    assert "| requests cut: node lost | 12 | 10 |" in text
    assert "It does nothing at the moment of a loss" in text
    words = " ".join(text.split())
    assert "SEED in 0, 1 and HOURS in 0.0833333," in words
    assert "stay up 5 minutes on average (HOURS) and away 5 minutes" in words
    assert "the whole trace (19366 requests" in text


def test_a_hedged_column_is_compared_with_the_unhedged_one_at_its_own_rate() -> None:
    mild = Totals("hedged", 30.0, HEDGED.runs)
    mild_unhedged = Totals("unhedged", 30.0, HEDGED.runs)
    said = findings([mild, mild_unhedged, HEDGED, UNHEDGED])
    assert [line.split(",")[0] for line in said] == ["Nodes up 30 min", "Nodes up 5 min"]
    assert "realtime +0.00 points" in said[0]
    assert "realtime +4.00 points" in said[1]
