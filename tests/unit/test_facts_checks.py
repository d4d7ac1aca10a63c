"""Pure logic behind the facts and preflight steps: class selection, API addresses, pull-secret
parsing, probe targets, the storage test manifests, and the check table."""

from __future__ import annotations

import base64
import json
import socket
import threading

import pytest

from tenant_platform import preflight
from tenant_platform.concerns.apiaddresses.verdict import compute, sort_cidrs
from tenant_platform.concerns.pullsecrets.verdict import check_secret
from tenant_platform.concerns.storage import manifests
from tenant_platform.concerns.storage.verdict import describe_pod, select_storage_class
from tenant_platform.framework import probes

GA = "storageclass.kubernetes.io/is-default-class"
BETA = "storageclass.beta.kubernetes.io/is-default-class"


def sc(name: str, *, default: str | None = None, mode: str = "Immediate") -> dict:
    meta: dict = {"name": name}
    if default:
        meta["annotations"] = {default: "true"}
    return {"metadata": meta, "provisioner": "example.com/p", "volumeBindingMode": mode}


@pytest.mark.parametrize(
    ("classes", "requested", "reason", "name"),
    [
        pytest.param([sc("a"), sc("b", default=GA)], "", "StorageClassFound", "b", id="one default"),
        pytest.param([sc("a"), sc("b", default=BETA)], "", "StorageClassFound", "b", id="beta default annotation"),
        pytest.param([sc("a"), sc("b", default=GA)], "a", "StorageClassFound", "a", id="named non-default"),
        pytest.param([sc("a")], "zzz", "StorageClassNotFound", "", id="named missing"),
        pytest.param([sc("a"), sc("b")], "", "NoDefaultStorageClass", "", id="no default"),
        pytest.param([], "", "NoDefaultStorageClass", "", id="no classes"),
        pytest.param([sc("a", default=GA), sc("b", default=BETA)], "", "AmbiguousDefaultStorageClass", "", id="two"),
    ],
)
def test_select_storage_class(classes: list, requested: str, reason: str, name: str) -> None:
    sel = select_storage_class(classes, requested)
    assert sel.reason == reason
    assert sel.name == name
    assert sel.ok == bool(name)


def test_select_storage_class_messages_name_what_is_wrong() -> None:
    missing = select_storage_class([sc("a")], "fast")
    assert "fast" in missing.message and "spec.storage.storageClassName" in missing.message and "a" in missing.message
    two = select_storage_class([sc("x", default=GA), sc("y", default=GA)], "")
    assert "x, y" in two.message


def test_wait_for_first_consumer_is_noted() -> None:
    sel = select_storage_class([sc("lp", default=GA, mode="WaitForFirstConsumer")], "")
    assert sel.volume_binding_mode == "WaitForFirstConsumer"
    assert "WaitForFirstConsumer" in sel.message
    assert "WaitForFirstConsumer" not in sel.summary


def test_describe_pod_names_the_blocker() -> None:
    pending = {
        "metadata": {"name": "p"},
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "message": "0/3 nodes are available"}],
        },
    }
    assert describe_pod(pending) == "pod p is Pending (not scheduled: 0/3 nodes are available)"
    pulling = {
        "metadata": {"name": "p"},
        "spec": {"nodeName": "n1"},
        "status": {
            "phase": "Pending",
            "containerStatuses": [{"state": {"waiting": {"reason": "ErrImagePull", "message": "no route"}}}],
        },
    }
    assert describe_pod(pulling) == "pod p is Pending (container waiting: ErrImagePull (no route))"
    assert describe_pod(None) == "not created"


