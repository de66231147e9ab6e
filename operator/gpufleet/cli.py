"""The `gpufleet` command line: one subcommand per module under gpufleet.commands.

Each command module exposes `register(subparsers)`, which adds its parser and sets
`func` to a callable taking the parsed arguments and returning an exit code. Modules are
imported lazily so `gpufleet plan` does not pay for Kopf or the Kubernetes client.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence

from gpufleet import __version__

# Subcommand name -> module under gpufleet.commands.
COMMANDS: dict[str, str] = {
    "plan": "plan",
    "simulate": "simulate",
    "run": "run",
    "dev": "dev",
    "model": "model",
}


def build_parser(names: Sequence[str] | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpufleet",
        description="Serve one LLM from a mixed GPU fleet against cost and latency objectives.",
    )
    parser.add_argument("--version", action="version", version=f"gpufleet {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in names if names is not None else COMMANDS:
        module = importlib.import_module(f"gpufleet.commands.{COMMANDS[name]}")
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    # Import only the module of the command asked for (help lists them all).
    first = next((a for a in args_list if not a.startswith("-")), None)
    names = [first] if first in COMMANDS else None
    parser = build_parser(names)
    args = parser.parse_args(args_list)
    func: Callable[[argparse.Namespace], int] | None = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    return func(args)


if __name__ == "__main__":
    sys.exit(main())
