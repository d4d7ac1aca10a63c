"""testing.rke2: our rendering of the rke2-coredns chart's Corefile, against the facts read from the
chart (the spacing of its template, the cluster domain inserted for the kubernetes plugin)."""

from __future__ import annotations

import yaml

from tenant_platform.formats import corefile
from tenant_platform.testing import rke2

DEFAULT = "\n".join(
    [
        ".:53 {",
        "    errors ",
        "    health  {",
        "        lameduck 5s",
        "    }",
        "    ready ",
        "    kubernetes   cluster.local  cluster.local in-addr.arpa ip6.arpa {",
        "        pods insecure",
        "        fallthrough in-addr.arpa ip6.arpa",
        "        ttl 30",
        "    }",
        "    prometheus   0.0.0.0:9153",
        "    forward   . /etc/resolv.conf",
        "    cache   30",
        "    loop ",
        "    reload ",
        "    loadbalance ",
        "}",
    ]
)


def test_the_charts_defaults_render_as_on_an_rke2_node() -> None:
    assert rke2.render_corefile(rke2.DEFAULT_SERVERS) == DEFAULT


def test_the_documented_entry_lands_before_kubernetes_and_nothing_else_changes() -> None:
    entry = {"name": "rewrite", "parameters": "name exact a.example.com gw.ns.svc.cluster.local"}
    servers = rke2.with_entry_before_kubernetes(rke2.DEFAULT_SERVERS, entry)
    assert [p["name"] for p in rke2.DEFAULT_SERVERS[0]["plugins"]].count("rewrite") == 0, "defaults untouched"
    config = rke2.helm_chart_config(servers)
    assert (config["kind"], config["metadata"]["name"]) == ("HelmChartConfig", "rke2-coredns")
    assert yaml.safe_load(config["spec"]["valuesContent"]) == {"servers": servers}
    text = rke2.chart_config_map(config["spec"]["valuesContent"], "kube-system")["data"]["Corefile"]
    line = "    rewrite   name exact a.example.com gw.ns.svc.cluster.local"
    assert text == DEFAULT.replace("    kubernetes ", f"{line}\n    kubernetes ", 1)
    assert corefile.parse(text) is not None


def test_zones_ports_and_the_cluster_domain() -> None:
    servers = [
        {"zones": [{"zone": "example.org.", "scheme": "tls://"}, {"zone": "b.org."}], "port": 853, "plugins": []},
        {"plugins": [{"name": "kubernetes", "parameters": "in-addr.arpa"}]},
    ]
    assert rke2.render_corefile(servers, cluster_domain="corp.local") == (
        "tls://example.org. b.org.:853 {\n}\n. {\n    kubernetes   corp.local  in-addr.arpa\n}"
    )