def test_storage_test_pods_are_restricted_and_sidecar_free() -> None:
    pod = manifests.render_pod(platform_name="tp", platform_uid="u", namespace="ns", attempt=7, role="write")
    spec = pod["spec"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    container = spec["containers"][0]
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert pod["metadata"]["annotations"]["sidecar.istio.io/inject"] == "false"
    assert spec["volumes"][0]["persistentVolumeClaim"]["claimName"] == "tp-storage-verify-7"
    reader = manifests.render_pod(platform_name="tp", platform_uid="u", namespace="ns", attempt=7, role="read")
    assert reader["spec"]["containers"][0]["env"] == container["env"]
    with pytest.raises(ValueError):
        manifests.render_pod(platform_name="tp", platform_uid="u", namespace="ns", attempt=7, role="other")


# ---- API addresses -----------------------------------------------------------------------------


def service(ips: list[str]) -> dict:
    return {"spec": {"clusterIPs": ips, "ports": [{"port": 443, "targetPort": 6443}]}}


def eps(*endpoints: tuple[list[str], bool | None], port: int = 6443) -> dict:
    return {
        "ports": [{"port": port}],
        "endpoints": [
            {"addresses": addrs, **({"conditions": {"ready": ready}} if ready is not None else {})}
            for addrs, ready in endpoints
        ],
    }


def test_api_addresses_dual_stack_sorted_and_deduplicated() -> None:
    found = compute(
        service(["10.0.0.1", "fd00::1"]),
        [eps((["192.0.2.11"], True), (["192.0.2.10"], True)), eps((["192.0.2.10", "2001:db8::a"], None))],
    )
    assert found.service_cidrs == ["10.0.0.1/32", "fd00::1/128"]
    assert found.endpoint_cidrs == ["192.0.2.10/32", "192.0.2.11/32", "2001:db8::a/128"]
    assert found.service_ports == [443] and found.endpoint_ports == [6443]
    assert found.warnings == [] and found.notes == []


def test_api_addresses_numeric_order() -> None:
    assert sort_cidrs(["10.0.0.10/32", "10.0.0.9/32", "10.0.0.9/32"]) == ["10.0.0.9/32", "10.0.0.10/32"]


def test_api_addresses_not_ready_are_recorded_and_noted() -> None:
    found = compute(service(["10.0.0.1"]), [eps((["192.0.2.10"], True), (["192.0.2.12"], False))])
    assert found.endpoint_cidrs == ["192.0.2.10/32", "192.0.2.12/32"]
    assert found.notes == ["Recorded although not ready: 192.0.2.12/32."]


def test_api_addresses_missing_endpoints_is_a_warning_and_ports_fall_back_to_target_port() -> None:
    found = compute(service(["10.0.0.1"]), [])
    assert found.endpoint_cidrs == []
    assert found.endpoint_ports == [6443]
    assert len(found.warnings) == 1 and "EndpointSlice" in found.warnings[0]


def test_api_addresses_without_service() -> None:
    found = compute(None, [eps((["192.0.2.10"], True))])
    assert found.service_cidrs == [] and found.endpoint_cidrs == ["192.0.2.10/32"]
    assert any("Service default/kubernetes does not exist" in w for w in found.warnings)


# ---- pull secrets --------------------------------------------------------------------------------


def docker_secret(auths: object, *, type_: str = "kubernetes.io/dockerconfigjson") -> dict:
    raw = base64.b64encode(json.dumps({"auths": auths}).encode()).decode()
    return {"type": type_, "data": {".dockerconfigjson": raw}}


def test_pull_secret_hosts_are_normalised_and_credentials_never_leak() -> None:
    secret = docker_secret(
        {
            "https://index.docker.io/v1/": {"auth": "dXNlcjpodW50ZXIy"},
            "Registry.Example.com:5000": {"username": "u", "password": "hunter2"},
        }
    )
    verdict = check_secret("s", "ns", secret)
    assert verdict.ok and verdict.reason == "PullSecretsFound"
    assert verdict.hosts == ["index.docker.io", "registry.example.com:5000"]
    assert "hunter2" not in repr(verdict) and "dXNlcjpodW50ZXIy" not in repr(verdict)


@pytest.mark.parametrize(
    ("secret", "reason"),
    [
        pytest.param(None, "PullSecretNotFound", id="missing"),
        pytest.param({"type": "Opaque", "data": {}}, "WrongSecretType", id="opaque"),
        pytest.param({"type": "kubernetes.io/dockerconfigjson", "data": {}}, "Unparseable", id="no key"),
        pytest.param(
            {"type": "kubernetes.io/dockerconfigjson", "data": {".dockerconfigjson": "!!!"}}, "Unparseable", id="b64"
        ),
        pytest.param(
            {
                "type": "kubernetes.io/dockerconfigjson",
                "data": {".dockerconfigjson": base64.b64encode(b"[1]").decode()},
            },
            "Unparseable",
            id="not an object",
        ),
        pytest.param(docker_secret([]), "Unparseable", id="auths not an object"),
        pytest.param(docker_secret({}), "NoRegistries", id="empty auths"),
    ],
)
def test_pull_secret_failures(secret: dict | None, reason: str) -> None:
    verdict = check_secret("s", "ns", secret)
    assert not verdict.ok and verdict.reason == reason
    assert "Secret s in namespace ns" in verdict.problem


# ---- probes ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("registry", "host", "port"),
    [
        ("reg.example.com", "reg.example.com", 443),
        ("reg.example.com:5000", "reg.example.com", 5000),
        ("[fd00::1]:5000", "fd00::1", 5000),
        ("[fd00::1]", "fd00::1", 443),
    ],
)
def test_probe_targets(registry: str, host: str, port: int) -> None:
    assert probes.parse_target(registry) == probes.Target(host, port)


