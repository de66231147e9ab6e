"""`gpufleet simulate`: replay a request trace against the pool's fleet, policy by policy.

    gpufleet simulate -f pool.yaml --trace trace.csv [--policy all|name,...] [--seed N]
        [--speedup X] [--realtime-fraction 0.3] [--duration S] [--plot out.png]
        [--preemption-notice-seconds N] [--output table|json]

`--trace` takes an Azure LLM trace CSV or `synthetic:KIND` (constant, diurnal, bursts,
flash-crowd, workday: several days with `--duration`) with `--rate`. Exit status: 0, or 2
for an invalid pool, trace or option.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gpufleet.commands.common import UsageError, load_pool, require_number


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "simulate",
        help="replay a request trace against the fleet: gpufleet vs baselines",
        description="Replay a request trace against a model of the pool's fleet (the same "
        "profiles the planner uses; cold starts, preemptions) under the real planner and "
        "baseline policies, side by side on the same trace and seed.",
    )
    parser.add_argument("-f", "--filename", type=Path, required=True, help="InferencePool YAML")
    parser.add_argument(
        "--trace",
        required=True,
        help="Azure LLM trace CSV (TIMESTAMP,ContextTokens,GeneratedTokens) or synthetic:KIND "
        "with KIND one of constant, diurnal, bursts, flash-crowd, workday",
    )
    parser.add_argument(
        "--policy",
        action="append",
        default=[],
        help="all (every one that applies to the pool: h100-only and rtx4090-only need a "
        "tier of that GPU type), or a comma-separated list of gpufleet, h100-only, "
        "rtx4090-only, static-split, utilization, oracle; repeatable (default: all)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of every random draw (0)")
    parser.add_argument(
        "--speedup", type=float, default=1.0, help="replay X times faster than recorded (1)"
    )
    parser.add_argument(
        "--duration", type=float, default=None, help="seconds of (sped-up) trace to replay"
    )
    parser.add_argument(
        "--realtime-fraction",
        type=float,
        default=None,
        help="share of requests in the class named realtime (default 0.3 when the pool has "
        "one; without one, the classes that match requests share 0.3 evenly); the default "
        "class takes the rest",
    )
    parser.add_argument(
        "--class-fraction",
        action="append",
        default=[],
        metavar="CLASS=F",
        help="share of requests in CLASS (repeatable); the default class takes the rest",
    )
    parser.add_argument(
        "--assign",
        choices=("fraction", "size"),
        default="fraction",
        help="classes by seeded draw (fraction) or shortest prompts to the highest priority "
        "class (size), same shares either way",
    )
    parser.add_argument(
        "--class-shapes",
        choices=("trace", "spec"),
        default="trace",
        help="trace: set each class's meanPromptTokens/meanOutputTokens to its mean in the "
        "trace, as a user who measured their traffic would (default); spec: keep the file's",
    )
    parser.add_argument("--rate", type=float, default=5.0, help="synthetic: mean req/s (5)")
    parser.add_argument(
        "--prompt-tokens", type=float, default=1000.0, help="synthetic: mean prompt (1000)"
    )
    parser.add_argument(
        "--output-tokens", type=float, default=200.0, help="synthetic: mean output (200)"
    )
    parser.add_argument(
        "--preemption-mean-hours",
        type=float,
        default=2.0,
        help="mean time a preemptible tier's node stays up (2; 0 disables preemption)",
    )
    parser.add_argument(
        "--preemption-outage-minutes",
        type=float,
        default=10.0,
        help="mean time a preempted node stays away (10)",
    )
    parser.add_argument(
        "--preemption-notice-seconds",
        type=float,
        default=0.0,
        help="how long before a preemptible node goes the cluster knows it (0: unnoticed). "
        "With a notice, every policy's replica on that node is evicted at the notice: it "
        "takes no new request and drains until the node goes (or for the pool's drain "
        "time, if shorter), and its replacement starts at once on another node",
    )
    parser.add_argument(
        "--balance",
        choices=("least-loaded", "round-robin"),
        default="least-loaded",
        help="how a tier spreads requests over its Ready replicas",
    )
    parser.add_argument(
        "--metrics",
        choices=("histogram", "exact"),
        default="histogram",
        help="P99 the policies see: histogram_quantile over vLLM's TTFT buckets, as the "
        "operator reads it from Prometheus (default), or the exact sample P99 (what-if)",
    )
    parser.add_argument(
        "--scrape-interval",
        type=float,
        default=15.0,
        metavar="SECONDS",
        help="how often Prometheus scrapes the vLLM pods, as the operator is told "
        "(--prometheus-scrape-interval, chart value prometheus.scrapeIntervalSeconds; both "
        "default to 15): each pass reads rates and P99s over an interval and at least four "
        "scrapes, so with a 15 s scrape and a 30 s "
        "interval a step shows at half its size at the first pass after it (default 15)",
    )
    parser.add_argument(
        "--queue-check",
        type=float,
        default=None,
        metavar="SECONDS",
        help="how often the operator's queue watch reads every tier's queue and prompt "
        "tokens/s and wakes an early pass of the gpufleet policy on a surge, as the "
        "operator's --queue-check-seconds; 0: off (default: the scrape interval)",
    )
    parser.add_argument("--plot", type=Path, default=None, help="write a PNG plot here")
    parser.add_argument("--output", choices=("table", "json"), default="table")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from gpufleet.api.parse import InvalidPool

    try:
        return _run(args)
    except InvalidPool as invalid:
        print(f"error: {args.filename}: {invalid}", file=sys.stderr)
        return 2
    except (UsageError, ValueError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


# The share of requests the classes that match requests get by default (a class named
# realtime, or else all of them evenly).
DEFAULT_MATCHED_SHARE = 0.3


def _fractions(args: argparse.Namespace, classes: Sequence[Any]) -> dict[str, float]:
    """Each class's share of the trace's requests from the options; by default the class
    named realtime takes 30%, or, without one, the classes that match requests (headers)
    share the same 30% evenly; the default class takes the rest."""
    class_names = [c.name for c in classes]
    fractions: dict[str, float] = {}
    for item in args.class_fraction:
        name, sep, value = item.partition("=")
        if not sep:
            raise UsageError(f"--class-fraction {item}: expected CLASS=F")
        try:
            fractions[name] = float(value)
        except ValueError:
            raise UsageError(f"--class-fraction {item}: {value!r} is not a number") from None
    if args.realtime_fraction is not None:
        if "realtime" not in class_names:
            raise UsageError("--realtime-fraction: the pool has no class named realtime")
        fractions["realtime"] = args.realtime_fraction
    elif not fractions and "realtime" in class_names:
        fractions["realtime"] = DEFAULT_MATCHED_SHARE
    elif not fractions:
        # No class named realtime: the classes that match requests share the same 30%
        # evenly, so that every class of the pool is simulated (the default class, the
        # rest). A class the trace sent nothing would read as an objective met by nobody.
        matched = [c.name for c in classes if c.match is not None]
        fractions = {c: DEFAULT_MATCHED_SHARE / len(matched) for c in matched}
    return fractions


def _load_trace(args: argparse.Namespace, pool: Any, context: int | None) -> Any:
    from gpufleet.sim import traces

    source: str = args.trace
    if source.startswith("synthetic:"):
        kind = source.removeprefix("synthetic:")
        try:
            shape = traces.Shape(kind)
        except ValueError:
            kinds = ", ".join(s.value for s in traces.Shape)
            raise UsageError(
                f"--trace {source}: unknown synthetic load; use one of {kinds}"
            ) from None
        trace = traces.synthetic(
            shape,
            mean_rps=args.rate,
            duration_seconds=(args.duration or 3600.0) * args.speedup,
            mean_prompt_tokens=args.prompt_tokens,
            mean_output_tokens=args.output_tokens,
            seed=args.seed,
        )
    else:
        trace = traces.read_azure(Path(source))
    trace = traces.cut(trace, speedup=args.speedup, duration_seconds=args.duration)
    if len(trace) == 0:
        raise UsageError(f"--trace {source}: no requests in the part replayed")
    trace = traces.assign_classes(
        trace,
        pool.spec,
        _fractions(args, pool.spec.traffic_classes),
        by=traces.AssignBy(args.assign),
        seed=args.seed,
    )
    served = traces.within_context(trace, context)
    if len(served) == 0:
        raise UsageError(
            f"--trace {source}: every prompt is at least the pool's --max-model-len "
            f"({context} tokens), which vLLM refuses; raise it in spec.model.extraArgs"
        )
    return served


def _context(pool: Any) -> int | None:
    """The context the pool's vLLM flags set (--max-model-len; None where they set none)."""
    from gpufleet.api.flags import max_model_len_in
    from gpufleet.desired.manifests import vllm_args

    return max_model_len_in(vllm_args(pool, pool.spec.tiers[0]))


