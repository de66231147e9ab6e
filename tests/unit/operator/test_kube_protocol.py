"""The in-memory FakeKube and the real KubeAdapter both are what the reconciler calls a Kube.

mypy proves it for KubeAdapter (gpufleet run hands one to the Reconciler) and, for the
fake, on the typed assignment below when run on this file:
`mypy tests/unit/operator/test_kube_protocol.py`. The configured mypy run checks the
package only, so the test also compares the methods' parameters at run time.
"""

from __future__ import annotations

import inspect

import pytest

from gpufleet.adapters.kube import KubeAdapter
from gpufleet.reconcile import Kube
from tests.fakes import FakeKube

pytestmark = pytest.mark.timeout(2)


def members() -> list[str]:
    return sorted(
        name
        for name, value in vars(Kube).items()
        if inspect.isfunction(value) and not name.startswith("_")
    )


def test_the_fake_is_a_kube() -> None:
    kube: Kube = FakeKube()  # mypy: the fake conforms to the protocol, structurally
    assert kube.get_pool("default", "nothing") is None


@pytest.mark.parametrize("implementation", [FakeKube, KubeAdapter])
def test_implements_every_method_with_the_same_parameters(implementation: type) -> None:
    assert members(), "Kube declares the methods a pass calls"
    for name in members():
        method = getattr(implementation, name, None)
        assert method is not None, f"{implementation.__name__} has no {name}"
        wanted = [
            (p.name, p.kind) for p in inspect.signature(getattr(Kube, name)).parameters.values()
        ]
        found = [(p.name, p.kind) for p in inspect.signature(method).parameters.values()]
        assert found == wanted, f"{implementation.__name__}.{name}"
