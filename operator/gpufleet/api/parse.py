"""Parse objects at the edge, with errors that name the field the way kubectl does."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from gpufleet.api.status import InferencePoolStatus
from gpufleet.api.types import (
    DECIMAL_PATTERN,
    DNS_LABEL,
    ENV_NAME,
    HOSTNAME,
    LABEL_KEY,
    LABEL_VALUE,
    InferencePool,
)

# What a regular expression means, for messages a person reads.
_PATTERNS = {
    DECIMAL_PATTERN: 'must be a non-negative decimal string such as "2.00"',
    DNS_LABEL: "must be lower case letters, digits and '-', starting with a letter",
    LABEL_KEY: "must be a label key: an optional DNS prefix and '/', then a name",
    LABEL_VALUE: "must be a label value: letters, digits, '-', '_' and '.'",
    ENV_NAME: "must be an environment variable name: letters, digits, '_', '-' and '.', "
    "not starting with a digit",
    HOSTNAME: "must be a lower-case DNS name, optionally starting with '*.'",
}


class InvalidPool(ValueError):
    """An InferencePool that does not satisfy the API; the message names every bad field."""

    def __init__(self, name: str, problems: list[str]) -> None:
        self.name = name
        self.problems = problems
        super().__init__(f"InferencePool {name} is invalid: " + "; ".join(problems))


def field_path(loc: tuple[int | str, ...]) -> str:
    """('spec', 'tiers', 0, 'minReplicas') -> 'spec.tiers[0].minReplicas'."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part.startswith(("function-", "tagged-union")):
            continue
        else:
            path += f".{part}" if path else part
    return path


def describe(error: ValidationError) -> list[str]:
    """One line per problem: `<field>: <what is wrong>`."""
    lines = []
    for item in error.errors(include_url=False):
        message = item["msg"].removeprefix("Value error, ")
        if item["type"] == "string_pattern_mismatch":
            pattern = (item.get("ctx") or {}).get("pattern", "")
            message = _PATTERNS.get(pattern, message)
        path = field_path(tuple(item["loc"]))
        lines.append(f"{path}: {message}" if path else message)
    return lines


def parse_pool(body: Mapping[str, Any]) -> InferencePool:
    """An InferencePool from an API object; InvalidPool if the spec is not valid.

    A status the operator cannot read (written by someone else, or by a future version) is
    dropped rather than failing the parse: status is re-derived from the world each pass.
    """
    name = str(body.get("metadata", {}).get("name", "<unnamed>"))
    try:
        return InferencePool.model_validate(body)
    except ValidationError as error:
        problems = describe(error)
        if all(p.startswith("status") for p in problems):
            return InferencePool.model_validate({**body, "status": {}})
        raise InvalidPool(name, problems) from error


def parse_status(raw: Mapping[str, Any] | None) -> InferencePoolStatus:
    """The status of an object, or an empty status if it cannot be read."""
    try:
        return InferencePoolStatus.model_validate(raw or {})
    except ValidationError:
        return InferencePoolStatus()