def _with_trace_shapes(pool: Any, trace: Any) -> tuple[Any, list[str]]:
    """The pool with each class's mean lengths set from the trace; notes of what changed."""
    classes = []
    notes = []
    for ci, c in enumerate(pool.spec.traffic_classes):
        mask = trace.class_index == ci
        if not mask.any():
            classes.append(c)
            continue
        prompt = max(1, round(float(np.mean(trace.prompt_tokens[mask]))))
        output = max(1, round(float(np.mean(trace.output_tokens[mask]))))
        notes.append(
            f"class {c.name}: meanPromptTokens {c.mean_prompt_tokens} -> {prompt}, "
            f"meanOutputTokens {c.mean_output_tokens} -> {output} (the trace's means)"
        )
        classes.append(
            c.model_copy(update={"mean_prompt_tokens": prompt, "mean_output_tokens": output})
        )
    spec = pool.spec.model_copy(update={"traffic_classes": classes})
    return pool.model_copy(update={"spec": spec}), notes


def _check_numbers(args: argparse.Namespace) -> None:
    """Each numeric flag in its range, named when not (before anything is loaded)."""
    for flag, value, above, least, means in (
        ("--rate", args.rate, 0.0, None, "req/s"),
        ("--speedup", args.speedup, 0.0, None, ""),
        ("--scrape-interval", args.scrape_interval, 0.0, None, "seconds"),
        ("--queue-check", args.queue_check, None, 0.0, "seconds"),
        ("--duration", args.duration, 0.0, None, "seconds"),
        ("--prompt-tokens", args.prompt_tokens, None, 1.0, "token"),
        ("--output-tokens", args.output_tokens, None, 1.0, "token"),
        ("--preemption-mean-hours", args.preemption_mean_hours, None, 0.0, "hours"),
        ("--preemption-outage-minutes", args.preemption_outage_minutes, 0.0, None, "minutes"),
        ("--preemption-notice-seconds", args.preemption_notice_seconds, None, 0.0, "seconds"),
    ):
        require_number(flag, value, above=above, at_least=least, means=means)


