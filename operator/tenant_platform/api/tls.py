"""Key names of the edge certificate's objects, shared by render/ (which writes them) and status/
(which reads them): the ``kubernetes.io/tls`` Secret and the trust ConfigMap."""

from __future__ import annotations

from typing import Final

TLS_TYPE: Final = "kubernetes.io/tls"
CERT_KEY: Final = "tls.crt"
KEY_KEY: Final = "tls.key"
CA_KEY: Final = "ca.crt"
TRUST_KEY: Final = "ca-certificates.crt"
"""The trust ConfigMap's one key: the public certificates clients must trust."""
