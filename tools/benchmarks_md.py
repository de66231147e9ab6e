"""Write one tool's section of BENCHMARKS.md, between its markers, leaving the others."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent / "BENCHMARKS.md"


def markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}:begin -->", f"<!-- {name}:end -->"


def write_section(name: str, body: str, path: Path = BENCHMARKS) -> None:
    """Replace the section `name` (markers included in `body` or added here)."""
    begin, end = markers(name)
    text = body if body.startswith(begin) else f"{begin}\n{body.strip()}\n{end}"
    current = path.read_text() if path.exists() else "# Benchmarks\n"
    if begin in current and end in current:
        head, rest = current.split(begin, 1)
        _, tail = rest.split(end, 1)
        path.write_text(head + text + tail)
    else:
        path.write_text(current.rstrip("\n") + "\n\n" + text + "\n")


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub Markdown table: the header, its rule, one line per row."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)
