"""The operator's JSON log: one object per line, whatever a message or native code holds."""

from __future__ import annotations

import json
import logging
import sys

import pytest

from gpufleet.commands.logs import NATIVE_LOGGER, JsonFormatter
from tests.snippets import run_snippet


def _record(message: str, *args: object, exc_info: object = None) -> logging.LogRecord:
    return logging.LogRecord(
        "gpufleet.reconcile",
        logging.WARNING,
        __file__,
        1,
        message,
        args,
        exc_info,  # type: ignore[arg-type]
    )


def test_a_message_with_quotes_backslashes_and_newlines_stays_one_object() -> None:
    text = JsonFormatter().format(_record('pool "a\\b" says %s', "line one\nline two"))
    assert "\n" not in text
    line = json.loads(text)
    assert line["message"] == 'pool "a\\b" says line one\nline two'
    assert line["level"] == "WARNING"
    assert line["logger"] == "gpufleet.reconcile"
    assert line["time"].endswith("+00:00")
    assert "exception" not in line


def test_a_traceback_is_a_field_of_the_object() -> None:
    try:
        raise ValueError('bad "value"')
    except ValueError:
        record = _record("reconcile failed", exc_info=sys.exc_info())
    line = json.loads(JsonFormatter().format(record))
    assert line["message"] == "reconcile failed"
    assert line["exception"].startswith("Traceback (most recent call last):")
    assert 'ValueError: bad "value"' in line["exception"]


# What HiGHS does on some programs: a line written straight to file descriptor 1.
NATIVE = """
import logging, os, sys
from gpufleet.commands import logs
logs.configure("json", False)
reader = logs.native_output_to_log()
logging.getLogger("gpufleet").info("before")
os.write(1, b"HighsMipSolverData::transformNewIntegerFeasibleSolution tmpSolver.run();\\n")
print("a print")
sys.stdout.flush()
os.close(1)
reader.join(timeout=10)
logging.getLogger("gpufleet").info("after, reader alive: %s", reader.is_alive())
"""


@pytest.mark.timeout(30)
def test_what_native_code_prints_becomes_log_records() -> None:
    done = run_snippet(NATIVE)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    lines = [json.loads(line) for line in done.stderr.splitlines()]
    native = [line["message"] for line in lines if line["logger"] == NATIVE_LOGGER]
    assert native == [
        "HighsMipSolverData::transformNewIntegerFeasibleSolution tmpSolver.run();",
        "a print",
    ]
    assert lines[0]["message"] == "before"
    assert lines[-1]["message"] == "after, reader alive: False"
