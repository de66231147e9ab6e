"""The latency and capacity model of one replica: the one model the planner and the simulator share.

A replica is a queue in front of a GPU that prefills prompts and decodes tokens. Its
*rate* (``rate_rps`` everywhere below) is the steady-state rate of requests routed to it
and completed, in requests per second. Request shape matters: a request costs the replica

    service_seconds(P, O) = prefill_seconds(P) + O * decode_seconds_per_token

of its time (P prompt tokens, O generated tokens), so its utilization is
``rho = rate * service_seconds`` and it saturates at ``1 / service_seconds``. The P99 time
to first token is a fixed part (overhead plus the prefill of the prompt, so it grows with
prompt length) plus a queueing part that grows without bound as rho -> 1:

    ttft_p99 = base(P) + queue(P, O) * (rho / (1 - rho)) ** m

``base``, ``queue``, ``m`` and the saturation rate are fitted per profile to the io.net
measurements (`gpufleet.planning.fitting`; the table and its fit errors are in
`gpufleet.planning.profile_data`); the split of the reference request's time between
prefill and decode comes from the GPU's compute (`gpufleet.planning.profiles`).
A *capacity factor* (feedback from observed latency, 1.0 = the profile) scales the
replica's speed: every time above is divided by it.

Head-of-line blocking: vLLM prefills waiting prompts first come, first served, so a short
prompt arriving behind (or during) the prefill of a long one waits for all of it. The fit
holds that wait for the benchmark's own prompts; a class sharing replicas with a class of
longer prompts waits for theirs:

    head_of_line_seconds(P_other) = prefill(2 * P_other) - prefill(P_reference)

(an arrival that lands in a prefill lands, on average, in a prompt twice the mean length
when lengths vary as much as an exponential: long prompts take more of the time). Pass it
as ``blocking_seconds`` to the latency and capacity methods. The simulator's engine checks
this against requests it serves one by one (`tests/unit/sim/test_head_of_line.py`): a
100 ms class cannot share an H100 with the Azure trace's long prompts.

Public API (the simulator codes against it; build a model with
`gpufleet.planning.profiles.replica_model(tier, model_spec)`)::

    m.service_seconds(prompt_tokens, output_tokens) -> float
    m.saturation_rps(prompt_tokens, output_tokens) -> float
    m.utilization(rate_rps, prompt_tokens, output_tokens) -> float
    m.ttft_p99_seconds(rate_rps, prompt_tokens, output_tokens) -> float   # inf when saturated
    m.ttft_p99_at_utilization(rho, prompt_tokens, output_tokens) -> float  # mixed loads
    m.tpot_seconds(rate_rps, prompt_tokens, output_tokens) -> float        # mean; inf: saturated
    m.capacity_rps(ttft_objective_seconds, prompt_tokens, output_tokens) -> float  # 0: not eligible
    m.max_utilization(ttft_objective_seconds, prompt_tokens, output_tokens) -> float
    m.head_of_line_seconds(other_prompt_tokens) -> float  # blocking_seconds= of the above
    m.tokens_per_second(rate_rps, prompt_tokens, output_tokens) -> float
    m.served_rps(offered_rps, prompt_tokens, output_tokens) -> float       # benchmark runs
    m.cost_per_million_tokens(price_per_replica_hour, rate_rps, prompt_tokens, output_tokens)
    m.energy_kwh_per_million_tokens(rate_rps, prompt_tokens, output_tokens)  # None: no watts
    m.with_capacity_factor(factor) -> ReplicaModel
    m.watts, m.model_load_seconds, m.gpus, m.measured, m.source, m.name

About the measurements behind it: each io.net run sent 200 requests at a Poisson rate and
counted completed requests over the whole run, drain of the last requests included. The
model attributes each run's P99 to the rate the run *completed* (lower than the rate it
was offered), which is conservative; `served_rps` maps an offered benchmark rate to the
completed rate the same way the runs did, so the model reproduces the runs' tokens/s and
$/Mtok (see `tests/unit/planning/test_profiles.py`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

# Never plan a replica above this utilization, whatever the objective: the fitted queueing
# curve is steep there and the io.net runs have no steady-state point beyond it.
MAX_UTILIZATION = 0.95
# "Eligible" means the objective holds at this near-zero utilization: about the lowest load
# the io.net runs measured (1 req/s on replicas saturating at 8-27 req/s). Below it the
# fitted curve is an extrapolation, and a replica that may only be this busy is no use.
MIN_ELIGIBLE_UTILIZATION = 0.10
SECONDS_PER_HOUR = 3600.0
# An arrival that lands in another class's prefill lands in a prompt this many times that
# class's mean length (the size-biased mean of exponentially distributed lengths).
HEAD_OF_LINE_LENGTH = 2.0


@dataclass(frozen=True)
class Fit:
    """Fitted parameters of one profile at its reference request shape."""

    saturation_rps: float  # completed requests/s a replica saturates at (reference shape)
    sharpness: float  # exponent of the offered -> completed curve of benchmark runs
    ttft_base_seconds: float  # P99 TTFT at zero load, reference prompt length
    ttft_queue_seconds: float  # scale of the queueing term
    ttft_queue_exponent: float  # m
    tpot_base_seconds: float = 0.0  # mean time per output token at zero load
    tpot_queue_seconds: float = 0.0
    tpot_queue_exponent: float = 1.0


def queue_pressure(rho: float) -> float:
    """rho / (1 - rho): 0 at idle, infinite at saturation."""
    if rho <= 0.0:
        return 0.0
    if rho >= 1.0:
        return math.inf
    return rho / (1.0 - rho)


def served_from_offered(offered_rps: float, saturation_rps: float, sharpness: float) -> float:
    """Completed rate of a benchmark run offered `offered_rps`: a soft minimum with saturation."""
    if offered_rps <= 0.0:
        return 0.0
    ratio = math.pow(offered_rps / saturation_rps, sharpness)
    return offered_rps / math.pow(1.0 + ratio, 1.0 / sharpness)


@dataclass(frozen=True)
class ReplicaModel:
    """Latency, capacity and cost of one replica of a tier (one profile, one capacity factor)."""

    name: str  # the profile, e.g. "RTX4090/8B/x1"
    fit: Fit
    prompt_tokens: float  # the reference request shape the fit was made at
    output_tokens: float
    prefill_seconds: float  # prefill time of the reference prompt (a part of the fit's base)
    gpus: int
    watts: float | None  # board power of the whole replica (all its GPUs); None: unknown
    model_load_seconds: float
    measured: bool = True  # False for derived profiles (H100 SXM), never presented as measured
    source: str = ""
    capacity_factor: float = 1.0
    # vLLM's per-step token budget and cap on running sequences on this tier (the
    # simulator's engine runs them; `profiles.replica_model` sets them per card and flags).
    max_batched_tokens: int = 2048
    max_running: int = 256

    def with_capacity_factor(self, factor: float) -> ReplicaModel:
        """The same replica running at `factor` (0 < factor <= 1) of the profile's speed."""
        return replace(self, capacity_factor=max(0.01, factor))

    # -- time a request costs ------------------------------------------------------------

    @property
    def _decode_seconds_per_token(self) -> float:
        reference = 1.0 / self.fit.saturation_rps
        return max(reference - self.prefill_seconds, 0.0) / self.output_tokens

    def prefill_seconds_for(self, prompt_tokens: float) -> float:
        """Prefill time of a prompt, at this capacity factor."""
        share = self.prefill_seconds * prompt_tokens / self.prompt_tokens
        return share / self.capacity_factor

    def service_seconds(self, prompt_tokens: float, output_tokens: float) -> float:
        """Replica time one request costs at saturation: prefill plus its share of decoding."""
        decode = output_tokens * self._decode_seconds_per_token
        return self.prefill_seconds_for(prompt_tokens) + decode / self.capacity_factor

    def saturation_rps(self, prompt_tokens: float, output_tokens: float) -> float:
        """The completed rate at which the replica's queue grows without bound."""
        return 1.0 / self.service_seconds(prompt_tokens, output_tokens)

    def utilization(self, rate_rps: float, prompt_tokens: float, output_tokens: float) -> float:
        """rho of a replica serving `rate_rps` requests of this shape."""
        return max(rate_rps, 0.0) * self.service_seconds(prompt_tokens, output_tokens)

    # -- latency -------------------------------------------------------------------------

    def ttft_base_seconds(self, prompt_tokens: float) -> float:
        """P99 TTFT at zero load: the fit's base with the reference prefill swapped for this one."""
        fixed = max(self.fit.ttft_base_seconds - self.prefill_seconds, 0.0) / self.capacity_factor
        return fixed + self.prefill_seconds_for(prompt_tokens)

    def _queue_seconds(self, prompt_tokens: float, output_tokens: float) -> float:
        # Waiting scales with the time a request holds the replica (as in M/G/1).
        reference = 1.0 / self.fit.saturation_rps
        return (
            self.fit.ttft_queue_seconds
            * self.service_seconds(prompt_tokens, output_tokens)
            / reference
        )

    def head_of_line_seconds(self, other_prompt_tokens: float) -> float:
        """Extra P99 wait behind another class's prompts of this mean length (0 if they are
        no longer than the benchmark's, whose wait the fit already holds)."""
        ahead = self.prefill_seconds_for(HEAD_OF_LINE_LENGTH * other_prompt_tokens)
        return max(ahead - self.prefill_seconds_for(self.prompt_tokens), 0.0)

    def ttft_p99_at_utilization(
        self,
        rho: float,
        prompt_tokens: float,
        output_tokens: float,
        *,
        blocking_seconds: float = 0.0,
    ) -> float:
        """P99 TTFT of requests of this shape on a replica at utilization rho (any mix),
        `blocking_seconds` behind other classes' longer prompts."""
        pressure = queue_pressure(rho)
        if math.isinf(pressure):
            return math.inf
        queue = self._queue_seconds(prompt_tokens, output_tokens)
        growth = math.pow(pressure, self.fit.ttft_queue_exponent)
        return self.ttft_base_seconds(prompt_tokens) + blocking_seconds + queue * growth

    def ttft_p99_seconds(
        self, rate_rps: float, prompt_tokens: float, output_tokens: float
    ) -> float:
        """P99 TTFT of a replica serving `rate_rps` requests of this shape (inf if saturated)."""
        rho = self.utilization(rate_rps, prompt_tokens, output_tokens)
        return self.ttft_p99_at_utilization(rho, prompt_tokens, output_tokens)

    def tpot_seconds(self, rate_rps: float, prompt_tokens: float, output_tokens: float) -> float:
        """Mean time per output token at this rate (inf if saturated)."""
        rho = self.utilization(rate_rps, prompt_tokens, output_tokens)
        pressure = queue_pressure(rho)
        if math.isinf(pressure):
            return math.inf
        fit = self.fit
        growth = math.pow(pressure, fit.tpot_queue_exponent)
        tpot = fit.tpot_base_seconds + fit.tpot_queue_seconds * growth
        return tpot / self.capacity_factor

    # -- an idle replica -----------------------------------------------------------------

    @property
    def step_floor_seconds(self) -> float:
        """The least one engine step takes: the profile's TPOT at zero load (reading the
        weights), and never less than one token's decode."""
        return max(self.fit.tpot_base_seconds / self.capacity_factor, self.service_seconds(0, 1))

    @property
    def idle_overhead_seconds(self) -> float:
        """TTFT outside the engine: the zero-load P99 less the wait for a step in progress
        (up to a floor: its runs at 1 req/s had decodes running) and the step prefilling
        the reference prompt."""
        floor = self.step_floor_seconds
        first = max(floor, self.prefill_seconds_for(self.prompt_tokens))
        return max(self.ttft_base_seconds(self.prompt_tokens) - floor - first, 0.0)

    def idle_ttft_seconds(self, prompt_tokens: float) -> float:
        """TTFT of a prompt reaching a replica with nothing running: the least it ever
        takes (`idle_ttft_seconds` below; the simulator's engine runs the same numbers)."""
        return idle_ttft_seconds(
            prompt_tokens,
            overhead=self.idle_overhead_seconds,
            step_floor=self.step_floor_seconds,
            prefill_per_token=self.prefill_seconds_for(1.0),
            max_batched_tokens=self.max_batched_tokens,
        )

    # -- capacity ------------------------------------------------------------------------

    def max_utilization(
        self,
        ttft_objective_seconds: float,
        prompt_tokens: float,
        output_tokens: float,
        *,
        blocking_seconds: float = 0.0,
    ) -> float:
        """Highest utilization at which P99 TTFT of this shape holds the objective; 0 if none.

        Capped at MAX_UTILIZATION; 0 when the objective does not hold even at
        MIN_ELIGIBLE_UTILIZATION (the tier is not eligible for the class). With
        `blocking_seconds`: sharing the replica with a class of longer prompts.
        """
        base = self.ttft_base_seconds(prompt_tokens) + blocking_seconds
        slack = ttft_objective_seconds - base
        if slack <= 0.0:
            return 0.0
        queue = self._queue_seconds(prompt_tokens, output_tokens)
        if queue <= 0.0:
            return MAX_UTILIZATION
        pressure = math.pow(slack / queue, 1.0 / self.fit.ttft_queue_exponent)
        rho = min(pressure / (1.0 + pressure), MAX_UTILIZATION)
        return rho if rho >= MIN_ELIGIBLE_UTILIZATION else 0.0

    def capacity_rps(
        self, ttft_objective_seconds: float, prompt_tokens: float, output_tokens: float
    ) -> float:
        """Highest rate a replica serves with P99 TTFT under the objective; 0: not eligible."""
        rho = self.max_utilization(ttft_objective_seconds, prompt_tokens, output_tokens)
        return rho / self.service_seconds(prompt_tokens, output_tokens)

    def eligible(
        self, ttft_objective_seconds: float, prompt_tokens: float, output_tokens: float
    ) -> bool:
        """Whether the replica holds the objective at near-zero load."""
        return self.max_utilization(ttft_objective_seconds, prompt_tokens, output_tokens) > 0.0

    # -- throughput, cost, energy --------------------------------------------------------

    def tokens_per_second(
        self, rate_rps: float, prompt_tokens: float, output_tokens: float
    ) -> float:
        """Prompt plus generated tokens/s at this rate (completions stop growing at saturation)."""
        rate = min(max(rate_rps, 0.0), self.saturation_rps(prompt_tokens, output_tokens))
        return rate * (prompt_tokens + output_tokens)

    def served_rps(self, offered_rps: float, prompt_tokens: float, output_tokens: float) -> float:
        """Completed rate of a 200-request benchmark run offered `offered_rps` (see module doc)."""
        saturation = self.saturation_rps(prompt_tokens, output_tokens)
        return served_from_offered(offered_rps, saturation, self.fit.sharpness)

    def cost_per_million_tokens(
        self,
        price_per_replica_hour: float,
        rate_rps: float,
        prompt_tokens: float,
        output_tokens: float,
    ) -> float:
        """Dollars per million tokens of one replica serving `rate_rps` (inf when idle)."""
        tokens = self.tokens_per_second(rate_rps, prompt_tokens, output_tokens)
        if tokens <= 0.0:
            return math.inf
        return price_per_replica_hour / (tokens * SECONDS_PER_HOUR) * 1e6

    def energy_kwh_per_million_tokens(
        self, rate_rps: float, prompt_tokens: float, output_tokens: float
    ) -> float | None:
        """kWh per million tokens at board power (an upper bound); None if power is unknown."""
        tokens = self.tokens_per_second(rate_rps, prompt_tokens, output_tokens)
        if self.watts is None:
            return None
        if tokens <= 0.0:
            return math.inf
        return kwh_per_million_tokens(self.watts, tokens)


def idle_ttft_seconds(
    prompt_tokens: float,
    *,
    overhead: float,
    step_floor: float,
    prefill_per_token: float,
    max_batched_tokens: int,
) -> float:
    """TTFT of a prompt on an engine with nothing running: the overhead, then the steps
    that prefill it in chunks of the token budget, each at least the floor. Any other
    state only adds to it (a step in progress to wait for, prompts ahead, running
    sequences decoded in the same steps)."""
    tokens = max(float(prompt_tokens), 1.0)
    full, rest = divmod(tokens, float(max_batched_tokens))
    steps = full * max(step_floor, max_batched_tokens * prefill_per_token)
    if rest > 0:
        steps += max(step_floor, rest * prefill_per_token)
    return overhead + steps


def kwh_per_million_tokens(watts: float, tokens_per_second: float) -> float:
    """Energy per million tokens of `watts` producing `tokens_per_second`."""
    joules_per_token = watts / tokens_per_second
    return joules_per_token * 1e6 / 3.6e6
