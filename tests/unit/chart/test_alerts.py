"""The chart's PrometheusRule under `promtool test rules`: each alert fires when it must and
stays silent when it must (tests/unit/chart/alerts/*.yaml), on the rules as the chart
renders them. Mutated rules must fail those tests, so the tests can tell."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.chart.helm import Helm, documents, find, write_values

pytestmark = [pytest.mark.timeout(60), pytest.mark.prometheus]

CASES = Path(__file__).resolve().parent / "alerts"
ALERTS = [
    "GpufleetErrorBudgetBurnFast",
    "GpufleetErrorBudgetBurnSlow",
    "GpufleetErrorBudgetExhausted",
    "GpufleetMetricsMissing",
    "GpufleetCapacityLost",
    "GpufleetOperatorDown",
]


@pytest.fixture(scope="module")
def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.skip("promtool not installed (Debian package prometheus)")
    return found


def _rule(helm: Helm, tmp_path: Path, **alerts: Any) -> dict[str, Any]:
    values = write_values(tmp_path / "values.yaml", {"alerts": {"enabled": True, **alerts}})
    return find(documents(helm.template(values)), "PrometheusRule")


def _promtool_test(
    promtool: str, spec: dict[str, Any], where: Path, case: str
) -> subprocess.CompletedProcess[str]:
    (where / "rules.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    shutil.copy(CASES / case, where / case)
    return subprocess.run(
        [promtool, "test", "rules", case],
        cwd=where,
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )


def test_no_rule_without_alerts_enabled(helm: Helm) -> None:
    assert not [d for d in documents(helm.template()) if d["kind"] == "PrometheusRule"]


def test_rules_pass_promtool_check(helm: Helm, tmp_path: Path, promtool: str) -> None:
    rule = _rule(helm, tmp_path)
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rule["spec"]))
    checked = subprocess.run(
        [promtool, "check", "rules", "rules.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    names = [r["alert"] for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r]
    assert sorted(names) == sorted(ALERTS)


@pytest.mark.parametrize("case", ["fast.yaml", "slow.yaml"])
def test_alerts_fire_when_they_must_and_only_then(
    helm: Helm, tmp_path: Path, promtool: str, case: str
) -> None:
    result = _promtool_test(promtool, _rule(helm, tmp_path)["spec"], tmp_path, case)
    assert result.returncode == 0, result.stdout + result.stderr


def _drop(text: str) -> Callable[[str], str]:
    return lambda expr: expr.replace(text, "")


MUTANTS = {
    "standby-counts": ("fast.yaml", _drop(" and on (instance) (gpufleet_leader == 1)")),
    "no-5m-window": (
        "fast.yaml",
        _drop("and gpufleet:pool_class_slow_ratio:avg5m > (14.4 * 0.01)"),
    ),
    "no-1h-clause": ("fast.yaml", lambda e: e.replace("(14.4 * 0.01)", "(100 * 0.01)")),
    "no-2h-window": ("slow.yaml", _drop("and gpufleet:pool_class_slow_ratio:avg2h > (3 * 0.01)")),
    "budget-at-5-percent": ("slow.yaml", lambda e: e.replace(">= 0.01", ">= 0.05")),
    "any-namespace-leads": ("slow.yaml", _drop('{namespace="gpufleet-system"}')),
}


@pytest.mark.parametrize("mutant", MUTANTS)
def test_a_wrong_rule_fails_the_promtool_cases(
    helm: Helm, tmp_path: Path, promtool: str, mutant: str
) -> None:
    case, mutate = MUTANTS[mutant]
    spec = _rule(helm, tmp_path)["spec"]
    changed = 0
    for group in spec["groups"]:
        for rule in group["rules"]:
            mutated = mutate(rule["expr"])
            changed += mutated != rule["expr"]
            rule["expr"] = mutated
    assert changed, f"mutant {mutant} changed no rule: the rules changed, update it"
    result = _promtool_test(promtool, spec, tmp_path, case)
    assert result.returncode != 0, f"{case} passed against mutant {mutant}"


def test_severities_and_labels_are_the_values(helm: Helm, tmp_path: Path) -> None:
    rule = _rule(
        helm,
        tmp_path,
        labels={"release": "kube-prometheus-stack"},
        pageSeverity="page",
        ticketSeverity="ticket",
        additionalLabels={"team": "ml-platform"},
    )
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    alerts = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r}
    assert alerts["GpufleetErrorBudgetBurnFast"]["labels"] == {
        "severity": "page",
        "team": "ml-platform",
    }
    assert alerts["GpufleetCapacityLost"]["labels"] == {"severity": "ticket", "team": "ml-platform"}
    assert all(a["labels"]["team"] == "ml-platform" for a in alerts.values())
