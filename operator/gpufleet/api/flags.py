"""vLLM command-line flags the operator reads back from a pool's extraArgs (pure)."""

from __future__ import annotations

import re
from collections.abc import Sequence


def flag_value(args: Sequence[str], flag: re.Pattern[str]) -> str | None:
    """The value a command line gives a flag (`flag` matches `--name` with an optional
    `=VALUE` group), as `--name VALUE` or `--name=VALUE`; the last one wins, as in argparse."""
    value: str | None = None
    for i, arg in enumerate(args):
        match = flag.match(arg)
        if match:
            value = (
                match[1] if match[1] is not None else (args[i + 1] if i + 1 < len(args) else None)
            )
    return value


_MAX_MODEL_LEN = re.compile(r"^--max[-_]model[-_]len(?:=(.*))?$")
_HUMAN_INT = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT]?)")


def max_model_len_in(args: Sequence[str]) -> int | None:
    """The context a vLLM command line sets with --max-model-len (None: unset, "auto" or -1,
    or a value vLLM would refuse). vLLM 0.33 reads it as a human-readable integer: 4096,
    4k (4,000) or 4K (4,096)."""
    found = flag_value(args, _MAX_MODEL_LEN)
    if found is None:
        return None
    number = _HUMAN_INT.fullmatch(found.strip())
    if number is None:
        return None
    value, suffix = number.groups()
    if not suffix:
        tokens = int(value) if value.isdigit() else 0  # a plain number is an integer
    elif suffix.islower():
        tokens = int(float(value) * 1000 ** ("kmgt".index(suffix) + 1))
    elif value.isdigit():
        tokens = int(value) * 1024 ** ("KMGT".index(suffix) + 1)
    else:
        tokens = 0  # vLLM refuses decimals with binary suffixes
    return tokens if tokens > 0 else None