@dataclass(frozen=True)
class Outcome:
    """A finished `gpufleet simulate`: what it prints, for the command and the benchmark."""

    results: list[Any]  # RunResult per policy, in the order asked
    summaries: list[Any]  # report.Summary per policy
    criteria: list[Any]  # report.Criterion per line of the bar
    meta: dict[str, Any]
    spec: Any  # the InferencePoolSpec simulated (class lengths from the trace by default)


def run(args: argparse.Namespace) -> Outcome:
    """Parse, simulate every policy asked for and summarize; UsageError/InvalidPool on bad input."""
    from gpufleet.planning.profiles import ProfileNotFound
    from gpufleet.sim import report, traces
    from gpufleet.sim.engine import Balance, SimConfig, models_of
    from gpufleet.sim.fleet import Preemption
    from gpufleet.sim.policies import POLICY_NAMES, applicable, make_policies

    started = time.perf_counter()
    _check_numbers(args)
    pool = load_pool(args.filename)
    context = _context(pool)
    trace = _load_trace(args, pool, context)
    notes = traces.refused_notes(trace, context)
    if args.class_shapes == "trace":
        pool, shaped = _with_trace_shapes(pool, trace)
        notes += shaped
    try:
        models = models_of(pool)
    except ProfileNotFound as missing:
        raise UsageError(f"{args.filename}: {missing}") from None
    asked = [p.strip() for text in args.policy or ["all"] for p in text.split(",") if p.strip()]
    if not asked:
        raise UsageError(f"--policy: name one or more of all, {', '.join(POLICY_NAMES)}")
    if "all" in asked:
        names, left_out = applicable(pool.spec)
        notes += left_out
    else:
        names = list(dict.fromkeys(asked))  # each once, in the order asked
    unknown = [n for n in names if n not in POLICY_NAMES]
    if unknown:
        raise UsageError(f"--policy: unknown {', '.join(unknown)}; use {', '.join(POLICY_NAMES)}")
    from gpufleet.planning.planner import plan

    interval = float(pool.spec.scaling.interval_seconds)
    policies = make_policies(names, pool, models, trace, interval, plan)
    config = SimConfig(
        seed=args.seed,
        preemption=Preemption(
            mean_up_seconds=args.preemption_mean_hours * 3600.0,
            mean_down_seconds=args.preemption_outage_minutes * 60.0,
            notice_seconds=args.preemption_notice_seconds,
        ),
        balance=Balance(args.balance),
        exact_quantiles=args.metrics == "exact",
        scrape_interval_seconds=args.scrape_interval,
        queue_check_seconds=args.queue_check,
    )
    results = _simulate_all(policies, pool, trace, config, models, progress=not args.no_progress)
    summaries = [report.summarize(r, pool.spec, trace.refused) for r in results]
    criteria = report.bar(summaries)
    meta = _meta(args, pool, trace, notes, time.perf_counter() - started)
    meta["maxModelLen"] = context
    meta["attainmentCeiling"] = report.attainment_bound(pool.spec, models, trace)
    meta["queueCheckSeconds"] = config.queue_check_period
    return Outcome(results, summaries, criteria, meta, pool.spec)


