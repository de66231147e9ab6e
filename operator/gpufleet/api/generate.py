"""`python -m gpufleet.api.generate`: write the CRD where the project keeps copies of it."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from gpufleet.api import chart, crd, reference

# Paths relative to the project root, and what renders each.
TARGETS: dict[Path, Callable[[], str]] = {
    Path("crds/inferencepools.gpufleet.dev.yaml"): crd.render,
    Path("docs/api.md"): reference.render,
    Path("charts/gpufleet/templates/crd.yaml"): chart.render,
}


def main(root: Path = Path()) -> int:
    for target, render in TARGETS.items():
        text = render()
        path = root / target
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            print(f"Wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
