"""The kube-apiserver and kube-controller-manager flags the session control plane and the tenant
API servers share (testing/controlplane.py, testing/tenants.py): a tenant differs only in what
is its own (ports, directories, PKI, etcd prefix), never in a setting."""

from __future__ import annotations

from pathlib import Path

from tenant_platform.testing.controlplane import CONTROLLERS, apiserver_flags, controller_manager_flags
from tenant_platform.testing.pki import Pki


def pki_in(root: str) -> Pki:
    return Pki.under(Path(root))


def as_dict(flags: list[str]) -> dict[str, str]:
    pairs = [flag.split("=", 1) for flag in flags]
    assert all(len(pair) == 2 for pair in pairs), flags
    named = {name: value for name, value in pairs}
    assert len(named) == len(flags), f"a flag given twice: {flags}"
    return named


SESSION = as_dict(
    apiserver_flags(etcd_url="http://127.0.0.1:2379", port=6443, cert_dir=Path("/s/pki"), pki=pki_in("/s"))
)
TENANT = as_dict(
    apiserver_flags(
        etcd_url="http://127.0.0.1:2379",
        port=7443,
        cert_dir=Path("/t/pki"),
        pki=pki_in("/t"),
        etcd_prefix="/tenants/lab-a",
    )
)
# What a tenant has of its own; every other flag must be the session's, value for value.
OWN = {
    "--secure-port",
    "--cert-dir",
    "--tls-cert-file",
    "--tls-private-key-file",
    "--client-ca-file",
    "--service-account-key-file",
    "--service-account-signing-key-file",
}


def test_the_session_keeps_the_default_etcd_prefix() -> None:
    assert "--etcd-prefix" not in SESSION
    assert TENANT["--etcd-prefix"] == "/tenants/lab-a"


def test_a_tenant_differs_from_the_session_only_in_what_is_its_own() -> None:
    assert set(TENANT) == {*SESSION, "--etcd-prefix"}
    differing = {name for name in SESSION if SESSION[name] != TENANT[name]}
    assert differing == OWN
    assert TENANT["--secure-port"] == "7443"
    assert TENANT["--cert-dir"] == "/t/pki"
    assert TENANT["--service-account-signing-key-file"] == "/t/sa.key"
    assert TENANT["--etcd-servers"] == SESSION["--etcd-servers"]


def test_controller_manager_flags_name_the_kubeconfig_and_pki() -> None:
    flags = as_dict(controller_manager_flags(kubeconfig=Path("/t/admin.kubeconfig"), pki=pki_in("/t")))
    assert flags["--kubeconfig"] == "/t/admin.kubeconfig"
    assert flags["--root-ca-file"] == "/t/ca.crt"
    assert flags["--service-account-private-key-file"] == "/t/sa.key"
    assert flags["--controllers"] == ",".join(CONTROLLERS)
    assert flags["--leader-elect"] == "false"
