"""The bad-input table: each invalid pool is refused with a message naming the field."""

import pytest

from gpufleet.api.parse import InvalidPool, parse_pool
from tests.pools import InvalidCase, invalid_cases, load_example

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


# Near misses of the issue-19 rules: refusing these would refuse pools people run.
ACCEPTED = {
    "extra-arg-model-impl": {
        "spec.model.extraArgs": ["--model-impl=vllm", "--max-model-len", "8192"]
    },
    "extra-arg-port-lookalike": {"spec.model.extraArgs": ["--disable-log-requests", "--hosted=x"]},
    "half-billion-model": {"spec.model.name": "Qwen/Qwen2.5-0.5B-Instruct"},
    "wildcard-hostname": {"spec.routing.hostnames": ["*.example.com", "llm.example.com"]},
    "env-name-with-dot-dash": {"spec.model.env[0].name": "my.var-1_X"},
    "request-equal-limit": {
        "spec.tiers[0].resources": {"requests": {"cpu": "4"}, "limits": {"cpu": "4000m"}}
    },
    "memory-units-compared": {
        "spec.tiers[0].resources": {"requests": {"memory": "1G"}, "limits": {"memory": "1Gi"}}
    },
    "toleration-no-execute-seconds": {
        "spec.tiers[0].tolerations": [
            {"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}
        ]
    },
    "toleration-of-everything": {"spec.tiers[0].tolerations": [{"operator": "Exists"}]},
}


@pytest.mark.parametrize("changes", ACCEPTED.values(), ids=list(ACCEPTED))
def test_near_misses_are_accepted(changes: dict[str, object]) -> None:
    parse_pool(InvalidCase("ok", "", changes, []).apply(load_example()))
