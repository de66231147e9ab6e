"""gpufleet: serve one LLM from a mixed GPU fleet against cost and P99 latency objectives."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("gpufleet")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0"
