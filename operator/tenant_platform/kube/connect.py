"""Where a client connects and as whom: loading a kubeconfig (or the in-cluster identity), and
the same identity in the form kopf logs in with."""

from __future__ import annotations

import os
from typing import Any

import kubernetes.client
import kubernetes.config


def load_configuration(path: str | None, context: str | None) -> tuple[kubernetes.client.Configuration, str | None]:
    """A kubeconfig file (None: $KUBECONFIG or ~/.kube/config), else the in-cluster config; and the
    namespace it names (the context's, or the pod's own)."""
    configuration = kubernetes.client.Configuration()
    namespace: str | None = None
    try:
        kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=path, context=context, client_configuration=configuration
        )
        _, active = kubernetes.config.list_kube_config_contexts(config_file=path)  # type: ignore[no-untyped-call]
        namespace = (active or {}).get("context", {}).get("namespace")
    except (kubernetes.config.ConfigException, FileNotFoundError, TypeError):
        if path is not None:
            raise
        kubernetes.config.load_incluster_config(  # type: ignore[no-untyped-call]
            client_configuration=configuration
        )
        ns_file = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
        if os.path.exists(ns_file):
            with open(ns_file, encoding="utf-8") as fh:
                namespace = fh.read().strip()
    return configuration, namespace


def connection_info(cfg: kubernetes.client.Configuration, namespace: str | None) -> dict[str, Any]:
    """What kopf needs to log in with the same identity: server, CA, client cert or token."""
    auth = (cfg.api_key or {}).get("authorization") or (cfg.api_key or {}).get("BearerToken") or ""
    token = auth.split(" ", 1)[1] if auth.lower().startswith("bearer ") else auth or None
    return {
        "server": str(cfg.host),
        "ca_path": cfg.ssl_ca_cert or None,
        "insecure": not cfg.verify_ssl,
        "certificate_path": cfg.cert_file or None,
        "private_key_path": cfg.key_file or None,
        "token": token,
        "namespace": namespace,
    }