def test_probe_connects_to_a_listening_port_and_reports_a_closed_one() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    open_port = listener.getsockname()[1]
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    closed_port = closed.getsockname()[1]
    closed.close()
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
                conn.close()
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        entry = probes.probe_registries(
            [f"127.0.0.1:{open_port}", f"127.0.0.1:{closed_port}"], timeout=2.0, use_cache=False
        )
    finally:
        stop.set()
        thread.join()
        listener.close()
    assert entry["bestEffort"] is True
    assert entry["result"] == "Warn"
    by_port = {h["port"]: h for h in entry["hosts"]}
    assert by_port[open_port]["reachable"] is True
    assert by_port[closed_port]["reachable"] is False
    assert "TCP connect failed" in by_port[closed_port]["error"]
    assert f"127.0.0.1:{closed_port}" in entry["message"]


def test_probe_reports_dns_failure() -> None:
    entry = probes.probe_registries(["no-such-host.invalid"], timeout=1.0, use_cache=False)
    assert entry["result"] == "Warn"
    assert entry["hosts"][0]["reachable"] is False
    assert entry["hosts"][0]["error"].startswith("DNS resolution failed")


# ---- preflight table ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "reason", "progressing", "failed", "verdict"),
    [
        pytest.param("True", "Reconciled", False, False, "PASS", id="true"),
        pytest.param("False", "WouldCreate", False, False, "WARN", id="would create"),
        pytest.param("Unknown", "VerificationPending", True, False, "WARN", id="progressing"),
        pytest.param("False", "APIError", True, True, "FAIL", id="api error"),
        pytest.param("False", "StorageClassNotFound", False, False, "FAIL", id="missing"),
        pytest.param("Unknown", "InternalError", True, True, "FAIL", id="crash"),
    ],
)
def test_classify(status: str, reason: str, progressing: bool, failed: bool, verdict: str) -> None:
    cond = {"type": "X", "status": status, "reason": reason}
    assert preflight.classify(cond, progressing=progressing, failed=failed) == verdict


def test_remediation_lookup_order() -> None:
    assert "storageclass" in preflight.remediation("StorageReady", "NoDefaultStorageClass")
    assert preflight.remediation("GatewayReady", "Forbidden") == preflight.REMEDIATIONS[(None, "Forbidden")]
    assert preflight.remediation("GatewayReady", "SomethingElse") == preflight.GENERIC_FIX
    assert preflight.remediation("DNSReady", "WouldConfigure") == preflight.OPERATOR_DOES_IT


def test_format_table_wraps_and_summarises() -> None:
    rows = [
        {"check": "StorageReady", "result": "FAIL", "detail": "word " * 40, "fix": "do this " * 10},
        {"check": "PullSecretsReady", "result": "PASS", "detail": "fine", "fix": ""},
    ]
    text = preflight.format_table(rows, detail_width=30, fix_width=20)
    lines = text.splitlines()
    assert lines[0].split() == ["CHECK", "RESULT", "DETAIL", "FIX"]
    assert lines[1].startswith("StorageReady      FAIL")
    assert all(len(line) <= len("PullSecretsReady") + 2 + 6 + 2 + 30 + 2 + 20 for line in lines)
    assert lines[-1] == "1 passed, 0 warnings, 1 failed."
