"""RKE2's CoreDNS as its ``rke2-coredns`` Helm chart renders it: our own rendering, for tests.

On RKE2 an admin changes CoreDNS through a ``HelmChartConfig`` named ``rke2-coredns`` in
kube-system whose ``valuesContent`` overrides the chart's values; RKE2's helm controller then
renders the chart, and its ConfigMap ``rke2-coredns-rke2-coredns`` holds the Corefile CoreDNS
loads. Nothing here runs Helm: ``render_corefile`` produces, from the ``servers`` value, the text
the chart's ConfigMap template produces (facts read from the chart in rancher/rke2-charts,
``packages/rke2-coredns``; the code is ours):

- one server block per entry of ``servers``: its zones (``scheme`` + ``zone``, default ``.``)
  joined by a space, ``:<port>`` when a port is set, then `` {``;
- one line per plugin, indented four spaces: the name and one space, then, when the plugin has
  ``parameters``, one more space, for the ``kubernetes`` plugin the cluster domain (the
  ``clusterDomain`` of ConfigMap kube-system/``cluster-dns``, which RKE2 writes) between single
  spaces, one more space and the parameters. So ``errors`` renders ``errors `` (a trailing space),
  ``cache: 30`` ``cache   30``, and the chart's default ``kubernetes`` entry, whose parameters
  already start with ``cluster.local``, ``kubernetes   cluster.local  cluster.local in-addr.arpa
  ip6.arpa`` (the domain twice, as on a real RKE2 node);
- a ``configBlock`` opens `` {`` on the plugin's line, its lines indented eight spaces, and a
  ``}`` indented four closes it;
- ``}`` closes the server block.

``DEFAULT_SERVERS`` is the chart's default ``servers`` value, i.e. what ``helm get values -a
rke2-coredns -n kube-system`` prints on an RKE2 node that has no HelmChartConfig; ``helm_chart_config``
is the object our DNSReady message tells the admin to write: that complete list with the rewrite
entry inserted before the ``kubernetes`` plugin (Helm replaces a list value whole).
"""

from __future__ import annotations

import copy
from typing import Any, Final

import yaml

CHART: Final = "rke2-coredns"
CONFIG_MAP: Final = "rke2-coredns-rke2-coredns"
"""The chart's ConfigMap (release ``rke2-coredns``, chart ``rke2-coredns``: the fullname repeats)."""
CLUSTER_DNS: Final = "cluster-dns"

DEFAULT_SERVERS: Final[list[dict[str, Any]]] = [
    {
        "zones": [{"zone": "."}],
        "port": 53,
        "plugins": [
            {"name": "errors"},
            {"name": "health", "configBlock": "lameduck 5s"},
            {"name": "ready"},
            {
                "name": "kubernetes",
                "parameters": "cluster.local in-addr.arpa ip6.arpa",
                "configBlock": "pods insecure\nfallthrough in-addr.arpa ip6.arpa\nttl 30",
            },
            {"name": "prometheus", "parameters": "0.0.0.0:9153"},
            {"name": "forward", "parameters": ". /etc/resolv.conf"},
            {"name": "cache", "parameters": 30},
            {"name": "loop"},
            {"name": "reload"},
            {"name": "loadbalance"},
        ],
    }
]


def _plugin(plugin: dict[str, Any], cluster_domain: str) -> list[str]:
    line = f"    {plugin['name']} "
    if plugin.get("parameters") not in (None, ""):
        line += " "
        if plugin["name"] == "kubernetes":
            line += f" {cluster_domain} "
        line += f" {plugin['parameters']}"
    block = plugin.get("configBlock")
    if not block:
        return [line]
    inner = [f"        {x}" if x else "" for x in str(block).split("\n")]
    return [line + " {", *inner, "    }"]


def render_corefile(servers: list[dict[str, Any]], *, cluster_domain: str = "cluster.local") -> str:
    """The Corefile the chart's ConfigMap holds for this ``servers`` value (module docstring)."""
    lines: list[str] = []
    for server in servers:
        zones = server.get("zones") or [{}]
        key = " ".join(f"{z.get('scheme') or ''}{z.get('zone') or '.'}" for z in zones)
        if server.get("port"):
            key += f":{server['port']}"
        lines.append(f"{key} {{")
        for plugin in server.get("plugins") or []:
            lines += _plugin(plugin, cluster_domain)
        lines.append("}")
    return "\n".join(lines)


def with_entry_before_kubernetes(servers: list[dict[str, Any]], entry: dict[str, Any]) -> list[dict[str, Any]]:
    """The complete ``servers`` list with ``entry`` added to ``servers[0].plugins`` before ``kubernetes``."""
    out = copy.deepcopy(servers)
    plugins: list[dict[str, Any]] = out[0]["plugins"]
    index = next(i for i, p in enumerate(plugins) if p["name"] == "kubernetes")
    plugins.insert(index, dict(entry))
    return out


def helm_chart_config(servers: list[dict[str, Any]], namespace: str = "kube-system") -> dict[str, Any]:
    """The ``HelmChartConfig`` carrying ``servers`` in its ``valuesContent``."""
    return {
        "apiVersion": "helm.cattle.io/v1",
        "kind": "HelmChartConfig",
        "metadata": {"name": CHART, "namespace": namespace},
        "spec": {"valuesContent": yaml.safe_dump({"servers": servers}, sort_keys=False)},
    }


def chart_config_map(values_content: str, namespace: str, *, cluster_domain: str = "cluster.local") -> dict[str, Any]:
    """The chart's ConfigMap as RKE2's helm controller leaves it after rendering ``values_content``
    over the chart's defaults (``servers`` replaced whole when given, as Helm merges a list)."""
    values = yaml.safe_load(values_content) or {}
    servers = values.get("servers", DEFAULT_SERVERS)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": CONFIG_MAP,
            "namespace": namespace,
            "labels": {
                "app.kubernetes.io/managed-by": "Helm",
                "app.kubernetes.io/instance": CHART,
                "k8s-app": "kube-dns",
                "kubernetes.io/cluster-service": "true",
                "kubernetes.io/name": "CoreDNS",
            },
            "annotations": {"meta.helm.sh/release-name": CHART, "meta.helm.sh/release-namespace": namespace},
        },
        "data": {"Corefile": render_corefile(servers, cluster_domain=cluster_domain)},
    }
