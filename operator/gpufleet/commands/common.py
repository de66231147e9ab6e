"""What the commands share: the usage error and reading an InferencePool file."""

from __future__ import annotations

import math
from pathlib import Path

import yaml

from gpufleet.api.parse import parse_pool
from gpufleet.api.types import InferencePool


class UsageError(ValueError):
    """A bad file or option: the message says which."""


def require_number(
    flag: str,
    value: float | None,
    *,
    above: float | None = None,
    at_least: float | None = None,
    means: str = "",
) -> None:
    """UsageError naming `flag` unless `value` is finite and above / at least the bound
    (None, an option not given, passes)."""
    if value is None:
        return
    if above is not None and not (math.isfinite(value) and value > above):
        raise UsageError(f"{flag}: must be more than {above:g} {means}".rstrip())
    if at_least is not None and not (math.isfinite(value) and value >= at_least):
        raise UsageError(f"{flag}: must be at least {at_least:g} {means}".rstrip())


def load_pool(path: Path) -> InferencePool:
    """The pool in a YAML file; UsageError when it is not one, InvalidPool when invalid."""
    try:
        body = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise UsageError(f"{path}: not YAML: {error}") from None
    if not isinstance(body, dict):
        raise UsageError(f"{path}: not an InferencePool object")
    return parse_pool(body)
