"""Traces: the Azure file, class assignment, speedup and synthetic arrivals."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpufleet.sim.traces import (
    AssignBy,
    Shape,
    assign_classes,
    class_shares,
    cut,
    rate_curve,
    read_azure,
    refused_notes,
    synthetic,
    within_context,
)
from tests.pools import SHARED_DATA
from tests.unit.sim.factories import mixed_pool, trace

pytestmark = pytest.mark.timeout(2)

AZURE = SHARED_DATA / "traces" / "azure-llm-inference-2023-conv.csv"


@pytest.mark.timeout(10)
def test_the_azure_conversation_trace_reads_as_its_readme_says() -> None:
    azure = read_azure(AZURE)
    assert len(azure) == 19366
    assert np.all(np.diff(azure.arrival_seconds) >= 0)
    assert azure.arrival_seconds[0] == 0.0
    assert 3400 < azure.duration_seconds < 3700  # about one hour
    assert azure.prompt_tokens.mean() == pytest.approx(1155, rel=0.01)
    assert azure.output_tokens.mean() == pytest.approx(211, rel=0.01)


def test_azure_timestamps_keep_sub_second_order(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.9000000,10,5\n"
        "2023-11-16 18:15:46.1234567,0,7\n"
    )
    t = read_azure(path)
    assert t.arrival_seconds.tolist() == pytest.approx([0.0, 0.7765433])
    assert t.prompt_tokens.tolist() == [1, 10]  # a request costs at least one token


def test_a_file_without_the_azure_columns_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("time,prompt\n1,2\n")
    with pytest.raises(ValueError, match="ContextTokens"):
        read_azure(path)


def test_speedup_compresses_time_and_duration_cuts() -> None:
    t = trace([0.0, 10.0, 20.0, 30.0])
    fast = cut(t, speedup=2.0, duration_seconds=12.0)
    assert fast.arrival_seconds.tolist() == [0.0, 5.0, 10.0]


def test_vllm_refuses_a_prompt_of_the_context_or_more_and_caps_the_outputs() -> None:
    # vLLM 0.33: a prompt of max_model_len tokens or more leaves no room for an output token
    # and is refused with HTTP 400; a shorter one's output stops where the context ends.
    t = trace(
        [0.0, 1.0, 2.0, 3.0, 4.0],
        prompt=[100, 8191, 8192, 9000, 30000],
        output=[500, 500, 500, 500, 500],
        classes=[0, 1, 1, 0, 1],
    )
    served = within_context(t, 8192)
    assert served.prompt_tokens.tolist() == [100, 8191]
    assert served.output_tokens.tolist() == [500, 1]
    assert served.arrival_seconds.tolist() == [0.0, 1.0]
    assert served.class_index.tolist() == [0, 1]
    assert served.refused == {"realtime": 1, "batch": 2}
    again = within_context(served, 4096)  # refusals add up; outputs already capped stay
    assert again.prompt_tokens.tolist() == [100]
    assert again.refused == {"realtime": 1, "batch": 3}
    assert within_context(t, None) is t  # no --max-model-len: the context is not known
    [note] = refused_notes(served, 8192)
    assert "--max-model-len (8192 tokens)" in note
    assert "realtime 1 (50.00%), batch 2 (66.67%)" in note
    assert refused_notes(t, 8192) == []


def test_fractions_are_drawn_per_request_and_seeded() -> None:
    t = trace(np.arange(20000) * 0.1)
    spec = mixed_pool().spec
    a = assign_classes(t, spec, {"realtime": 0.3}, seed=1)
    b = assign_classes(t, spec, {"realtime": 0.3}, seed=1)
    c = assign_classes(t, spec, {"realtime": 0.3}, seed=2)
    assert a.classes == ("realtime", "batch")
    assert np.mean(a.class_mask("realtime")) == pytest.approx(0.3, abs=0.01)
    assert np.array_equal(a.class_index, b.class_index)
    assert not np.array_equal(a.class_index, c.class_index)


def test_by_size_the_shortest_prompts_go_to_the_highest_priority_class() -> None:
    prompts = list(range(1, 1001))
    t = trace(np.arange(1000.0), prompt=prompts[::-1])
    assigned = assign_classes(t, mixed_pool().spec, {"realtime": 0.3}, by=AssignBy.SIZE)
    realtime = assigned.prompt_tokens[assigned.class_mask("realtime")]
    batch = assigned.prompt_tokens[assigned.class_mask("batch")]
    assert len(realtime) == 300
    assert realtime.max() < batch.min()


def test_class_fractions_must_fit() -> None:
    spec = mixed_pool().spec
    assert class_shares(spec, {"realtime": 0.25}) == {"realtime": 0.25, "batch": 0.75}
    with pytest.raises(ValueError, match="unknown traffic class"):
        class_shares(spec, {"interactive": 0.3})
    with pytest.raises(ValueError, match="sum to 1"):
        class_shares(spec, {"realtime": 0.7, "batch": 0.7})


@pytest.mark.parametrize("shape", list(Shape), ids=[s.value for s in Shape])
def test_synthetic_traces_are_deterministic_and_hold_their_mean(shape: Shape) -> None:
    a = synthetic(shape, mean_rps=4.0, duration_seconds=3600, seed=7)
    b = synthetic(shape, mean_rps=4.0, duration_seconds=3600, seed=7)
    c = synthetic(shape, mean_rps=4.0, duration_seconds=3600, seed=8)
    assert np.array_equal(a.arrival_seconds, b.arrival_seconds)
    assert not np.array_equal(a.arrival_seconds, c.arrival_seconds)
    assert np.all(np.diff(a.arrival_seconds) >= 0)
    assert len(a) / 3600 == pytest.approx(4.0, rel=0.1)
    assert a.prompt_tokens.mean() == pytest.approx(1000, rel=0.15)
    assert a.output_tokens.mean() == pytest.approx(200, rel=0.15)


def test_a_burst_is_four_times_the_quiet_rate() -> None:
    _, rate = rate_curve(Shape.BURSTS, 2.0, 3600, [600.0])
    assert rate.mean() == pytest.approx(2.0)
    assert rate[620] == pytest.approx(4 * rate[100])


def test_diurnal_load_peaks_mid_trace() -> None:
    t = synthetic(Shape.DIURNAL, mean_rps=5.0, duration_seconds=3600, seed=0)
    counts = np.histogram(t.arrival_seconds, bins=6, range=(0, 3600))[0]
    assert counts[2] + counts[3] > 2.5 * (counts[0] + counts[5])


def test_a_flash_crowd_surges_then_decays() -> None:
    t = synthetic(Shape.FLASH_CROWD, mean_rps=2.0, duration_seconds=3600, seed=0)
    per_minute = np.histogram(t.arrival_seconds, bins=60, range=(0, 3600))[0]
    before, surge, after = per_minute[20], per_minute[25], per_minute[55]
    assert surge > 3 * before
    assert after < surge / 2


def test_a_workday_is_four_times_busier_from_nine_to_five_every_day() -> None:
    t, rate = rate_curve(Shape.WORKDAY, 3.0, 2 * 86400)
    assert rate.mean() == pytest.approx(3.0)
    hour = (t % 86400) / 3600
    assert np.allclose(rate[(hour >= 9) & (hour < 17)], 6.0)
    assert np.allclose(rate[(hour < 9) | (hour >= 17)], 1.5)
    assert rate[86400 + 9 * 3600] == rate[9 * 3600]  # the next day repeats it
