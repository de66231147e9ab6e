"""`python -m gpufleet.api.generate`: write the CRD where the project keeps copies of it."""

from __future__ import annotations

import sys
from pathlib import Path

from gpufleet.api.crd import render

# Paths relative to the project root; the chart's copy is templated behind crds.enabled.
TARGETS = (Path("crds/inferencepools.gpufleet.dev.yaml"),)


def main(root: Path = Path()) -> int:
    text = render()
    for target in TARGETS:
        path = root / target
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            print(f"Wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
