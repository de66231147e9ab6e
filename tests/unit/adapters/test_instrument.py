"""Every request of a client counted once, by verb and the status code it got."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from gpufleet.adapters.instrument import count_requests


def test_each_request_is_counted_with_its_verb_and_code_errors_included() -> None:
    answers: list[Any] = [
        SimpleNamespace(status=200),
        SimpleNamespace(status=409),  # the client raises for it later, when it reads it
        ApiException(status=0, reason="connection refused"),
    ]

    class Api:
        def call_api(self, method: str, url: str, **kwargs: Any) -> Any:
            answer = answers.pop(0)
            if isinstance(answer, Exception):
                raise answer
            return answer

    api = Api()
    seen: list[tuple[str, int]] = []
    count_requests(api, lambda verb, code: seen.append((verb, code)))
    assert api.call_api("GET", "/apis").status == 200
    assert api.call_api(method="patch", url="/apis/x").status == 409
    with pytest.raises(ApiException):
        api.call_api("PUT", "/apis/x")
    assert seen == [("GET", 200), ("PATCH", 409), ("PUT", 0)]


def test_the_kubernetes_client_sends_every_request_through_call_api() -> None:
    """The wrapper's one premise: the generated APIs call `ApiClient.call_api` with the
    method first (a client upgrade that changed that would stop the counting)."""
    from kubernetes import client

    api_client = ApiClient()
    calls: list[str] = []

    def call_api(*args: Any, **kwargs: Any) -> Any:
        calls.append(str(args[0] if args else kwargs.get("method")))
        raise ApiException(status=0, reason="no server here")

    api_client.call_api = call_api  # type: ignore[method-assign]
    seen: list[tuple[str, int]] = []
    count_requests(api_client, lambda verb, code: seen.append((verb, code)))
    with pytest.raises(ApiException):
        client.CoreV1Api(api_client).read_namespace("default")
    assert calls == ["GET"] and seen == [("GET", 0)]
