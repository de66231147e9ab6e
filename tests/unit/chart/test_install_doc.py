"""docs/install.md lists every value of the chart with its default and its comment."""

from __future__ import annotations

import re

import pytest

from tests.pools import ROOT
from tests.unit.chart.helm import CHART
from tests.unit.chart.values_doc import TABLE_END, TABLE_START, read_values, table

pytestmark = pytest.mark.timeout(2)

DOC = ROOT / "docs" / "install.md"


def test_values_table_is_current(update_golden: bool) -> None:
    text = DOC.read_text()
    expected = table(read_values(CHART / "values.yaml"))
    if update_golden:
        if TABLE_START in text:
            head, _, rest = text.partition(TABLE_START)
            _, _, tail = rest.partition(TABLE_END)
            text = head + expected + tail
        else:
            text = text.rstrip("\n") + "\n\n" + expected + "\n"
        DOC.write_text(text)
    assert expected in text, (
        "docs/install.md's values table differs from values.yaml: run "
        "UPDATE_GOLDEN=1 pytest tests/unit/chart/test_install_doc.py"
    )


def test_every_value_the_doc_sets_exists() -> None:
    """A renamed value must not leave the install guide telling users to set the old one."""
    text = DOC.read_text()
    keys = set(re.findall(r"--set '?([A-Za-z][\w.]*)=", text))
    keys |= set(re.findall(r"`([a-z][A-Za-z]*\.[A-Za-z.]+)=[^`]*`", text))
    assert {"image.repository", "prometheus.url", "watchNamespaces", "crds.enabled"} <= keys
    documented = {v.key for v in read_values(CHART / "values.yaml")}
    assert keys - documented == set()
