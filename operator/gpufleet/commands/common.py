"""What the commands share: the usage error and reading an InferencePool file."""

from __future__ import annotations

from pathlib import Path

import yaml

from gpufleet.api.parse import parse_pool
from gpufleet.api.types import InferencePool


class UsageError(ValueError):
    """A bad file or option: the message says which."""


def load_pool(path: Path) -> InferencePool:
    """The pool in a YAML file; UsageError when it is not one, InvalidPool when invalid."""
    try:
        body = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise UsageError(f"{path}: not YAML: {error}") from None
    if not isinstance(body, dict):
        raise UsageError(f"{path}: not an InferencePool object")
    return parse_pool(body)
