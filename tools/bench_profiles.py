"""The planner's built-in profiles against the first-principles engine (gpufleet.perf).

Two tables, written to BENCHMARKS.md (`make bench-profiles`):

1. Every measured row of the built-in table: its fitted saturation (the completed rate of
   io.net's 200-request runs, as the planner reads it), the same fit made on the engine's
   replay of those five runs (the method, with the engine in place of the GPU), and the
   engine's sustained throughput (completions per second while a backlog keeps the batch
   full: the middle half of 600 requests offered at twice the decode bound). The first two
   agreeing and the third standing far above them says the benchmark's drain, not the GPU,
   sets the table's saturation.
2. The derived profiles (GPU types nobody measured): each moved from its family's row by
   the engine's ratios (gpufleet.planning.derived), with its capacity at both objectives.
3. Every io.net run of a model that is not its row's (a Qwen 7B on the Llama 3 8B row):
   the planner's P99 TTFT at the run's completed rate and its completed rate, from the
   profile moved to the run's model and from the row unchanged, against the measurement.
4. The replica model fitted on the engine at steady state (gpufleet.planning.enginefit),
   per (GPU, model, GPUs) of the io.net runs, beside the built-in profile: saturation, fit
   error, and the P99 TTFT each gives at every run's offered rate against the measurement,
   by kind of run (warm: its prompts in the prefix cache; offered past steady capacity).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "operator"), str(ROOT)]

RATES = (1.0, 4.0, 8.0, 16.0, 32.0)
DERIVED = (
    ("H100-SXM-80GB", "meta-llama/Meta-Llama-3-8B-Instruct", 1),
    ("H200-SXM-141GB", "meta-llama/Meta-Llama-3-8B-Instruct", 1),
    ("A100-SXM-80GB", "meta-llama/Meta-Llama-3-8B-Instruct", 1),
    ("L40S", "meta-llama/Meta-Llama-3-8B-Instruct", 1),
    ("RTX5090", "meta-llama/Meta-Llama-3-8B-Instruct", 1),
    ("H100-SXM-80GB", "meta-llama/Meta-Llama-3-70B-Instruct", 2),
    ("H200-SXM-141GB", "meta-llama/Meta-Llama-3-70B-Instruct", 2),
    ("L40S", "meta-llama/Meta-Llama-3-70B-Instruct", 4),
)


def _burst_fit(row):  # type: ignore[no-untyped-def]
    """The table's method on the engine: the five 200-request runs, fitted alike."""
    import numpy as np

    from gpufleet.perf.calibration import calibration
    from gpufleet.perf.engine import simulate
    from gpufleet.perf.hardware import gpu
    from gpufleet.perf.models import model
    from gpufleet.perf.roofline import Replica
    from gpufleet.perf.workload import benchmark_workload
    from gpufleet.planning.fitting import MeasuredPoint, fit_points

    card = gpu(row.accelerator)
    replica = Replica(card, model(row.model), row.gpus, calibration(card.name).efficiency)
    shape = row.prompt_tokens + row.output_tokens
    points = []
    for rate in RATES:
        work = benchmark_workload(rate, 200, row.prompt_tokens, row.output_tokens)
        result = simulate(replica, work.arrivals, work.prompts, work.outputs)
        served = ~np.isnan(result.finish)
        end = max(float(np.nanmax(result.finish)), work.min_duration)
        completed = float(np.sum(served)) / end
        ttft = np.where(np.isnan(result.ttft), np.inf, result.ttft)
        tpot = result.tpot[~np.isnan(result.tpot)]
        points.append(
            MeasuredPoint(
                rate,
                completed,
                float(np.percentile(ttft, 99)),
                completed * shape,
                float(np.mean(tpot)) if len(tpot) else None,
            )
        )
    return fit_points(points).fit


def _tier(accelerator: str, gpus: int):  # type: ignore[no-untyped-def]
    """A one-replica tier of `gpus` x `accelerator`, for asking the planner's profiles."""
    from gpufleet.api.types import Tier

    return Tier.model_validate(
        {
            "name": "t",
            "accelerator": accelerator,
            "gpusPerReplica": gpus,
            "minReplicas": 0,
            "maxReplicas": 1,
            "pricePerGPUHour": "1.00",
        }
    )


