"""kube/remote.parse_kubeconfig: what a kubeconfig from a Secret may make the operator do.

The attacker writes the Secret. Rows: each thing the operator must refuse (a command to run, a
file of the operator's to read and send, TLS off, a proxy), and that no error message quotes a
value from the kubeconfig.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest
import yaml

from tenant_platform.kube import remote

SECRET = "s3cr3t-token-value"
CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n").decode()


def kubeconfig(cluster: dict[str, Any] | None = None, user: dict[str, Any] | None = None, **top: Any) -> bytes:
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "c",
                "cluster": {"server": "https://10.1.2.3:6443", "certificate-authority-data": CA, **(cluster or {})},
            }
        ],
        "users": [{"name": "u", "user": {"token": SECRET, **(user or {})}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
        **top,
    }
    return yaml.safe_dump(doc).encode()


def test_token_kubeconfig_parses() -> None:
    creds = remote.parse_kubeconfig(kubeconfig())
    assert creds.server == "https://10.1.2.3:6443"
    assert creds.token == SECRET
    assert SECRET not in repr(creds)


REFUSED = [
    (kubeconfig(user={"exec": {"command": "/bin/sh", "args": ["-c", "id"]}}), "exec credential plugin"),
    (kubeconfig(user={"auth-provider": {"name": "oidc"}}), "auth-provider"),
    (kubeconfig(user={"tokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token"}), "token file"),
    (kubeconfig(user={"client-certificate": "/etc/x.crt", "client-key": "/etc/x.key"}), "file"),
    (kubeconfig(cluster={"certificate-authority": "/etc/ca.crt"}), "CA file"),
    (kubeconfig(cluster={"insecure-skip-tls-verify": True}), "insecure-skip-tls-verify"),
    (kubeconfig(cluster={"proxy-url": "http://evil:3128"}), "proxy"),
    (kubeconfig(user={"username": "admin", "password": SECRET}), "basic authentication"),
    (kubeconfig(user={"as": "system:admin"}), "impersonation"),
    (kubeconfig(cluster={"server": "http://10.1.2.3:8080"}), "https URL"),
    (kubeconfig(cluster={"server": f"https://{SECRET}@"}), "https URL"),
    (kubeconfig(**{"current-context": "nope"}), "names no context"),
    (kubeconfig(user={"token": None, "client-certificate-data": CA}), "without its key"),
    (kubeconfig(user={"token": ""}), "neither a token"),
    (kubeconfig(cluster={"certificate-authority-data": f"{SECRET}!!"}), "not base64"),
    (b"\x00\xff: [", "not valid YAML"),
    (f"{SECRET}".encode(), "not a YAML mapping"),
]


@pytest.mark.parametrize(("data", "says"), REFUSED, ids=[s for _, s in REFUSED])
def test_refused_and_never_quoted(data: bytes, says: str) -> None:
    with pytest.raises(remote.KubeconfigError) as info:
        remote.parse_kubeconfig(data)
    assert says in str(info.value)
    assert SECRET not in str(info.value)


def test_invalid_ca_is_a_kubeconfig_error() -> None:
    with pytest.raises(remote.KubeconfigError, match="not valid PEM"):
        remote.client_from_kubeconfig(kubeconfig())


def test_clients_are_cached_by_secret_version_and_rotated() -> None:
    built: list[bytes] = []

    def build(data: bytes) -> Any:
        built.append(data)
        return remote.Kube.__new__(remote.Kube)

    clients = remote.TargetClients(build=build, limit=2)
    a1 = clients.get(("ns", "a", "value"), "1", b"one")
    assert clients.get(("ns", "a", "value"), "1", b"one") is a1
    a2 = clients.get(("ns", "a", "value"), "2", b"two")  # the Secret was rotated
    assert a2 is not a1 and built == [b"one", b"two"]
    clients.get(("ns", "b", "value"), "1", b"b")
    clients.get(("ns", "c", "value"), "1", b"c")  # over the limit: the least recently used goes
    assert len(clients) == 2 and clients.version(("ns", "a", "value")) is None
