"""The operator's log lines: text or JSON, one record per line, whatever a record holds.

`--log-format=json` (the chart's default) is for log collectors that parse each line as an
object. A format string around `%(message)s` is not that: a message with a quote, a
backslash or a newline, or a record with a traceback, makes lines no parser takes. Here
each record is serialised by `json.dumps`, its traceback inside the object.

Native code can write to the process's stdout behind Python's back: HiGHS (the solver
behind scipy's milp) prints "HighsMipSolverData::transformNewIntegerFeasibleSolution
tmpSolver.run();" on some programs. In a container, stdout and stderr land in one log, so
that line would sit between the JSON records. `native_output_to_log` points file
descriptor 1 at a pipe and logs each line that comes through it as a record of its own
(logger `gpufleet.native`).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from datetime import UTC, datetime

NATIVE_LOGGER = "gpufleet.native"
TEXT_LAYOUT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (UTC, RFC 3339), level, logger, message and, when
    the record carries one, the exception's traceback."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, str] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exception"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, ensure_ascii=False)


def configure(fmt: str, verbose: bool) -> None:
    """Log to stderr in `fmt` ("text" or "json"), INFO (DEBUG when `verbose`)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_LAYOUT))
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, handlers=[handler])
    # Kopf's per-object loggers are chatty at INFO; our own lines say what happened.
    logging.getLogger("kopf").setLevel(logging.DEBUG if verbose else logging.WARNING)
    logging.getLogger("kubernetes").setLevel(logging.WARNING)


def native_output_to_log() -> threading.Thread:
    """From now on, what is written to file descriptor 1 (native code's stdout, and
    Python's own `print`) becomes log records, one per line. Returns the reading thread
    (a daemon: it ends with the process, or when the pipe closes)."""
    sys.stdout.flush()
    read, write = os.pipe()
    os.dup2(write, 1)
    os.close(write)
    reader = threading.Thread(target=_relay, args=(read,), name="native-stdout", daemon=True)
    reader.start()
    return reader


def _relay(fd: int) -> None:
    log = logging.getLogger(NATIVE_LOGGER)
    with os.fdopen(fd, "rb") as stream:
        for raw in stream:
            text = raw.decode("utf-8", errors="replace").rstrip()
            if not text:
                continue
            log.info("%s", text)  # a handler's failure is its own (logging.Handler.handleError)
