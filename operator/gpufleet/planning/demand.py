"""Per-class demand inferred from per-tier token rates and the live routing weights (pure).

vLLM counts tokens per pod, not per traffic class. Without a class's own demand query, a
tier's tokens/s is the sum of what each class's weight sends it:

    tokens[t] = sum_c demand[c] * weight[c, t] / 100

`infer_demand` solves this for the classes by multiplicative (EM) updates started from the
last planned demand: exact when the weights tell the classes apart, and when they do not
(every class on the same tier), the split of the last pass is kept. Classes measured by
their own query are subtracted first. A class with no weight anywhere cannot be seen: None.

A saturated tier counts the tokens it *served*, its capacity, not its demand: the rest
waits in its queue. That queue is not demand to plan for every interval but a backlog
to drain once (`planning.replicas`): `backlog_tokens` prices each waiting request at the
mean size of the classes the tier serves and gives each class its share. Pricing them at
the tokens the tier served per request completed over-counts them many times when a queue
forms (prefills run ahead of completions), and a fleet would buy for a demand it never had.

`prompt_share` and `split_demand` split one tokens/s figure into prompt and generated
tokens by the class's mean lengths. `planning.observed.observe_classes` puts these
together into what the planner reads per class.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpufleet.api.types import TrafficClass
from gpufleet.planning.records import ClassDemand

_ITERATIONS = 200


def prompt_share(traffic_class: TrafficClass) -> float:
    """The share of a class's tokens that are prompt, from its mean prompt and output lengths.

    A class's demand comes as one tokens/s figure (its demandQuery, `gpufleet plan
    --demand`) or as prompt and generated parts inferred separately; the planner sizes
    prefill and decode apart, so the one figure is split by this share.
    """
    prompt, output = traffic_class.mean_prompt_tokens, traffic_class.mean_output_tokens
    return prompt / (prompt + output)


def split_demand(traffic_class: TrafficClass, tokens_per_second: float) -> ClassDemand:
    """A class's tokens/s as prompt and generated tokens/s, by `prompt_share`."""
    share = prompt_share(traffic_class)
    return ClassDemand(tokens_per_second * share, tokens_per_second * (1 - share))


def infer_demand(
    tier_tokens: Mapping[str, float | None],
    weights: Mapping[str, Mapping[str, float]],
    prior: Mapping[str, float],
    known: Mapping[str, float] | None = None,
) -> dict[str, float | None]:
    """Tokens/s per class not in `known`, from tier tokens/s and class -> tier -> weight."""
    known = known or {}
    shares = {
        c: {t: w / 100.0 for t, w in ws.items() if w > 0}
        for c, ws in weights.items()
        if c not in known
    }
    residual = {t: max(v or 0.0, 0.0) for t, v in tier_tokens.items()}
    for c, value in known.items():
        for t, w in weights.get(c, {}).items():
            if t in residual:
                residual[t] = max(residual[t] - value * w / 100.0, 0.0)
    seen = [c for c, s in shares.items() if s]
    result: dict[str, float | None] = {c: None for c in shares if c not in seen}
    if not seen:
        return result
    total = sum(residual.get(t, 0.0) for c in seen for t in shares[c]) or 1.0
    # Start from the last split; every class gets at least 1% so a woken class can grow.
    floor = 0.01 * total / len(seen)
    demand = {c: max(prior.get(c, 0.0), floor) if prior.get(c) else total / len(seen) for c in seen}
    for _ in range(_ITERATIONS):
        expected = {t: sum(demand[c] * shares[c].get(t, 0.0) for c in seen) for t in residual}
        demand = {
            c: sum(
                residual[t] * demand[c] * share / expected[t]
                for t, share in shares[c].items()
                if t in residual and expected[t] > 0
            )
            for c in seen
        }
    result.update(demand)
    return result


def backlog_tokens(
    waiting: Mapping[str, float | None],
    weights: Mapping[str, Mapping[str, int]],
    demand: Mapping[str, float | None],
    tokens_per_request: Mapping[str, float],
) -> dict[str, float]:
    """Tokens of each class's requests waiting in the tiers' queues.

    A tier's waiting requests are split over the classes it serves by each class's share
    of its traffic (demand x weight; by weight alone when there is no demand reading), and
    priced at that class's mean prompt plus output tokens.
    """
    backlog = dict.fromkeys(tokens_per_request, 0.0)
    for tier, count in waiting.items():
        if not count or count <= 0:
            continue
        shares = {
            c: (demand.get(c) or 0.0) * ws.get(tier, 0) / 100.0
            for c, ws in weights.items()
            if ws.get(tier, 0) > 0 and c in tokens_per_request
        }
        if sum(shares.values()) <= 0:
            shares = {
                c: float(ws.get(tier, 0))
                for c, ws in weights.items()
                if ws.get(tier, 0) > 0 and c in tokens_per_request
            }
        total = sum(shares.values())
        for c, share in shares.items():
            backlog[c] += count * share / total * tokens_per_request[c]
    return backlog
