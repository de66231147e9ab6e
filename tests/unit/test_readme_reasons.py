"""The README's "Reading status" section documents exactly the reasons the operator writes.

Users look a reason up there (kubectl describe shows it); a reason the code gained and the
README did not, or one the README still lists after the code dropped it, leaves them with
nothing or with the wrong thing. The source of truth is the Reason enum (its comments group
the reasons by condition, and the decisions last) and the ConditionType enum.
"""

from __future__ import annotations

import inspect
import re
from collections import Counter
from typing import NamedTuple

import pytest

from gpufleet.api.status import ConditionStatus, ConditionType, Reason
from tests.pools import ROOT

pytestmark = pytest.mark.timeout(2)

README = ROOT / "README.md"
DECISIONS = "Decisions"  # the comment that heads the decisions in the Reason enum


class Row(NamedTuple):
    condition: str
    status: str
    reason: str


def section(title: str) -> str:
    text = README.read_text()
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## )", text, re.MULTILINE | re.DOTALL)
    assert match, f"README.md has no '## {title}' section"
    return match[1]


def _code(cell: str, what: str) -> str:
    match = re.fullmatch(r"`(\w+)`", cell)
    assert match, f"the {what} column holds one `Name` per row, not {cell!r}"
    return match[1]


def table() -> list[Row]:
    """The conditions table; a row with an empty condition continues the one above."""
    lines = [line for line in section("Reading status").splitlines() if line.startswith("|")]
    assert len(lines) > 2, "the Reading status section has a conditions table"
    rows = []
    condition = ""
    for line in lines[2:]:  # past the header and its separator
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if cells[0]:
            condition = _code(cells[0], "condition")
        assert condition, f"the first row names its condition: {line}"
        rows.append(Row(condition, cells[1], _code(cells[2], "reason")))
    return rows


def decisions() -> list[str]:
    """The reasons listed after 'Decisions (...):', up to the end of that sentence."""
    paragraph = next(
        (p for p in section("Reading status").split("\n\n") if p.startswith("Decisions (")), None
    )
    assert paragraph, "the Reading status section has a 'Decisions (...): ...' paragraph"
    listing = " ".join(paragraph.split()).split("): ", 1)[1].split(". ", 1)[0].rstrip(".")
    return [_code(item.strip(), "decisions") for item in listing.split(",")]


def enum_sections() -> dict[str, list[str]]:
    """The Reason enum's values under each of its comments (# Ready, ..., # Decisions)."""
    text = inspect.getsource(Reason)
    sections: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines()[1:]:
        comment = re.fullmatch(r"\s+# (\w+)", line)
        member = re.fullmatch(r'\s+[A-Z_]+ = "(\w+)"', line)
        if comment:
            current = sections.setdefault(comment[1], [])
        elif member:
            assert current is not None, (
                f"every Reason sits under a comment naming its group: {line}"
            )
            current.append(member[1])
    assert sorted(v for values in sections.values() for v in values) == sorted(Reason)
    return sections


def test_every_condition_type_has_its_rows_and_only_those() -> None:
    rows = table()
    conditions = [r.condition for r in rows]
    blocks = [c for i, c in enumerate(conditions) if i == 0 or conditions[i - 1] != c]
    assert sorted(blocks) == sorted(set(blocks)), "each condition is one block of rows"
    missing = sorted(str(c) for c in set(ConditionType) - set(blocks))
    unknown = sorted(set(blocks) - set(ConditionType))
    assert missing == [], "condition types missing from the table"
    assert unknown == [], "the table has conditions that are not a ConditionType"
    assert {r.status for r in rows} <= set(ConditionStatus)


def test_every_reason_is_documented_and_nothing_else_is() -> None:
    documented = {r.reason for r in table()} | set(decisions())
    missing = sorted(str(r) for r in set(Reason) - documented)
    unknown = sorted(documented - set(Reason))
    assert missing == [], "reasons missing from the README"
    assert unknown == [], "the README documents reasons that do not exist"


def test_each_condition_lists_the_reasons_of_its_group_in_the_enum() -> None:
    rows = table()
    reasons = Counter(r.reason for r in rows)
    assert [r for r, n in reasons.items() if n > 1] == [], "a reason documented twice"
    sections = enum_sections()
    for condition in ConditionType:
        documented = {r.reason for r in rows if r.condition == condition}
        assert documented == set(sections.get(condition, [])), condition


def test_the_decisions_list_has_every_decision_once() -> None:
    listed = decisions()
    assert len(listed) == len(set(listed)), "a decision listed twice"
    missing = [d for d in enum_sections()[DECISIONS] if d not in listed]
    assert missing == []
