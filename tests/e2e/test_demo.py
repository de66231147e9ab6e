"""`gpufleet dev demo` (the README's `make demo`) end to end, on a shortened story.

The command starts a control plane of its own beside the session's, Prometheus, the fleet
twin and the operator, plays the story, prints its summary, writes the plot, and stops
everything it started: no process and no temp dir outlive it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.cluster, pytest.mark.prometheus, pytest.mark.timeout(330)]

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "demo" / "demo.yaml"


def processes_mentioning(text: str) -> list[str]:
    """Command lines of live processes whose arguments or environment contain `text`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes()
        except OSError:  # gone, or not ours to read
            continue
        if text.encode() in cmdline or text.encode() in environ:
            found.append(cmdline.replace(b"\0", b" ").decode(errors="replace"))
    return found


def test_the_demo_plays_its_story_and_leaves_nothing_running(tmp_path: Path) -> None:
    config = yaml.safe_load(DEMO.read_text())
    config["pool"] = str((DEMO.parent / config["pool"]).resolve())
    quiet, surge = config["story"][0], config["story"][1]
    assert quiet["name"] == "quiet" and surge["name"] == "batch surge"
    config["story"] = [{**quiet, "seconds": 20}, {**surge, "seconds": 60}]
    path = tmp_path / "demo.yaml"
    path.write_text(yaml.safe_dump(config))
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    out = tmp_path / "out"

    done = subprocess.run(
        [sys.executable, "-m", "gpufleet.cli", "dev", "demo", "--config", str(path),
         "--output-dir", str(out), "--no-live"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TMPDIR": str(scratch)},
        check=False,
    )  # fmt: skip
    print(done.stdout[-6000:], done.stderr[-3000:])

    assert done.returncode == 0, done.stderr[-3000:]
    text = " ".join(done.stdout.split())  # rich wraps long lines
    # The story's phases, the operator's decisions and the summary a user reads.
    assert "batch surge" in text
    assert "DemandIncreased" in text, "the batch surge did not scale the pool up"
    assert "SLO attainment per phase" in text
    assert "Cost of the story: $" in text
    plot = out / "gpufleet-demo.png"
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Everything it started is stopped and its temp dir removed.
    assert "nothing left running" in text
    assert list(scratch.iterdir()) == []
    assert processes_mentioning(str(scratch)) == []
