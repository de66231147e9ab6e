"""`gpufleet simulate` end to end: a short synthetic trace through the CLI, JSON parsed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.pools import BASE_EXAMPLE, ROOT, pool

pytestmark = pytest.mark.timeout(120)

POLICIES = ["gpufleet", "h100-only", "rtx4090-only", "static-split", "utilization", "oracle"]


def _simulate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpufleet.cli", "simulate", *args],
        capture_output=True,
        text=True,
        check=False,
    )


def test_a_short_synthetic_trace_compares_every_policy(tmp_path: Path) -> None:
    plot = tmp_path / "sim.png"
    done = _simulate(
        "-f", str(BASE_EXAMPLE),
        "--trace", "synthetic:flash-crowd",
        "--duration", "900",
        "--rate", "3",
        "--seed", "7",
        "--plot", str(plot),
        "--output", "json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert list(report["policies"]) == POLICIES
    assert report["requests"] > 1000
    assert report["classShares"]["realtime"] == pytest.approx(0.3, abs=0.05)
    # The operator's default scrape (15 s) and its window over a 30 s interval: 60 s.
    assert (report["scrapeIntervalSeconds"], report["metricsWindowSeconds"]) == (15.0, 60)
    for name, policy in report["policies"].items():
        assert policy["costDollars"] > 0, name
        assert policy["tokensServed"] > 0, name
        assert 0.0 <= policy["classes"]["batch"]["sloAttainment"] <= 1.0, name
        assert policy["kwhPerMillionTokens"] > 0, name
        # The ceiling is one: no policy serves a prompt faster than an idle replica does.
        for c, ceiling in report["attainmentCeiling"].items():
            assert policy["classes"][c]["sloAttainment"] <= ceiling + 1e-9, (name, c)
    ours = report["policies"]["gpufleet"]
    assert ours["costRatioToGpufleet"] == pytest.approx(1.0)
    # The oracle meets each class's objective or, where the prompts forbid it, comes
    # close to the ceiling they allow; no policy serving as well costs less.
    oracle = report["policies"]["oracle"]
    for name, c in oracle["classes"].items():
        assert c["sloAttainment"] >= 0.97 * report["attainmentCeiling"][name], name
    for name, policy in report["policies"].items():
        as_good = all(
            policy["classes"][c]["sloAttainment"] >= oracle["classes"][c]["sloAttainment"]
            for c in oracle["classes"]
        )
        if as_good:
            assert oracle["costPerMillionTokens"] <= policy["costPerMillionTokens"] * 1.0001, name
    # A 4090 cannot hold 100 ms for these prompts: its realtime attainment collapses.
    assert report["policies"]["rtx4090-only"]["classes"]["realtime"]["sloAttainment"] < 0.5
    assert [line["verdict"] in ("PASS", "MISS") for line in report["bar"]] == [True] * 3
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_queue_watch_wakes_early_passes_as_the_operators_and_can_be_turned_off() -> None:
    """A flash crowd at a 5 s scrape: the watch (every scrape by default, as the operator's
    --queue-check-seconds) wakes the gpufleet policy early; `--queue-check 0` turns it
    off; the baselines keep their own cadence either way."""
    common = (
        "-f", str(BASE_EXAMPLE), "--trace", "synthetic:flash-crowd", "--duration", "900",
        "--policy", "gpufleet,static-split", "--scrape-interval", "5", "--output", "json",
    )  # fmt: skip
    runs = {}
    for extra in ((), ("--queue-check", "0")):
        done = _simulate(*common, *extra)
        assert done.returncode == 0, done.stderr
        runs[extra] = json.loads(done.stdout)
    watched, unwatched = runs[()], runs[("--queue-check", "0")]
    assert (watched["queueCheckSeconds"], unwatched["queueCheckSeconds"]) == (5.0, 0.0)
    assert watched["policies"]["gpufleet"]["earlyPasses"] >= 1
    assert unwatched["policies"]["gpufleet"]["earlyPasses"] == 0
    assert watched["policies"]["static-split"]["earlyPasses"] == 0
    same = ("costDollars", "tokensServed", "classes", "coldStarts", "replicaHours")
    for key in same:  # the baseline's own run, whatever the watch does (its ratio aside)
        assert (
            watched["policies"]["static-split"][key] == unwatched["policies"]["static-split"][key]
        )
    table = _simulate(*common[:-2], "--policy", "gpufleet")
    assert "The queue watch checks every 5 s" in table.stdout
    assert "early passes (queue watch)" in table.stdout


def test_the_same_seed_prints_the_same_numbers() -> None:
    args = ("-f", str(BASE_EXAMPLE), "--trace", "synthetic:bursts", "--duration", "300")
    runs = [_simulate(*args, "--policy", "utilization,oracle", "--output", "json") for _ in (1, 2)]
    numbers = [json.loads(r.stdout)["policies"] for r in runs]
    for policy in numbers:
        for entry in policy.values():
            entry.pop("wallSeconds")
    assert numbers[0] == numbers[1]


def test_the_table_names_each_criterion_pass_or_miss() -> None:
    done = _simulate(
        "-f", str(BASE_EXAMPLE), "--trace", "synthetic:constant", "--duration", "300",
        "--policy", "gpufleet,oracle", "--no-progress",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "$/Mtok" in done.stdout
    assert done.stdout.count("PASS") + done.stdout.count("MISS") == 3


def test_a_pool_without_a_realtime_class_gets_traffic_in_every_class() -> None:
    """By default the classes that match requests share 30% of the trace evenly (a class
    named realtime takes it where there is one): every objective of the pool is tested,
    none reads as missed by a class the trace sent nothing."""
    done = _simulate(
        "-f", str(ROOT / "examples" / "qwen14b-4x4090.yaml"),
        "--trace", "synthetic:constant", "--duration", "300", "--rate", "2",
        "--policy", "gpufleet,static-split", "--output", "json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["classShares"]["interactive"] == pytest.approx(0.3, abs=0.05)
    assert report["classShares"]["standard"] == pytest.approx(0.7, abs=0.05)
    names = [line["criterion"] for line in report["bar"]]
    assert names == [
        "gpufleet SLO attainment of interactive >= 99%",
        "gpufleet SLO attainment of standard >= 99%",
    ]
    # Shares given by hand still rule: standard alone leaves interactive without requests,
    # and the bar says nothing of it.
    alone = _simulate(
        "-f", str(ROOT / "examples" / "qwen14b-4x4090.yaml"),
        "--trace", "synthetic:constant", "--duration", "300", "--rate", "2",
        "--class-fraction", "interactive=0", "--policy", "gpufleet", "--output", "json",
    )  # fmt: skip
    assert alone.returncode == 0, alone.stderr
    solo = json.loads(alone.stdout)
    assert solo["classShares"]["interactive"] == 0.0
    assert [line["criterion"] for line in solo["bar"]] == [
        "gpufleet SLO attainment of standard >= 99%"
    ]


def test_prompts_over_the_pools_context_are_refused_as_vllm_refuses_them(tmp_path: Path) -> None:
    """A lognormal prompt length has no upper bound; vLLM refuses a prompt of its
    --max-model-len or more. Those requests reach no replica, are named in the notes and
    count as missed in the class's attainment and its ceiling, for every policy."""
    body = pool()
    body["spec"]["model"]["extraArgs"] = ["--max-model-len=2048"]
    path = tmp_path / "short-context.yaml"
    path.write_text(yaml.safe_dump(body))
    common = ("--trace", "synthetic:constant", "--duration", "300", "--rate", "3", "--seed", "7")
    args = (*common, "--prompt-tokens", "1000", "--policy", "gpufleet,oracle", "--output", "json")
    done = _simulate("-f", str(path), *args)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["maxModelLen"] == 2048
    refused = report["refused"]
    # Lognormal prompts of mean 1,000 (sigma 1): about 10% are 2,048 tokens or more.
    offered = report["requests"] + sum(refused.values())
    assert 0.05 < sum(refused.values()) / offered < 0.15
    assert any("--max-model-len (2048 tokens)" in note for note in report["notes"])
    for name, ceiling in report["attainmentCeiling"].items():
        requests = report["policies"]["oracle"]["classes"][name]["requests"]
        assert report["policies"]["oracle"]["classes"][name]["refused"] == refused[name]
        reached = requests / (requests + refused[name])
        assert ceiling <= reached + 1e-9
        for policy in report["policies"].values():
            assert policy["classes"][name]["sloAttainment"] <= reached + 1e-9
    # The example's own context (8,192 tokens) refuses under a tenth as many of them.
    wide = json.loads(_simulate("-f", str(BASE_EXAMPLE), *args).stdout)
    assert sum(wide["refused"].values()) < sum(refused.values()) / 10


