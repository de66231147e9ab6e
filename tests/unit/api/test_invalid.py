"""The bad-input table: each invalid pool is refused with a message naming the field."""

import pytest

from gpufleet.api.parse import InvalidPool, parse_pool
from tests.pools import ACCEPTED, InvalidCase, invalid_cases, load_example

pytestmark = pytest.mark.timeout(2)

CASES = invalid_cases()


def test_table_has_at_least_25_cases() -> None:
    assert len(CASES) >= 25
    assert len({c.id for c in CASES}) == len(CASES)


def test_base_pool_is_valid() -> None:
    parse_pool(load_example())


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_invalid_pool_is_refused_naming_the_field(case: InvalidCase) -> None:
    body = case.apply(load_example())
    with pytest.raises(InvalidPool) as refused:
        parse_pool(body)
    assert case.field in str(refused.value), str(refused.value)


def test_all_problems_are_reported_at_once() -> None:
    body = load_example()
    body["spec"]["tiers"][0]["minReplicas"] = -1
    body["spec"]["scaling"]["intervalSeconds"] = 1
    with pytest.raises(InvalidPool) as refused:
        parse_pool(body)
    assert len(refused.value.problems) == 2
    assert "spec.tiers[0].minReplicas" in str(refused.value)
    assert "spec.scaling.intervalSeconds" in str(refused.value)


def test_unreadable_status_does_not_fail_the_parse() -> None:
    body = load_example()
    body["status"] = {"tiers": "not a list"}
    pool = parse_pool(body)
    assert pool.status.tiers == []


@pytest.mark.parametrize("changes", ACCEPTED.values(), ids=list(ACCEPTED))
def test_near_misses_are_accepted(changes: dict[str, object]) -> None:
    parse_pool(InvalidCase("ok", "", changes, []).apply(load_example()))


@pytest.mark.parametrize(
    "args",
    [
        ["--max-model-len", "300"],  # the apiserver's rule reads only the one `=N` form
        ["--max-model-len=4k", "--max_model_len=0.3k"],  # vLLM's: the last one, 300 tokens
    ],
)
def test_class_lengths_over_any_form_of_the_context_are_refused_by_the_operator(
    args: list[str],
) -> None:
    body = load_example()
    body["spec"]["model"]["extraArgs"] = args
    with pytest.raises(InvalidPool) as refused:
        parse_pool(body)
    assert "trafficClasses[0]: every traffic class's meanPromptTokens" in str(refused.value)
    assert "(it is 300; realtime's lengths add up to 400)" in str(refused.value)
