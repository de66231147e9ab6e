"""Run a Python snippet in a fresh interpreter with the project importable (its own fds)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_snippet(code: str, timeout_seconds: float = 25.0) -> subprocess.CompletedProcess[str]:
    """`python -c code` from the repository root: stdout and stderr captured as text."""
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        env={"PYTHONPATH": f"{ROOT / 'operator'}:{ROOT}", "PATH": "/usr/bin:/bin"},
        timeout=timeout_seconds,
    )