def test_an_invalid_pool_names_the_field_and_exits_2(tmp_path: Path) -> None:
    body = pool()
    body["spec"]["tiers"][0]["minReplicas"] = 9
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(body))
    done = _simulate("-f", str(path), "--trace", "synthetic:constant", "--duration", "60")
    assert done.returncode == 2
    assert "spec.tiers[0]" in done.stderr
    assert "minReplicas" in done.stderr


def test_an_unknown_policy_exits_2() -> None:
    done = _simulate(
        "-f", str(BASE_EXAMPLE), "--trace", "synthetic:constant", "--policy", "gpufleet,magic"
    )
    assert done.returncode == 2
    assert "magic" in done.stderr


def test_policy_given_once_per_flag_runs_each_once() -> None:
    """--policy repeated adds up, like a comma-separated list; a policy named twice runs once."""
    done = _simulate(
        "-f", str(BASE_EXAMPLE), "--trace", "synthetic:constant", "--duration", "120",
        "--policy", "static-split", "--policy", "utilization,static-split",
        "--output", "json", "--no-progress",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert list(json.loads(done.stdout)["policies"]) == ["static-split", "utilization"]
    empty = _simulate("-f", str(BASE_EXAMPLE), "--trace", "synthetic:constant", "--policy", " ,")
    assert empty.returncode == 2
    assert "--policy: name one or more of all, gpufleet" in empty.stderr


@pytest.mark.parametrize(
    ("flag", "value", "error"),
    [
        ("--rate", "0", "--rate: must be more than 0 req/s"),
        ("--rate", "nan", "--rate: must be more than 0 req/s"),
        ("--prompt-tokens", "0", "--prompt-tokens: must be at least 1 token"),
        ("--output-tokens", "0.5", "--output-tokens: must be at least 1 token"),
        ("--speedup", "0", "--speedup: must be more than 0"),
        ("--duration", "-5", "--duration: must be more than 0 seconds"),
        ("--scrape-interval", "0", "--scrape-interval: must be more than 0 seconds"),
        ("--queue-check", "-1", "--queue-check: must be at least 0 seconds"),
        ("--preemption-mean-hours", "-1", "--preemption-mean-hours: must be at least 0 hours"),
        ("--preemption-outage-minutes", "0", "--preemption-outage-minutes: must be more than 0"),
        ("--preemption-notice-seconds", "-1", "--preemption-notice-seconds: must be at least 0"),
    ],
)
def test_a_number_out_of_range_names_its_flag_and_exits_2(
    flag: str, value: str, error: str
) -> None:
    done = _simulate("-f", str(BASE_EXAMPLE), "--trace", "synthetic:constant", flag, value)
    assert done.returncode == 2
    assert error in done.stderr
    assert "Traceback" not in done.stderr
