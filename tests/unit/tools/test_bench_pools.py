"""tools/bench_pools.py: the pools it writes, the table and what it says, on made-up runs."""

from __future__ import annotations

import pytest
from tools.bench_pools import POLICIES, SHAPES, Case, command, findings, pool_body, table_rows

from gpufleet.api.parse import parse_pool
from gpufleet.sim.report import ClassSummary, Summary

pytestmark = pytest.mark.timeout(5)


def summary(policy: str, cost: float, realtime: float, batch: float) -> Summary:
    return Summary(
        policy=policy,
        description="",
        cost_dollars=cost,
        tokens_served=1_000_000,
        cost_per_million_tokens=cost,
        energy_kwh=None,
        kwh_per_million_tokens=None,
        carbon_grams_per_million_tokens=None,
        classes={
            "realtime": ClassSummary(100, 0.05, realtime, 0.1),
            "batch": ClassSummary(300, 1.0, batch, 2.0),
        },
        replica_hours={"h100": 1.0, "rtx4090": 2.5},
        cold_starts={"h100": 1, "rtx4090": 3},
        preempted={"h100": 0, "rtx4090": 0},
        dropped=0,
        cut=0,
        wall_seconds=1.0,
    )


def test_every_pool_is_the_example_with_its_one_change_and_valid() -> None:
    bodies = {name: pool_body(change) for name, change in SHAPES}
    for body in bodies.values():
        parse_pool(body)  # the apiserver's rules, as `gpufleet simulate` reads the file
    assert [t["name"] for t in bodies["rtx4090 only"]["spec"]["tiers"]] == ["rtx4090"]
    assert [t["name"] for t in bodies["h100 only"]["spec"]["tiers"]] == ["h100"]
    assert [t["name"] for t in bodies["three tiers"]["spec"]["tiers"]] == [
        "h100",
        "rtx4090",
        "l40s",
    ]
    loose = {
        c["name"]: c["ttftP99Milliseconds"]
        for c in bodies["loose objectives"]["spec"]["trafficClasses"]
    }
    assert loose == {"realtime": 300, "batch": 30000}


def test_each_run_asks_for_every_policy_on_the_bursts_trace() -> None:
    argv = command("pool.yaml", "size")
    assert argv[argv.index("--policy") + 1] == ",".join(POLICIES)
    assert argv[argv.index("--trace") + 1] == "synthetic:bursts"
    assert argv[argv.index("--assign") + 1] == "size"


def test_the_table_and_the_findings_put_gpufleet_against_the_oracle() -> None:
    case = Case(
        "h100 only",
        "size",
        {
            "gpufleet": summary("gpufleet", 0.30, 0.97, 1.0),
            "static-split": summary("static-split", 0.18, 0.93, 1.0),
            "oracle": summary("oracle", 0.25, 0.99, 1.0),
        },
        {"realtime": 1.0, "batch": 1.0},
    )
    header, rows = table_rows([case])
    assert header[:5] == ["pool / assign", "policy", "$/Mtok", "realtime %", "batch %"]
    assert rows[0][:5] == ["h100 only / size", "ceiling", "", "100.00", "100.00"]
    assert rows[1][1:5] == ["gpufleet", "0.3000", "97.00", "100.00"]
    assert rows[1][5:] == ["4", "h100 1.00 / rtx4090 2.50"]
    assert [r[1] for r in rows] == ["ceiling", *POLICIES]
    (said,) = findings([case])
    assert "gpufleet 1.20x the oracle's $/Mtok" in said
    assert "realtime -2.00 points, batch +0.00 points" in said