def _spec(name: str):  # type: ignore[no-untyped-def]
    """The pool's model spec for an io.net model name."""
    from gpufleet.api.types import ModelSpec

    try:
        return ModelSpec(name=name)
    except ValueError:  # phi-4: no size in its name, 14B on its model card
        return ModelSpec(name=name, parameters_billions=14)


def _within(errors: list[float], bound: float) -> str:
    return f"{sum(e <= bound for e in errors) / len(errors):.0%}" if errors else "-"


def _other_models() -> list[str]:
    """Table 3: runs of models that are not their row's, moved vs unchanged."""
    import math

    from gpufleet.api.types import ModelSpec
    from gpufleet.perf.ionet import load_runs
    from gpufleet.planning.profiles import ProfileNotFound, replica_model

    runs = load_runs(ROOT.parent / "shared" / "data" / "iog-llm-inference-benchmarks")
    out = [
        "",
        "io.net runs of a model that is not its row's model, each with the profile moved to "
        "the run's model and with the row unchanged (P99 TTFT at the run's completed rate; "
        "the completed rate the profile gives at the offered one):",
        "",
        "| run | GPUs | rate | P99 TTFT ms: measured / moved / row | completed req/s: "
        "measured / moved / row |",
        "|---|---|---|---|---|",
    ]
    errs: dict[str, list[float]] = {"p99 moved": [], "p99 row": [], "rps moved": [], "rps row": []}

    def err(predicted: float, measured: float) -> float:
        return abs(predicted / measured - 1) if math.isfinite(predicted) else math.inf

    for run in runs:
        accelerator = "H100-PCIe-80GB" if "H100" in run.gpu else "RTX4090"
        tier = _tier(accelerator, run.gpus)
        spec = _spec(run.model)
        try:
            moved = replica_model(tier, spec)
            size = round(float(moved.name.split("/")[1].removesuffix("B")))
            plain = replica_model(tier, ModelSpec(name=f"unlisted-{size}B"))
        except (ProfileNotFound, ValueError):
            continue
        if moved.measured:
            continue
        p, o = run.mean_prompt, run.mean_output
        served = run.num_prompts / run.duration
        measured = run.measured["p99TtftMs"] / 1e3
        pm, pr = moved.ttft_p99_seconds(served, p, o), plain.ttft_p99_seconds(served, p, o)
        sm, sr = moved.served_rps(run.rate, p, o), plain.served_rps(run.rate, p, o)
        errs["p99 moved"].append(err(pm, measured))
        errs["p99 row"].append(err(pr, measured))
        errs["rps moved"].append(err(sm, served))
        errs["rps row"].append(err(sr, served))
        out.append(
            f"| {run.key.removeprefix('vllm_200prompts').removesuffix('.json:1')} | {run.gpus} "
            f"| {run.rate:g} | {measured * 1e3:.1f} / {pm * 1e3:.1f} / {pr * 1e3:.1f} "
            f"| {served:.2f} / {sm:.2f} / {sr:.2f} |"
        )
    out += [
        "",
        f"Over these {len(errs['p99 moved'])} runs, P99 TTFT within 25% of the measurement: "
        f"moved {_within(errs['p99 moved'], 0.25)}, row unchanged "
        f"{_within(errs['p99 row'], 0.25)}; completed rate within 10%: moved "
        f"{_within(errs['rps moved'], 0.10)}, row unchanged {_within(errs['rps row'], 0.10)}.",
        "",
        "The move reads P99 TTFT better. The completed rate of a 200-request run is capped by "
        "its drain rather than by the replica, so moving by sustained-throughput ratios misses "
        "it where the two models' KV-cache room differs: gemma-2-9b keeps 2.6x the KV bytes "
        "per token than Llama 3 8B (the engine puts its sustained throughput at 0.57x), and "
        "the FP8 Nemotron 70B leaves several times the room of a BF16 70B. Those are the misses in "
        "the table; the 4090 tensor-parallel runs at 1-4 req/s are the host-lag anomaly "
        "described in the model section.",
    ]
    return out


