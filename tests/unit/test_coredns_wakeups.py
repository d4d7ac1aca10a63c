"""Which platforms an event on the CoreDNS ConfigMap wakes (concerns/dns/coredns.py
``platforms_concerned``): a platform writing its own block wakes only itself, anything else
every platform. One row per case."""

from __future__ import annotations

from typing import Any

import pytest

from tenant_platform.concerns.dns.coredns import platforms_concerned
from tenant_platform.formats import corefile

HEAD = ".:53 {\n    errors\n    reload\n"
TAIL = "    kubernetes cluster.local in-addr.arpa ip6.arpa\n    forward . /etc/resolv.conf\n}\n"


def text(*blocks: tuple[str, str], head: str = HEAD) -> str:
    lines = [line for name, domain in blocks for line in corefile.render_block(name, domain, "gw.istio.svc")]
    return head + "".join(line + "\n" for line in lines) + TAIL


def cm(corefile_text: str | None, **extra: Any) -> dict[str, Any]:
    data = {"Corefile": corefile_text} if corefile_text is not None else {}
    data.update(extra.pop("data", {}))
    return {"metadata": {"name": "coredns", "namespace": "kube-system", **extra}, "data": data}


A, B, C = ("a", "a.example.com"), ("b", "b.example.com"), ("c", "c.example.com")


@pytest.mark.parametrize(
    ("old", "new", "woken"),
    [
        pytest.param(cm(text(A)), cm(text(A, B)), ("b",), id="a block added: its platform only"),
        pytest.param(cm(text(A, B)), cm(text(A, ("b", "other.example.com"))), ("b",), id="a block rewritten"),
        pytest.param(cm(text()), cm(text(A, B)), ("a", "b"), id="two blocks added"),
        pytest.param(cm(text(A, B)), cm(text(A, B)), (), id="no change (resourceVersion only): nobody"),
        pytest.param(cm(text(A, B)), cm(text(A)), None, id="a block removed: everyone"),
        pytest.param(cm(text(A)), cm(text(A, B, head=HEAD + "    cache 31\n")), None, id="outside the blocks"),
        pytest.param(cm(text(A)), cm(text(A), data={"other": "x"}), None, id="another key"),
        pytest.param(
            cm(text(A)), cm(text(A, C), annotations={"tenancy.dev/adoptable-by": "c"}), None, id="annotations"
        ),
        pytest.param(cm(text(A)), cm(text(A, B), labels={"x": "y"}), None, id="labels"),
        pytest.param(None, cm(text(A)), None, id="created"),
        pytest.param(cm(text(A)), None, None, id="deleted"),
        pytest.param(cm(text(A)), cm(None), None, id="the Corefile key removed"),
        pytest.param(cm(text(A)), cm(text(A) + "# BEGIN tenant-platform x\n"), None, id="an unclosed marker"),
    ],
)
def test_platforms_concerned(old: Any, new: Any, woken: tuple[str, ...] | None) -> None:
    assert platforms_concerned(old, new) == woken
