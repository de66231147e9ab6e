"""The `gpufleet` command line: one subcommand per module under gpufleet.commands.

Each command module exposes `register(subparsers)`, which adds its parser and sets
`func` to a callable taking the parsed arguments and returning an exit code. Modules are
imported lazily so `gpufleet plan` does not pay for Kopf or the Kubernetes client.

The core install is what `gpufleet run` imports (all the operator image carries); the
other commands need an extra. Without it a command stops before it starts, with an error
naming the extra, rather than with an ImportError halfway (a plot, after a whole simulation).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from gpufleet import __version__

# Subcommand name -> module under gpufleet.commands.
COMMANDS: dict[str, str] = {
    "plan": "plan",
    "simulate": "simulate",
    "run": "run",
    "dev": "dev",
    "model": "model",
}

# Subcommand name -> the extra it needs beyond the core, and the modules of that extra it
# imports (tests/unit/test_extras.py checks them against pyproject.toml).
EXTRAS: dict[str, tuple[str, tuple[str, ...]]] = {
    "plan": ("sim", ("rich",)),
    "simulate": ("sim", ("rich", "matplotlib")),
    "model": ("sim", ("rich", "matplotlib")),
    "dev": ("dev", ("cryptography", "rich", "matplotlib")),
}


def missing_extra(name: str) -> str | None:
    """Why command `name` cannot run in this environment, or None when it can."""
    if name not in EXTRAS:
        return None
    extra, modules = EXTRAS[name]
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if not missing:
        return None
    return (
        f"gpufleet {name} needs the {extra} extra: pip install 'gpufleet[{extra}]' "
        f"({', '.join(missing)} not installed)"
    )


def build_parser(names: Sequence[str] | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpufleet",
        description="Serve one LLM from a mixed GPU fleet against cost and latency objectives.",
    )
    parser.add_argument("--version", action="version", version=f"gpufleet {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in names if names is not None else COMMANDS:
        if missing_extra(name) is not None:
            # Listed, without importing a module that would fail (main refuses to run it).
            extra = EXTRAS[name][0]
            subparsers.add_parser(name, help=f"(needs the {extra} extra: gpufleet[{extra}])")
            continue
        module = importlib.import_module(f"gpufleet.commands.{COMMANDS[name]}")
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    # Import only the module of the command asked for (help lists them all).
    first = next((a for a in args_list if not a.startswith("-")), None)
    names = [first] if first in COMMANDS else None
    problem = missing_extra(first) if first in COMMANDS else None
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 1
    parser = build_parser(names)
    args = parser.parse_args(args_list)
    func: Callable[[argparse.Namespace], int] | None = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    if getattr(args, "output", None) == "json":
        with native_output_to_stderr():
            return func(args)
    return func(args)


@contextmanager
def native_output_to_stderr() -> Iterator[None]:
    """Keep what native code prints out of a JSON answer on stdout.

    HiGHS (the solver behind scipy's milp) writes some lines straight to the C library's
    stdout, not through any option or Python stream: on some programs
    "HighsMipSolverData::transformNewIntegerFeasibleSolution tmpSolver.run();" landed
    ahead of `gpufleet simulate --output json`'s answer, and a JSON parser then refused
    it. Inside, file descriptor 1 points at stderr, and sys.stdout writes to the real
    stdout, so only what the command prints is the answer."""
    sys.stdout.flush()
    try:
        on_fd = sys.stdout.fileno() == 1
    except (AttributeError, OSError, ValueError):  # already not the process's stdout
        on_fd = False
    saved = os.dup(1)
    previous = sys.stdout
    if on_fd:
        sys.stdout = os.fdopen(os.dup(saved), "w", encoding="utf-8")
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        if on_fd:
            sys.stdout.close()
            sys.stdout = previous
        os.dup2(saved, 1)
        os.close(saved)


if __name__ == "__main__":
    sys.exit(main())