GPU_NAMES = {"NVIDIA-H100-PCIe": "H100-PCIe-80GB", "NVIDIA-GeForce-RTX-4090": "RTX4090"}


def _engine_fits() -> list[str]:
    """Table 4: the replica model fitted on the engine at steady state
    (gpufleet.planning.enginefit) against the built-in profile, at every io.net run."""
    import statistics
    from collections import defaultdict

    from gpufleet.perf.ionet import load_runs
    from gpufleet.perf.models import model
    from gpufleet.planning.derived import NotDerivable
    from gpufleet.planning.enginefit import engine_fit

    runs = load_runs(ROOT.parent / "shared" / "data" / "iog-llm-inference-benchmarks")
    configs = defaultdict(list)
    for run in runs:
        configs[(GPU_NAMES[run.gpu], run.model, run.gpus)].append(run)
    out = [
        "",
        "The replica model fitted on the engine at steady state (`gpufleet.planning.enginefit`: "
        "P99 TTFT at 1/64 to 0.95 of the sustained throughput, Poisson streams of new prompts "
        "of at least 90 s, the saturation fitted at most the sustained throughput), per (GPU, "
        "model, GPUs) of the io.net runs at their mean request shape, beside the built-in "
        "profile the planner reads today. Fit error: the fitted P99 against the engine's at its "
        "points below the fitted saturation, largest absolute. Warm: runs whose prompts the "
        "engine finds in vLLM's prefix cache (a run that followed another on the same server, "
        "the same 200 prompts a minute earlier, with room to keep them: "
        "`perf.replay.cached_prompt_tokens`). P99 TTFT within 15% / 30%: the model's P99 at "
        "each run's offered rate against the run's measured P99 (the issue's measure), "
        "built-in / engine fit.",
        "",
        "| GPU x GPUs, model | runs (warm) | saturation: built-in / engine fit / engine "
        "sustained | engine fit error | P99 within 15%: built-in / engine fit | within 30% |",
        "|---|---|---|---|---|---|",
    ]
    groups: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for (accelerator, name, gpus), group in sorted(configs.items()):
        prompt = statistics.fmean(r.mean_prompt for r in group)
        output = statistics.fmean(r.mean_output for r in group)
        builtin = _builtin(accelerator, name, gpus)
        try:  # vLLM 0.8.5's defaults, as the runs had
            fitted = engine_fit(accelerator, model(name), gpus, prompt, output)
        except (KeyError, NotDerivable):
            fitted = None
        engine = fitted.model if fitted else None
        mine: dict[str, list[float]] = defaultdict(list)
        warm = 0
        for run in group:
            errors = {"built-in": _p99_error(builtin, run), "engine": _p99_error(engine, run)}
            if _warm(run):
                warm += 1
                kind = "warm (prefix cache)"
            elif engine is not None and run.rate >= engine.fit.saturation_rps:
                kind = "offered at or above the engine fit's saturation"
            else:
                kind = "the other runs"
            for key, e in errors.items():
                mine[key].append(e)
                groups[kind][key].append(e)
                groups["all runs"][key].append(e)
        sat_b = f"{builtin.saturation_rps(prompt, output):.2f}" if builtin else "-"
        sat_e = f"{fitted.model.fit.saturation_rps:.2f}" if fitted else "-"
        sus = f"{fitted.sustained_rps:.2f}" if fitted else "-"
        worst = f"{max((abs(e) for e in fitted.errors()), default=0.0):.0%}" if fitted else "-"
        out.append(
            f"| {accelerator} x{gpus} {name.split('/')[-1]} | {len(group)} ({warm}) "
            f"| {sat_b} / {sat_e} / {sus} req/s | {worst} "
            f"| {_within(mine['built-in'], 0.15)} / {_within(mine['engine'], 0.15)} "
            f"| {_within(mine['built-in'], 0.30)} / {_within(mine['engine'], 0.30)} |"
        )
    out += [
        "",
        "By kind of run (every run in exactly one of the first three):",
        "",
        "| runs | count | P99 within 15%: built-in / engine fit | within 30% |",
        "|---|---|---|---|",
    ]
    for kind in (
        "warm (prefix cache)",
        "offered at or above the engine fit's saturation",
        "the other runs",
        "all runs",
    ):
        g = groups[kind]
        out.append(
            f"| {kind} | {len(g['engine'])} "
            f"| {_within(g['built-in'], 0.15)} / {_within(g['engine'], 0.15)} "
            f"| {_within(g['built-in'], 0.30)} / {_within(g['engine'], 0.30)} |"
        )
    rest = groups["the other runs"]
    out += [
        "",
        "The engine fit's saturation stands above the built-in profile's on every single-GPU "
        "H100 row, about 3-4x for the 1.5-14B models, and is set by where a steady stream's "
        "queue stops draining, below the throughput under a backlog: an H100 PCIe with Llama "
        "3 8B sustains 71 req/s under a backlog, while a 90 s Poisson stream at 50 req/s has "
        "a P99 TTFT of 2.5 s and at 61 req/s 12 s. It reads the io.net runs' P99 worse than "
        "the built-in profiles, for two reasons the table separates. Warm runs: on the H100 "
        "the runs at 16, 8, 4 and 1 req/s each followed the last on the same server with the "
        "same prompts, and vLLM's prefix cache served about 96% of their prompt tokens (one "
        "RTX 4090's cache is too small to keep an 8B model's): Llama 3 8B measured a P99 of "
        "27-31 ms there, which the engine replays with the cache (28.9-33.3 ms) and puts at "
        "37.5-57.6 ms without it. The built-in profiles are fitted on those runs, so on its "
        "1.5B-14B rows the planner reads an H100's zero-load P99 as if every prompt were "
        "cached; a production "
        "stream of new prompts is the engine fit's case. Runs offered more than a replica's "
        "steady capacity: a 200-request run ends before its queue builds (the RTX 4090 with "
        "Llama 3 8B measured 193 and 331 ms at 16 and 32 req/s, above the 12.4 req/s it holds"
        " at steady state), which no steady-state model shows. "
        f"On the {len(rest['engine'])} runs that are neither, within 15%: built-in "
        f"{_within(rest['built-in'], 0.15)}, engine fit {_within(rest['engine'], 0.15)}; within "
        f"30%: {_within(rest['built-in'], 0.30)} and {_within(rest['engine'], 0.30)}. The warm "
        "RTX 4090 tensor-parallel runs hold the host lag of the model section, which neither "
        "model has. The built-in profiles stay the default (switching moves every number the "
        "planner, the simulator and the fleet twin give: `issues show 14`); a pool sizes on "
        "the engine fit with `spec.scaling.performanceModel: Engine`, fitted per tier on its "
        "own card, model and vLLM 0.33 settings.",
    ]
    return out


