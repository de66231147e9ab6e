"""Counting every Kubernetes API request a client makes, by verb and status code.

It wraps the kubernetes client's `ApiClient.call_api`, the one method every request goes
through, as client-go's `rest_client_requests_total` counts at its transport: reads,
writes and Lease renewals all show, each with the HTTP status it got (0 when no answer
came: a refused connection or a timeout). Kopf's watch streams use their own connection
and are not counted here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def count_requests(api_client: Any, on_request: Callable[[str, int], None]) -> None:
    """Call `on_request(verb, code)` once for each request of `api_client`."""
    call_api = api_client.call_api

    def counted(*args: Any, **kwargs: Any) -> Any:
        verb = str(args[0] if args else kwargs.get("method", "")).upper()
        try:
            response = call_api(*args, **kwargs)
        except Exception as error:
            on_request(verb, int(getattr(error, "status", 0) or 0))
            raise
        on_request(verb, int(getattr(response, "status", 0) or 0))
        return response

    api_client.call_api = counted
