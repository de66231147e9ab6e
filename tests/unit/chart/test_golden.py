"""`helm template` golden files: the default values and every documented option.

A golden diff shows a reviewer exactly what a values change does to the cluster. The CRD's
generated schema is cut out of them (test_chart compares it with the models instead).
Regenerate after an intended change: UPDATE_GOLDEN=1 pytest tests/unit/chart
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.chart.cases import CASES, leaves
from tests.unit.chart.helm import (
    CHART,
    Helm,
    documents,
    without_crd_spec,
    write_or_compare,
    write_values,
)
from tests.unit.chart.values_doc import read_values

pytestmark = pytest.mark.timeout(30)

GOLDEN = Path(__file__).resolve().parent / "golden"


@pytest.mark.parametrize("case", CASES, ids=str)
def test_rendered_manifests_match_golden(
    case: str, helm: Helm, tmp_path: Path, update_golden: bool
) -> None:
    values = write_values(tmp_path / "values.yaml", CASES[case])
    manifest = without_crd_spec(helm.template(values))
    assert documents(manifest), "the chart rendered nothing"
    write_or_compare(GOLDEN / f"{case}.yaml", manifest, update_golden)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_notes_match_golden(case: str, helm: Helm, tmp_path: Path, update_golden: bool) -> None:
    values = write_values(tmp_path / "values.yaml", CASES[case])
    notes = helm.notes(values)
    assert "kubectl get gpool -A" in notes
    write_or_compare(GOLDEN / f"{case}.notes.txt", notes, update_golden)


def test_every_documented_value_has_a_case_that_changes_it() -> None:
    documented = [v for v in read_values(CHART / "values.yaml") if v.comment]
    changed = [item for values in CASES.values() for item in leaves(values).items()]
    defaults = {v.key: v.default for v in read_values(CHART / "values.yaml")}
    uncovered = [
        v.key
        for v in documented
        if not any(
            (key == v.key or key.startswith(f"{v.key}.")) and value != defaults.get(key)
            for key, value in changed
        )
    ]
    assert uncovered == [], "documented values no golden case sets: add a case to cases.py"


def test_golden_directory_holds_only_current_cases() -> None:
    expected = {f"{c}.yaml" for c in CASES} | {f"{c}.notes.txt" for c in CASES}
    assert {p.name for p in GOLDEN.iterdir()} == expected
