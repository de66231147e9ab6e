"""Why a tier's pods do not run, read from the cluster's own words, and the loop's backoff."""

from typing import Any

import pytest

from gpufleet.adapters.kube import api_message, tier_problems
from gpufleet.runtime import MAX_BACKOFF_SECONDS, backoff_seconds

pytestmark = pytest.mark.timeout(2)

FORBIDDEN = (
    'pods "p-h100-abc" is forbidden: violates PodSecurity "restricted:latest": '
    "allowPrivilegeEscalation != false"
)


def deployment(name: str, tier: str, *conditions: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"gpufleet.dev/tier": tier}},
        "status": {"conditions": list(conditions)},
    }


def pod(name: str, tier: str, reason: str, message: str = "") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"gpufleet.dev/tier": tier}},
        "status": {
            "phase": "Pending",
            "containerStatuses": [
                {"name": "vllm", "state": {"waiting": {"reason": reason, "message": message}}}
            ],
        },
    }


def test_replica_failure_names_the_admission_refusal() -> None:
    refused = {"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate"}
    problems = tier_problems(
        {"p-h100": deployment("p-h100", "h100", {**refused, "message": FORBIDDEN})}, []
    )
    [problem] = problems["h100"]
    assert problem.reason == "PodsRefused"
    assert "violates PodSecurity" in problem.message


@pytest.mark.parametrize(
    ("waiting", "reason"),
    [
        ("ImagePullBackOff", "ImagePullFailed"),
        ("ErrImagePull", "ImagePullFailed"),
        ("CrashLoopBackOff", "CrashLooping"),
        ("CreateContainerConfigError", "ContainerConfigInvalid"),
    ],
)
def test_waiting_containers_tell_the_cause(waiting: str, reason: str) -> None:
    problems = tier_problems(
        {}, [pod("a", "rtx4090", waiting, "back-off"), pod("b", "rtx4090", waiting)]
    )
    assert [p.reason for p in problems["rtx4090"]] == [reason], "one problem per reason"
    assert "pod a" in problems["rtx4090"][0].message


def test_containers_still_starting_are_no_problem() -> None:
    assert tier_problems({}, [pod("a", "h100", "ContainerCreating")]) == {}


def test_api_message_quotes_the_status_message() -> None:
    import json

    from kubernetes.client.exceptions import ApiException

    error = ApiException(status=422, reason="Unprocessable Entity")
    error.body = json.dumps({"message": "spec.hostnames[0]: Invalid value"})
    assert api_message(error) == "spec.hostnames[0]: Invalid value"
    assert api_message(ApiException(status=403, reason="Forbidden")) == "403 Forbidden"


def test_backoff_doubles_up_to_a_cap() -> None:
    assert [backoff_seconds(n) for n in (1, 2, 3, 4)] == [5.0, 10.0, 20.0, 40.0]
    assert backoff_seconds(50) == MAX_BACKOFF_SECONDS
