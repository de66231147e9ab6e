"""`gpufleet plan`: the what-if command, end to end through the CLI entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from gpufleet.cli import main
from tests.pools import BASE_EXAMPLE, load_example

pytestmark = pytest.mark.timeout(5)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["plan", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_plan_for_the_mixed_example(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "-f", str(BASE_EXAMPLE), "--demand", "realtime=2000,batch=30000", "--output", "json"
    )
    assert code == 0
    plan = json.loads(out)
    replicas = {t["name"]: t["replicas"] for t in plan["tiers"]}
    assert replicas["h100"] == 1 and replicas["rtx4090"] > 5
    classes = {c["name"]: c for c in plan["classes"]}
    assert classes["realtime"]["weights"] == {"h100": 100}
    assert classes["realtime"]["predictedTtftP99Milliseconds"] < 100
    assert classes["batch"]["weights"] == {"rtx4090": 100}
    assert plan["costPerHour"] == pytest.approx(2.0 + 0.25 * replicas["rtx4090"])
    assert plan["costPerMillionTokens"] == pytest.approx(plan["costPerHour"] / (32000 * 3600 / 1e6))
    assert plan["energyKwhPerMillionTokens"] > 0 and plan["carbonGramsPerMillionTokens"] > 0
    assert plan["objectivesMet"] == {
        "status": True,
        "reason": "ObjectivesMet",
        "message": plan["objectivesMet"]["message"],
    }
    assert "realtime stays on h100" in plan["message"]


def test_table_shows_replicas_weights_p99_cost_and_reason(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys, "-f", str(BASE_EXAMPLE), "--demand", "realtime=2000,batch=30000")
    assert code == 0
    for text in ("rtx4090", "h100=100", "28 ms", "100 ms", "$/hour", "$/Mtok", "kWh/Mtok"):
        assert text in out, text
    assert "ObjectivesMet True" in out
    # Captured, as in a pipe or a file: nothing cut to the 80 columns of no terminal.
    for text in ("accelerator", "H100-PCIe-80GB", "RTX4090", "profile", "lead time"):
        assert text in out, text
    assert "…" not in out


@pytest.mark.parametrize(
    ("demand", "error"),
    [
        pytest.param("nobody=10", "no traffic class 'nobody'", id="unknown-class"),
        pytest.param("realtime=fast", "'fast' is not a number", id="not-a-number"),
        pytest.param("realtime", "expected CLASS=TOKENS_PER_SECOND", id="no-value"),
        pytest.param("realtime=-5", "finite number >= 0", id="negative"),
        pytest.param("batch=1,batch=2", "class 'batch' is given twice", id="twice"),
    ],
)
def test_bad_demand_is_refused(capsys: pytest.CaptureFixture[str], demand: str, error: str) -> None:
    code, _, err = run(capsys, "-f", str(BASE_EXAMPLE), "--demand", demand)
    assert code == 2
    assert error in err


def test_demand_given_once_per_class_adds_up(capsys: pytest.CaptureFixture[str]) -> None:
    """--demand repeated, one class each, is the same as one comma-separated list."""
    once = run(
        capsys, "-f", str(BASE_EXAMPLE), "--demand", "realtime=2000,batch=30000", "--output", "json"
    )
    apart = run(
        capsys,
        "-f",
        str(BASE_EXAMPLE),
        "--demand",
        "realtime=2000",
        "--demand",
        "batch=30000",
        "--output",
        "json",
    )
    assert once[0] == apart[0] == 0
    demand = {c["name"]: c["demandTokensPerSecond"] for c in json.loads(apart[1])["classes"]}
    assert demand == {"realtime": 2000, "batch": 30000}
    assert json.loads(once[1])["tiers"] == json.loads(apart[1])["tiers"]
    code, _, err = run(
        capsys, "-f", str(BASE_EXAMPLE), "--demand", "batch=1", "--demand", "batch=2"
    )
    assert code == 2 and "given twice" in err


def test_invalid_pool_names_the_field(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    body = load_example()
    body["spec"]["tiers"][0]["minReplicas"] = 9
    path = tmp_path / "pool.yaml"
    path.write_text(yaml.safe_dump(body))
    code, _, err = run(capsys, "-f", str(path), "--demand", "batch=1")
    assert code == 2
    assert "spec.tiers[0]" in err and "minReplicas" in err


def test_missing_file_is_an_error_not_a_traceback(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run(capsys, "-f", str(tmp_path / "absent.yaml"))
    assert code == 2 and "absent.yaml" in err


def test_json_plan_says_which_profiles_are_derived(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    body = load_example()
    body["spec"]["tiers"][0]["accelerator"] = "H200-SXM-141GB"
    path = tmp_path / "h200.yaml"
    path.write_text(yaml.safe_dump(body))
    code, out, _ = run(capsys, "-f", str(path), "--demand", "realtime=2000", "--output", "json")
    assert code == 0
    tiers = {t["name"]: t for t in json.loads(out)["tiers"]}
    assert tiers["h100"]["profile"].endswith("(derived)")
    assert tiers["h100"]["profileMeasured"] is False
    assert tiers["h100"]["profileSource"].startswith("derived by gpufleet.perf from")
    assert tiers["rtx4090"]["profileMeasured"] is True
    assert "io.net" in tiers["rtx4090"]["profileSource"]
