"""A command's JSON answer is all its stdout holds, whatever native code prints."""

from __future__ import annotations

import json

import pytest

from tests.snippets import run_snippet

pytestmark = pytest.mark.timeout(30)

# What HiGHS does on some programs: a line written straight to the C library's stdout.
NATIVE = """
import json, os
from gpufleet.cli import native_output_to_stderr
with native_output_to_stderr():
    os.write(1, b"HighsMipSolverData::transformNewIntegerFeasibleSolution tmpSolver.run();\\n")
    print(json.dumps({"answer": 42}))
print("after")
"""


def test_what_native_code_writes_to_stdout_goes_to_stderr() -> None:
    done = run_snippet(NATIVE)
    assert done.returncode == 0, done.stderr
    first, after = done.stdout.splitlines()
    assert json.loads(first) == {"answer": 42}
    assert after == "after"  # stdout is itself again
    assert "tmpSolver.run()" in done.stderr
