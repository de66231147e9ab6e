"""Derive the built-in profile table (gpufleet/planning/profile_data.py) from the io.net runs.

Source: the raw vLLM 0.8.5 `benchmark_serving` results behind the IOG Foundation / io.net
AIBC 2025 study, ../shared/data/iog-llm-inference-benchmarks/*.json (Apache-2.0): 200
ShareGPT prompts per run at Poisson rates 1/4/8/16/32 req/s. Some files hold two runs (JSON
lines); repeated runs of one configuration are averaged per rate.

One profile per (accelerator, size class, GPUs), measured on one representative model per
size class (the first of PREFERRED that has runs for that accelerator and GPU count).
Each point: offered rate, completed req/s, P99 TTFT, total tokens/s, mean TPOT. The fit and
its error at every point are written next to the numbers.

    .venv/bin/python tools/derive_profiles.py            # rewrite the table, print the errors
    .venv/bin/python tools/derive_profiles.py --check    # exit 1 if the table is stale

`--check` compares values, not text: the least-squares fits go through OpenBLAS, which picks
its kernels by processor, so the same data fits to slightly different last digits on another
CPU (seen: the 7th significant digit). Everything but the fitted numbers must match exactly or
to float precision (names, counts, flags, and the points, which are plain means of the data);
the fitted parameters and the errors derived from them match within FIT_RELATIVE_TOLERANCE and
ERROR_ABSOLUTE_TOLERANCE, far above that noise and far below what a change in the data or in
the fit moves them (tests/unit/planning/test_profiles.py edits one run's P99 and sees it fail).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "operator"))

from gpufleet.planning.capacity import Fit  # noqa: E402
from gpufleet.planning.fitting import (  # noqa: E402
    BuiltinProfile,
    MeasuredPoint,
    PointError,
    fit_points,
)

DATA = ROOT.parent / "shared" / "data" / "iog-llm-inference-benchmarks"
OUTPUT = ROOT / "operator" / "gpufleet" / "planning" / "profile_data.py"

GPU_NAMES = {"NVIDIA-H100-PCIe": "H100-PCIe-80GB", "NVIDIA-GeForce-RTX-4090": "RTX4090"}
# Size class -> representative models, most preferred first (fp16 only: the FP8 Nemotron
# 70B is left out; at 32B R1-Distill-Qwen-32B is preferred for being a dense fp16 model
# like the others). Llama-3-8B-Instruct stands for 8B; R1-Distill-Llama-8B has its
# architecture and covers the multi-GPU RTX 4090 tiers.
PREFERRED: dict[str, tuple[tuple[str, float], ...]] = {
    "1.5B": (("deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B", 1.5),),
    "8B": (
        ("meta-llama/Meta-Llama-3-8B-Instruct", 8.0),
        ("deepseek-ai/DeepSeek-R1-Distill-Llama-8B", 8.0),
        ("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", 7.0),
    ),
    "14B": (("deepseek-ai/DeepSeek-R1-Distill-Qwen-14B", 14.0),),
    "32B": (
        ("deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", 32.0),
        ("Qwen/QwQ-32B-Preview", 32.0),
    ),
    # Meta-Llama-3-70B-Instruct's runs are erratic (P99 TTFT 6.1 s at 4 req/s, 1.7 s at
    # 16 req/s, 22.6 s at 8); R1-Distill-Llama-70B has its architecture and consistent runs.
    "70B": (
        ("deepseek-ai/DeepSeek-R1-Distill-Llama-70B", 70.0),
        ("meta-llama/Meta-Llama-3-70B-Instruct", 70.0),
    ),
}


# A fitted parameter may differ by this share between machines (numerical noise of the fit is
# ~1e-6; a changed data point or fit moves parameters by percents).
FIT_RELATIVE_TOLERANCE = 1e-3
# ... or, for a parameter in seconds, by a microsecond: a term the fit drives to zero lands at
# 3e-11 s on one CPU and 3e-15 s on another, both nothing next to millisecond latencies.
FIT_ABSOLUTE_SECONDS = 1e-6
# The table writes errors (model / measured - 1) rounded to 0.001; the fit's noise can flip the
# last digit, so two tables agree when each error is within 0.002 of the other.
ERROR_ABSOLUTE_TOLERANCE = 2e-3
# Everything else (the points are means of the data in plain Python arithmetic) agrees to
# float precision on any machine.
DATA_RELATIVE_TOLERANCE = 1e-9


def differences(committed: object, derived: object, path: str = "PROFILES") -> list[str]:
    """Where two profile tables disagree beyond the tolerances above (empty: they agree)."""
    if isinstance(committed, Fit | PointError) and type(committed) is type(derived):
        rel, abs_ = (
            (FIT_RELATIVE_TOLERANCE, 0.0)
            if isinstance(committed, Fit)
            else (0.0, ERROR_ABSOLUTE_TOLERANCE)
        )
        return _field_differences(committed, derived, path, rel, abs_)
    if dataclasses.is_dataclass(committed) and type(committed) is type(derived):
        return _field_differences(committed, derived, path, DATA_RELATIVE_TOLERANCE, 0.0)
    if isinstance(committed, tuple) and isinstance(derived, tuple):
        if len(committed) != len(derived):
            return [f"{path}: {len(committed)} entries committed, {len(derived)} derived"]
        return [
            d
            for i, (a, b) in enumerate(zip(committed, derived, strict=True))
            for d in differences(a, b, f"{path}[{i}]")
        ]
    if committed != derived:
        return [f"{path}: {committed!r} committed, {derived!r} derived"]
    return []


def _field_differences(
    committed: object, derived: object, path: str, rel: float, abs_: float
) -> list[str]:
    out = []
    for field in dataclasses.fields(committed):  # type: ignore[arg-type]
        a, b = getattr(committed, field.name), getattr(derived, field.name)
        where = f"{path}.{field.name}"
        if isinstance(a, float) and isinstance(b, float):
            seconds = isinstance(committed, Fit) and field.name.endswith("_seconds")
            tolerance = max(abs_, FIT_ABSOLUTE_SECONDS) if seconds else abs_
            if not math.isclose(a, b, rel_tol=rel, abs_tol=tolerance):
                out.append(f"{where}: {a!r} committed, {b!r} derived")
        else:
            out.extend(differences(a, b, where))
    return out


def load_runs(data: Path) -> list[dict[str, Any]]:
    runs = []
    for path in sorted(data.glob("*.json")):
        for line in path.read_text().splitlines():
            if line.strip():
                runs.append(json.loads(line))
    return runs


def derive(runs: list[dict[str, Any]]) -> list[BuiltinProfile]:
    by_key: dict[tuple[str, str, int], list[dict[str, Any]]] = defaultdict(list)
    for run in runs:
        gpu = GPU_NAMES.get(run["gpu_name"])
        if gpu is not None:
            by_key[(run["model_id"], gpu, int(run["gpu_count"]))].append(run)
    profiles = []
    for size, models in PREFERRED.items():
        for gpu in sorted(GPU_NAMES.values()):
            counts = sorted({n for (m, g, n) in by_key if g == gpu and m in dict(models)})
            for count in counts:
                model, params = next((m, p) for m, p in models if (m, gpu, count) in by_key)
                profiles.append(
                    _profile(size, gpu, count, model, params, by_key[(model, gpu, count)])
                )
    return profiles


def _profile(
    size: str, gpu: str, count: int, model: str, params: float, runs: list[dict[str, Any]]
) -> BuiltinProfile:
    by_rate: dict[float, list[dict[str, Any]]] = defaultdict(list)
    for run in runs:
        by_rate[float(run["request_rate"])].append(run)
    points = []
    for rate in sorted(by_rate):
        group = by_rate[rate]
        points.append(
            MeasuredPoint(
                offered_rps=rate,
                served_rps=round(statistics.fmean(r["request_throughput"] for r in group), 4),
                ttft_p99_seconds=round(statistics.fmean(r["p99_ttft_ms"] for r in group) / 1e3, 5),
                tokens_per_second=round(
                    statistics.fmean(r["total_token_throughput"] for r in group), 1
                ),
                tpot_seconds=round(statistics.fmean(r["mean_tpot_ms"] for r in group) / 1e3, 6),
            )
        )
    completed = sum(r["completed"] for r in runs)
    result = fit_points(points)
    return BuiltinProfile(
        accelerator=gpu,
        size_class=size,
        gpus=count,
        model=model,
        parameters_billions=params,
        prompt_tokens=round(sum(r["total_input_tokens"] for r in runs) / completed, 1),
        output_tokens=round(sum(r["total_output_tokens"] for r in runs) / completed, 1),
        points=tuple(points),
        fit=result.fit,
        errors=result.errors,
        source=", ".join(
            sorted({f"vllm_200prompts*_{model.split('/')[-1]}_sharegpt_{count}x*.json"})
        ),
    )


def _num(x: float) -> str:
    return repr(float(f"{x:.7g}"))


def render(profiles: list[BuiltinProfile]) -> str:
    out = [
        '"""Built-in performance profiles. GENERATED by tools/derive_profiles.py: do not edit.',
        "",
        "Source: io.net / IOG Foundation AIBC 2025 raw vLLM 0.8.5 benchmark_serving results,",
        "../shared/data/iog-llm-inference-benchmarks/*.json (Apache-2.0), 200 ShareGPT prompts",
        "per run. Points: offered req/s, completed req/s, P99 TTFT s, tokens/s (prompt plus",
        "generated), mean TPOT s. Errors: model / measured - 1 at each point, for P99 TTFT,",
        "completed rate (= tokens/s) and TPOT; points marked excluded were left out of the fit",
        "(see gpufleet.planning.fitting).",
        '"""',
        "",
        "from gpufleet.planning.capacity import Fit",
        "from gpufleet.planning.fitting import BuiltinProfile, MeasuredPoint, PointError",
        "",
        "PROFILES: tuple[BuiltinProfile, ...] = (",
    ]
    for p in profiles:
        f = p.fit
        out += [
            "    BuiltinProfile(",
            f"        accelerator={p.accelerator!r},",
            f"        size_class={p.size_class!r},",
            f"        gpus={p.gpus},",
            f"        model={p.model!r},",
            f"        parameters_billions={p.parameters_billions!r},",
            f"        prompt_tokens={p.prompt_tokens!r},",
            f"        output_tokens={p.output_tokens!r},",
            "        points=(",
        ]
        for pt in p.points:
            out.append(
                f"            MeasuredPoint({pt.offered_rps!r}, {pt.served_rps!r}, "
                f"{pt.ttft_p99_seconds!r}, {pt.tokens_per_second!r}, {pt.tpot_seconds!r}),"
            )
        out += [
            "        ),",
            "        fit=Fit(",
            f"            saturation_rps={_num(f.saturation_rps)},",
            f"            sharpness={_num(f.sharpness)},",
            f"            ttft_base_seconds={_num(f.ttft_base_seconds)},",
            f"            ttft_queue_seconds={_num(f.ttft_queue_seconds)},",
            f"            ttft_queue_exponent={_num(f.ttft_queue_exponent)},",
            f"            tpot_base_seconds={_num(f.tpot_base_seconds)},",
            f"            tpot_queue_seconds={_num(f.tpot_queue_seconds)},",
            f"            tpot_queue_exponent={_num(f.tpot_queue_exponent)},",
            "        ),",
            "        errors=(",
        ]
        for e in p.errors:
            tpot = "None" if e.tpot is None else repr(round(e.tpot, 3))
            out.append(
                f"            PointError({e.offered_rps!r}, {round(e.ttft_p99, 3)!r}, "
                f"{round(e.tokens_per_second, 3)!r}, {tpot}, {e.excluded!r}),"
            )
        out += ["        ),", f"        source={p.source!r},", "    ),"]
    out += [")", ""]
    return _format("\n".join(out))


