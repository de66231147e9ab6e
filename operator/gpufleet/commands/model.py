"""`gpufleet model`: the first-principles GPU performance model (gpufleet.perf).

    gpufleet model validate --runs DIR [--output json|table] [--no-progress]
    gpufleet model show --accelerator L40S --model Qwen/Qwen2.5-14B-Instruct --gpus 2
        [--prompt-tokens 206] [--output-tokens 202] [--plot out.png] [--output json|table]

`validate` replays every io.net run in DIR (vLLM 0.8.5 benchmark_serving JSON files) through
the model and prints measured and predicted P99/median TTFT, median TPOT and output tokens/s
(a progress bar on stderr while it replays: each run's output tokens/s is the median over nine
orders of its lengths, about 15 s for the 130 runs on two cores).
`show` prints a replica's KV capacity, its capacity (req/s) under a few P99 TTFT objectives,
P99 TTFT against load, its capacity within the loosest objective and P99 TTFT against prompt
length, and which parameters are datasheet-only.
Exit status: 0, or 2 for an unknown accelerator or model, a model that does not fit, or a
missing runs directory or one without runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from gpufleet.commands.common import UsageError, require_number

OBJECTIVES_MS = (200.0, 500.0, 1000.0, 2000.0)
LOOSEST_S = OBJECTIVES_MS[-1] / 1e3  # the objective of the prompt-length rows' capacity
LOAD_SHARES = (0.1, 0.25, 0.5, 0.75, 0.9, 1.0)
PROMPTS = (128, 512, 1024, 2048, 4096)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "model",
        help="the GPU performance model: validate it on io.net runs, or show a what-if",
        description="A vLLM replica modelled from the GPU's datasheet and the model's shape, "
        "with efficiencies fitted per GPU type on the io.net runs.",
    )
    sub = parser.add_subparsers(dest="model_command", metavar="SUBCOMMAND")
    validate = sub.add_parser("validate", help="replay io.net runs: measured vs predicted")
    validate.add_argument("--runs", type=Path, required=True, help="directory of *.json runs")
    validate.add_argument("--output", choices=("table", "json"), default="table")
    validate.add_argument("--no-progress", action="store_true", help="no progress bar")
    validate.set_defaults(func=main_validate)
    show = sub.add_parser("show", help="capacity and P99 TTFT of one replica")
    show.add_argument("--accelerator", required=True, help="e.g. H100-PCIe, RTX-4090, L40S")
    show.add_argument("--model", required=True, help="Hugging Face id, e.g. Qwen/Qwen2.5-7B")
    show.add_argument("--gpus", type=int, default=1, help="tensor-parallel GPUs (1)")
    show.add_argument("--prompt-tokens", type=float, default=206.0, help="mean prompt (206)")
    show.add_argument("--output-tokens", type=float, default=202.0, help="mean output (202)")
    show.add_argument("--plot", type=Path, default=None, help="write a PNG here")
    show.add_argument("--output", choices=("table", "json"), default="table")
    show.set_defaults(func=main_show)
    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])


def main_validate(args: argparse.Namespace) -> int:
    from gpufleet.perf.ionet import METRICS, load_runs
    from gpufleet.perf.validate import summary

    if not args.runs.is_dir():
        print(f"error: --runs {args.runs}: not a directory", file=sys.stderr)
        return 2
    try:
        runs = load_runs(args.runs)
    except ValueError as error:
        print(f"error: --runs {args.runs}: {error}", file=sys.stderr)
        return 2
    if not runs:
        print(
            f"error: --runs {args.runs}: no vLLM benchmark runs (*.json) in it; point it at "
            "the io.net files (iog-llm-inference-benchmarks)",
            file=sys.stderr,
        )
        return 2
    rows = _replayed(runs, progress=not args.no_progress)
    if args.output == "json":
        print(json.dumps({"runs": [r.as_json() for r in rows]}, indent=2))
        return 0
    short = {
        "p99TtftMs": "P99 TTFT",
        "medianTtftMs": "med TTFT",
        "medianTpotMs": "TPOT",
        "outputTokensPerSecond": "out tok/s",
    }
    print(f"{'run':58} {'rate':>4} " + " ".join(f"{short[k]:>22}" for k in METRICS))
    for r in rows:
        name = f"{r.run.model.split('/')[-1][:34]} {r.run.gpus}x{r.run.gpu.split('-')[-1]}"
        cells = []
        for k in METRICS:
            m, p = r.run.measured[k], r.predicted[k]
            cells.append(f"{m:8.1f} {p:8.1f} {100 * r.error(k):+4.0f}%")
        print(f"{name[:50]:50} L{r.run.line} {r.run.rate:4.0f} " + " ".join(cells))
    for key, tol, share, target in summary(rows):
        aim = f" (target {target:.0%})" if target is not None else ""
        print(f"{key} within {tol:.0%}: {share:.0%} of {len(rows)} runs{aim}")
    return 0


def _replayed(runs: Any, *, progress: bool) -> Any:
    """`validate` over the runs, with a progress bar on stderr (rich) unless disabled."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from gpufleet.perf.validate import validate

    console = Console(stderr=True)
    with Progress(
        TextColumn("[bold]replaying io.net runs"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=not progress or not console.is_terminal,  # no stray lines in a log
        transient=True,
    ) as bar:
        task = bar.add_task("replay", total=len(runs))
        return validate(runs, on_run=lambda: bar.advance(task))


def _replica(args: argparse.Namespace) -> Any:
    from gpufleet.perf.calibration import calibration
    from gpufleet.perf.hardware import gpu
    from gpufleet.perf.models import model, tensor_parallel_refusal
    from gpufleet.perf.roofline import Replica

    try:
        g, m = gpu(args.accelerator), model(args.model)
    except KeyError as error:
        raise UsageError(str(error.args[0])) from None
    require_number("--gpus", args.gpus, at_least=1)
    refused = tensor_parallel_refusal(m.heads, m.kv_heads, args.gpus)
    if refused is not None:
        raise UsageError(f"--gpus {args.gpus}: {m.name}: {refused}")
    cal = calibration(g.name)
    replica = Replica(g, m, args.gpus, cal.efficiency)
    if not replica.fits():
        raise UsageError(
            f"--model {m.name}: {m.weight_memory_bytes / 2**30:.1f} GiB of weights leave no "
            f"KV cache on {args.gpus} x {g.name} ({g.memory_gib} GiB each)"
        )
    return replica, cal


def show_data(args: argparse.Namespace) -> dict[str, Any]:
    from gpufleet.perf.capacity import capacity_rps, p99_ttft_seconds

    replica, cal = _replica(args)
    p, o = args.prompt_tokens, args.output_tokens
    caps = {f"{ms:.0f}": capacity_rps(replica, ms / 1e3, p, o) for ms in OBJECTIVES_MS}
    top = max(caps.values()) or 1.0
    load = [
        {"rate": round(s * top, 3), "p99TtftMs": p99_ttft_seconds(replica, s * top, p, o) * 1e3}
        for s in LOAD_SHARES
    ]
    half = 0.5 * (caps[f"{OBJECTIVES_MS[-1]:.0f}"] or top)
    prompt = [_at_prompt(replica, n, o, half) for n in PROMPTS if n <= 8192]
    eff = cal.efficiency
    return {
        "accelerator": replica.gpu.name,
        "model": replica.model.name,
        "gpus": replica.tp,
        "meanPromptTokens": p,
        "meanOutputTokens": o,
        "kvCacheTokens": replica.kv_capacity_tokens(),
        "weightsGiBPerGpu": round(replica.weight_bytes_per_gpu() / 2**30, 2),
        "calibration": {
            "measured": cal.measured,
            "datasheetOnly": list(cal.datasheet_only),
            "computeShareOfPeak": eff.compute,
            "memoryShareOfPeak": eff.memory,
            "linkShareOfPeak": eff.link,
            "stepOverheadMs": eff.step_overhead_s * 1e3,
            "apiOverheadMs": eff.api_overhead_s * 1e3,
        },
        "capacityRps": caps,
        "p99TtftVsLoad": load,
        "p99TtftVsPrompt": prompt,
    }


def _at_prompt(replica: Any, prompt: int, output: float, rate: float) -> dict[str, Any]:
    """One row of P99 TTFT against prompt length: the replica's capacity within the loosest
    objective at that length, and its P99 at `rate` (None where `rate` is above that
    capacity: the queue grows for as long as the load lasts, so no P99 holds)."""
    from gpufleet.perf.capacity import capacity_rps, p99_ttft_seconds

    capacity = capacity_rps(replica, LOOSEST_S, prompt, output)
    over = rate > capacity
    return {
        "promptTokens": prompt,
        "rate": round(rate, 3),
        "capacityRps": round(capacity, 3),
        "p99TtftMs": None if over else p99_ttft_seconds(replica, rate, prompt, output) * 1e3,
    }


def main_show(args: argparse.Namespace) -> int:
    try:
        data = show_data(args)
    except UsageError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.plot is not None:
        _plot(data, args.plot)
    if args.output == "json":
        print(json.dumps(data, indent=2))
        return 0
    cal = data["calibration"]
    print(
        f"{data['gpus']} x {data['accelerator']}, {data['model']}: "
        f"{data['weightsGiBPerGpu']} GiB weights per GPU, KV cache {data['kvCacheTokens']} "
        f"tokens; prompts ~{data['meanPromptTokens']:.0f}, outputs ~{data['meanOutputTokens']:.0f}"
    )
    if cal["measured"]:
        only = ", ".join(cal["datasheetOnly"]) or "none"
        print(f"calibration: measured: true (fitted on io.net runs); datasheet-only: {only}")
    else:
        print(
            "calibration: measured: false: every parameter is a datasheet-only default: "
            + ", ".join(cal["datasheetOnly"])
        )
    print(
        "capacity (req/s) with P99 TTFT within: "
        + ", ".join(f"{k} ms: {v:.2f}" for k, v in data["capacityRps"].items())
    )
    print("P99 TTFT against load:")
    for row in data["p99TtftVsLoad"]:
        print(f"  {row['rate']:8.2f} req/s  {row['p99TtftMs']:10.1f} ms")
    loosest = f"{LOOSEST_S:g} s"
    rows = data["p99TtftVsPrompt"]
    print(
        f"P99 TTFT against mean prompt length at {rows[0]['rate']:.2f} req/s (half the "
        f"{loosest} capacity at ~{data['meanPromptTokens']:.0f} tokens), and the {loosest} "
        "capacity at each length:"
    )
    for row in rows:
        p99 = row["p99TtftMs"]
        shown = f"{p99:10.1f} ms" if p99 is not None else "  overloaded: above its capacity"
        print(f"  {row['promptTokens']:6d} tokens  {row['capacityRps']:7.2f} req/s  {shown}")
    return 0


def _plot(data: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b, c) = plt.subplots(1, 3, figsize=(14, 4))
    load = data["p99TtftVsLoad"]
    a.plot([r["rate"] for r in load], [r["p99TtftMs"] for r in load], marker="o")
    a.set_xlabel("req/s")
    a.set_ylabel("P99 TTFT (ms)")
    a.set_yscale("log")
    rows = data["p99TtftVsPrompt"]
    within = [r for r in rows if r["p99TtftMs"] is not None]  # the others are overloaded
    b.plot([r["promptTokens"] for r in within], [r["p99TtftMs"] for r in within], marker="o")
    b.set_xlabel(f"mean prompt tokens (at {rows[0]['rate']:.2f} req/s)")
    b.set_ylabel("P99 TTFT (ms)")
    b.set_yscale("log")
    c.plot([r["promptTokens"] for r in rows], [r["capacityRps"] for r in rows], marker="o")
    c.set_xlabel("mean prompt tokens")
    c.set_ylabel(f"req/s within {LOOSEST_S:g} s P99 TTFT")
    for axis in (b, c):  # the prompt lengths on a log scale, labelled as they are
        axis.set_xscale("log", base=2)
        axis.set_xticks([r["promptTokens"] for r in rows], [str(r["promptTokens"]) for r in rows])
        axis.tick_params(axis="x", which="minor", bottom=False, labelbottom=False)
    fig.suptitle(f"{data['gpus']} x {data['accelerator']}: {data['model']}")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