def _builtin(accelerator: str, name: str, gpus: int):  # type: ignore[no-untyped-def]
    """The built-in profile the planner reads for these replicas, None when it has none."""
    from gpufleet.planning.profiles import ProfileNotFound, replica_model

    tier = _tier(accelerator, gpus)
    spec = _spec(name)
    try:
        return replica_model(tier, spec)
    except ProfileNotFound:
        return None


def _p99_error(model, run) -> float:  # type: ignore[no-untyped-def]
    """|predicted / measured - 1| of P99 TTFT at the run's offered rate (inf: none)."""
    import math

    if model is None:
        return math.inf
    predicted = model.ttft_p99_seconds(run.rate, run.mean_prompt, run.mean_output)
    measured = run.measured["p99TtftMs"] / 1e3
    return abs(predicted / measured - 1) if math.isfinite(predicted) else math.inf


def _warm(run) -> bool:  # type: ignore[no-untyped-def]
    """Whether the engine finds most of the run's prompt tokens in the prefix cache."""
    from gpufleet.perf.calibration import calibration
    from gpufleet.perf.hardware import gpu
    from gpufleet.perf.replay import cached_prompt_tokens, replica_for
    from gpufleet.perf.workload import benchmark_workload

    replica = replica_for(run, calibration(gpu(run.gpu).name).efficiency)
    work = benchmark_workload(run.rate, run.num_prompts, run.mean_prompt, run.mean_output)
    cached = cached_prompt_tokens(run, replica, work.prompts)
    return bool(cached.sum() > 0.5 * work.prompts.sum())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)

    from gpufleet.api.types import ModelSpec
    from gpufleet.perf.models import model
    from gpufleet.planning.derived import engine_numbers
    from gpufleet.planning.profile_data import PROFILES
    from gpufleet.planning.profiles import replica_model

    started = time.perf_counter()
    out = [
        "## Built-in profiles against the first-principles engine",
        "",
        f"`make bench-profiles` ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}): "
        "`python tools/bench_profiles.py`.",
        "",
        "Measured rows: the saturation the planner reads (fitted on io.net's five 200-request "
        "runs), the same fit on the engine's replay of those runs, and the engine's sustained "
        "throughput (the middle half of 600 requests offered at twice the decode bound, so "
        "neither the first prefills nor the drain of the last long outputs count):",
        "",
        "| row | saturation (io.net fit) | saturation (engine, same method) | sustained "
        "(engine) | sustained / io.net fit |",
        "|---|---|---|---|---|",
    ]
    for row in PROFILES:
        same = _burst_fit(row)
        steady = engine_numbers(
            row.accelerator, model(row.model), row.gpus, row.prompt_tokens, row.output_tokens
        )
        out.append(
            f"| {row.accelerator} {row.size_class} x{row.gpus} ({row.model.split('/')[-1]}) "
            f"| {row.fit.saturation_rps:.2f} req/s | {same.saturation_rps:.2f} req/s "
            f"| {steady.throughput_rps:.2f} req/s "
            f"| {steady.throughput_rps / row.fit.saturation_rps:.2f}x |"
        )
    out += [
        "",
        "The io.net fit and the engine's fit of the same runs agree within about 20% on the "
        "single-GPU rows, while the sustained throughput stands well above both, the most on "
        "the fastest replicas: a 200-request run at 32 req/s lasts about 6 s of arrivals "
        "plus the drain of its longest outputs, so its completed rate cannot show a replica "
        "much faster than that drain. The planner reads the table's saturation, so it "
        "understates every replica, an H100 with an 8B model about 4x and an RTX 4090 about "
        "1.5x: across the two families it credits the 4090 too much, until it reads the "
        "engine's numbers directly. A derived profile is moved by sustained-throughput "
        "ratios, so it carries its source row's understatement and compares fairly with "
        "the measured profiles of its family (the same model on the same kind of card).",
        "",
        "Derived profiles (GPU types nobody measured), at the io.net request shape "
        "(208 prompt / 215 output tokens):",
        "",
        "| tier | moved from | throughput ratio | saturation | capacity at 100 ms "
        "| capacity at 2 s |",
        "|---|---|---|---|---|---|",
    ]
    for accelerator, name, gpus in DERIVED:
        tier = _tier(accelerator, gpus)
        m = replica_model(tier, ModelSpec(name=name))
        p, o = m.prompt_tokens, m.output_tokens
        frm = m.source.split(" from ", 1)[1].split(":", 1)[0]
        ratio = m.source.split(": ", 1)[1].split("x its", 1)[0]
        out.append(
            f"| {accelerator} x{gpus} {name.split('/')[-1]} | {frm} | {ratio}x "
            f"| {m.fit.saturation_rps:.2f} req/s | {m.capacity_rps(0.1, p, o):.2f} req/s "
            f"| {m.capacity_rps(2.0, p, o):.2f} req/s |"
        )
    out += _other_models()
    out += _engine_fits()
    wall = time.perf_counter() - started
    out += ["", f"Wall time {wall:.0f} s."]
    text = "\n".join(out)
    print(text)
    if not args.no_write:
        from tools.benchmarks_md import write_section

        write_section("profiles", text)
        print("Wrote the profiles section of BENCHMARKS.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