def _format(code: str) -> str:
    ruff = Path(sys.executable).parent / "ruff"
    done = subprocess.run(
        [str(ruff), "format", "--stdin-filename", str(OUTPUT), "-"],
        input=code,
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return done.stdout


def report(profiles: list[BuiltinProfile]) -> str:
    lines = [
        f"{'profile':<26}{'model':<34}{'rate':>5}{'P99 err':>9}{'tok/s err':>10}{'TPOT err':>9}"
    ]
    for p in profiles:
        key = f"{p.accelerator}/{p.size_class}/x{p.gpus}"
        for e in p.errors:
            tpot = "-" if e.tpot is None else f"{e.tpot:+.0%}"
            mark = f"  ({e.excluded})" if e.excluded else ""
            lines.append(
                f"{key:<26}{p.model.split('/')[-1][:33]:<34}{e.offered_rps:>5g}"
                f"{e.ttft_p99:>+9.0%}{e.tokens_per_second:>+10.0%}{tpot:>9}{mark}"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA, help="directory of the JSON runs")
    parser.add_argument("--check", action="store_true", help="fail if the table is stale")
    parser.add_argument("--quiet", action="store_true", help="do not print the error table")
    args = parser.parse_args(argv)
    profiles = derive(load_runs(args.data))
    if not args.quiet:
        print(report(profiles))
    if args.check:
        from gpufleet.planning.profile_data import PROFILES

        stale = differences(PROFILES, tuple(profiles))
        if stale:
            print(f"{OUTPUT.relative_to(ROOT)} is stale: run tools/derive_profiles.py")
            print("\n".join(f"  {line}" for line in stale[:20]))
            return 1
        return 0
    code = render(profiles)
    OUTPUT.write_text(code)
    print(f"Wrote {len(profiles)} profiles to {OUTPUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
