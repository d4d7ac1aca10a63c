"""The exec guard against the real API server: exec and attach into istio-init are refused naming
the exec guard, for pods created before it too (the checklist's own kubectl check); exec into any
other container is not the guard's business."""

from __future__ import annotations

import pytest
from podguard_support import Guard
from podguard_support import guard as guard  # a module fixture: one guarded namespace here
from podguard_support import running_pod as running_pod  # a module fixture

from tenant_platform.kube import errors

pytestmark = pytest.mark.cluster


def exec_path(namespace: str, pod_name: str, container: str | None, sub: str = "exec") -> str:
    query = "command=sh&stdin=true" if sub == "exec" else "stdin=true"
    if container is not None:
        query = f"container={container}&{query}"
    return f"/api/v1/namespaces/{namespace}/pods/{pod_name}/{sub}?{query}"


@pytest.mark.parametrize("sub", ["exec", "attach"])
def test_checklist_exec_into_istio_init_is_forbidden_naming_the_exec_guard(guard: Guard, sub: str) -> None:
    result = guard.control_plane.kubectl(
        guard.as_installer,
        "create",
        "--raw",
        exec_path(guard.namespace, "x", "istio-init", sub),
        "-f",
        "/dev/null",
        check=False,
    )
    assert result.returncode != 0
    assert "Error from server (Forbidden)" in result.stderr, result.stderr
    assert guard.names.exec_guard in result.stderr
    assert f"{sub} into container istio-init of pod x is not allowed" in result.stderr


@pytest.mark.parametrize("container", ["app", "istio-proxy", None])
def test_exec_into_other_containers_is_not_refused_by_the_guard(guard: Guard, container: str | None) -> None:
    result = guard.control_plane.kubectl(
        guard.as_installer,
        "create",
        "--raw",
        exec_path(guard.namespace, "x", container),
        "-f",
        "/dev/null",
        check=False,
    )
    assert result.returncode != 0
    assert "Error from server (NotFound)" in result.stderr, result.stderr
    assert guard.names.exec_guard not in result.stderr


def test_exec_guard_applies_to_existing_pods(guard: Guard, running_pod: str) -> None:
    with pytest.raises(errors.Forbidden) as caught:
        guard.installer.request("POST", exec_path(guard.namespace, running_pod, "istio-init"))
    assert guard.names.exec_guard in caught.value.message
