"""Subcommands of the gpufleet CLI, one module each, imported only when used."""