def _run(args: argparse.Namespace) -> int:
    from gpufleet.sim import report

    outcome = run(args)
    if args.plot is not None:
        from gpufleet.sim.plot import plot

        plot(outcome.results, outcome.spec, args.plot)
    if args.output == "json":
        print(
            json.dumps(report.to_json(outcome.summaries, outcome.meta, outcome.criteria), indent=2)
        )
    else:
        report.print_table(outcome.summaries, outcome.criteria, outcome.meta)
    return 0


def _simulate_all(
    policies: Sequence[Any], pool: Any, trace: Any, config: Any, models: Any, *, progress: bool
) -> list[Any]:
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from gpufleet.sim.engine import simulate

    interval = float(pool.spec.scaling.interval_seconds)
    steps = max(1, int(np.ceil((trace.duration_seconds + 1e-9) / interval)))
    results = []
    with Progress(
        TextColumn("[bold]{task.description:<14}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} intervals"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        disable=not progress,
        transient=False,
    ) as bar:
        for policy in policies:
            task = bar.add_task(policy.name, total=steps)

            def tick(task: Any = task) -> None:
                bar.advance(task)

            results.append(simulate(pool, trace, policy, config, models=models, on_interval=tick))
    return results


def _meta(
    args: argparse.Namespace, pool: Any, trace: Any, notes: list[str], wall: float
) -> dict[str, Any]:
    from gpufleet.sim.metrics import window_seconds

    shares = {
        name: float(np.mean(trace.class_index == ci)) for ci, name in enumerate(trace.classes)
    }
    return {
        "pool": str(args.filename),
        "trace": trace.source,
        "requests": len(trace),
        "durationSeconds": trace.duration_seconds,
        "classShares": shares,
        "assign": args.assign,
        "metrics": args.metrics,
        "seed": args.seed,
        "speedup": args.speedup,
        "intervalSeconds": pool.spec.scaling.interval_seconds,
        "scrapeIntervalSeconds": args.scrape_interval,
        "metricsWindowSeconds": window_seconds(
            float(pool.spec.scaling.interval_seconds), args.scrape_interval
        ),
        "preemption": {
            "meanUpHours": args.preemption_mean_hours,
            "meanOutageMinutes": args.preemption_outage_minutes,
            "noticeSeconds": args.preemption_notice_seconds,
        },
        "refused": dict(trace.refused),
        "notes": notes,
        "wallSeconds": wall,
    }
