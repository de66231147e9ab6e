"""Read charts/gpufleet/values.yaml as documentation: each key, its default, its comment.

A key's comment is the block of `#` lines right above it (a blank line ends a block). The
chart's rule: every leaf value is documented by its own comment or an ancestor's, and a
comment starts with the key's dotted path (`image.tag ...`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

_KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z][A-Za-z0-9_]*):")

TABLE_START = "<!-- values-table:start (generated from charts/gpufleet/values.yaml) -->"
TABLE_END = "<!-- values-table:end -->"


@dataclass(frozen=True)
class Value:
    key: str  # dotted path
    default: Any
    comment: str  # the comment block joined into one line; "" when there is none

    @property
    def is_leaf(self) -> bool:
        return not (isinstance(self.default, dict) and self.default)


def read_values(path: Path) -> list[Value]:
    text = path.read_text()
    data = yaml.safe_load(text)
    stack: list[tuple[int, str]] = []
    comment: list[str] = []
    values: list[Value] = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            comment = []
            continue
        if stripped.startswith("#"):
            comment.append(stripped.lstrip("#").strip())
            continue
        match = _KEY.match(line)
        if match is None:  # a list item or a continuation inside a default
            comment = []
            continue
        indent = len(match["indent"])
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, match["key"]))
        keys = [key for _, key in stack]
        values.append(Value(".".join(keys), _lookup(data, keys), " ".join(comment)))
        comment = []
    return values


def _lookup(data: Any, keys: list[str]) -> Any:
    for key in keys:
        data = data[key]
    return data


def undocumented(values: list[Value]) -> list[str]:
    """Leaf keys with no comment on themselves or on any ancestor."""
    by_key = {v.key: v for v in values}
    missing = []
    for value in values:
        if not value.is_leaf:
            continue
        parts = value.key.split(".")
        prefixes = [".".join(parts[:n]) for n in range(len(parts), 0, -1)]
        if not any(by_key[p].comment for p in prefixes if p in by_key):
            missing.append(value.key)
    return missing


def misnamed(values: list[Value]) -> list[str]:
    """Keys whose comment does not start with the key's dotted path."""
    return [v.key for v in values if v.comment and not v.comment.startswith(f"{v.key} ")]


def table(values: list[Value]) -> str:
    """The Markdown values table for docs/install.md."""
    rows = ["| Key | Default | Description |", "| --- | --- | --- |"]
    for value in values:
        if value.comment:
            default = json.dumps(value.default, separators=(", ", ": "))
            rows.append(f"| `{value.key}` | `{default}` | {value.comment} |")
    return "\n".join([TABLE_START, *rows, TABLE_END])
