"""Pure Corefile editing: our marked blocks, placement, idempotence, coexistence, refusal."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tenant_platform.api.reasons import DNS
from tenant_platform.api.status.dns import Mode
from tenant_platform.concerns.dns import coredns
from tenant_platform.formats import corefile
from tenant_platform.testing.seed import STOCK_COREFILE

HOST = "istio-ingressgateway.istio-system.svc.cluster.local"

TABS = ".:53 {\n\terrors\n\tkubernetes cluster.local {\n\t\tpods insecure\n\t}\n\treload\n}\n"

K3S = """\
.:53 {
    errors
    health
    ready
    kubernetes cluster.local in-addr.arpa ip6.arpa {
      pods insecure
      fallthrough in-addr.arpa ip6.arpa
    }
    hosts /etc/coredns/NodeHosts {
      ttl 60
      reload 15s
      fallthrough
    }
    prometheus :9153
    forward . /etc/resolv.conf
    cache 30
    loop
    reload
    loadbalance
    import /etc/coredns/custom/*.override
}
import /etc/coredns/custom/*.server
"""

MULTI = """\
# a zone forwarded elsewhere comes first
example.org:53 {
    forward . 10.9.9.9
}
(snippet) {
    kubernetes fake.local
}
.:53 {
    log "a # not a comment" {$HOME}
    kubernetes cluster.local
    forward . /etc/resolv.conf
}
"""


def lines_of(text: str) -> list[str]:
    return text.splitlines()


def test_insert_above_kubernetes_with_its_indentation() -> None:
    out = corefile.upsert_block(STOCK_COREFILE, "demo", "kamiwaza.example.com", HOST)
    lines = lines_of(out)
    k = next(i for i, line in enumerate(lines) if line.strip().startswith("kubernetes "))
    assert lines[k - 3 : k] == [
        "    # BEGIN tenant-platform demo",
        f"    rewrite name exact kamiwaza.example.com {HOST}",
        "    # END tenant-platform demo",
    ]
    # Nothing else changed.
    assert corefile.remove_block(out, "demo") == STOCK_COREFILE


def test_idempotent_returns_the_same_text() -> None:
    once = corefile.upsert_block(STOCK_COREFILE, "demo", "kamiwaza.example.com", HOST)
    assert corefile.upsert_block(once, "demo", "kamiwaza.example.com", HOST) is once


def test_tabs_are_kept() -> None:
    out = corefile.upsert_block(TABS, "demo", "a.example.com", HOST)
    assert "\t# BEGIN tenant-platform demo\n\trewrite name exact a.example.com" in out
    assert corefile.remove_block(out, "demo") == TABS


def test_two_platforms_coexist_and_update_in_place() -> None:
    text = corefile.upsert_block(STOCK_COREFILE, "a", "a.example.com", HOST)
    text = corefile.upsert_block(text, "b", "b.example.com", HOST)
    assert corefile.platforms(text) == ["a", "b"]
    # Updating a keeps it before b (no reordering churn).
    updated = corefile.upsert_block(text, "a", "a2.example.com", HOST)
    assert corefile.platforms(updated) == ["a", "b"]
    assert f"rewrite name exact a2.example.com {HOST}" in updated
    assert "a.example.com " not in updated
    # Removing one leaves the other intact.
    only_b = corefile.remove_block(updated, "a")
    assert corefile.platforms(only_b) == ["b"]
    assert corefile.upsert_block(only_b, "b", "b.example.com", HOST) is only_b
    assert corefile.remove_block(only_b, "b") == STOCK_COREFILE


def test_remove_absent_block_is_a_no_op() -> None:
    assert corefile.remove_block(STOCK_COREFILE, "ghost") is STOCK_COREFILE


def test_misplaced_block_is_moved_into_the_server_block() -> None:
    misplaced = "# BEGIN tenant-platform demo\nrewrite name exact x y\n# END tenant-platform demo\n" + STOCK_COREFILE
    out = corefile.upsert_block(misplaced, "demo", "a.example.com", HOST)
    assert out.startswith(".:53 {")
    assert corefile.platforms(out) == ["demo"]
    block = corefile.block_for(out, "demo")
    assert block is not None and block.body == [f"rewrite name exact a.example.com {HOST}"]


def test_picks_the_root_server_block_and_ignores_snippets_comments_quotes() -> None:
    out = corefile.upsert_block(MULTI, "demo", "a.example.com", HOST)
    lines = lines_of(out)
    k = lines.index("    kubernetes cluster.local")
    assert lines[k - 1] == "    # END tenant-platform demo"
    assert lines[k - 3] == "    # BEGIN tenant-platform demo"
    blocks = corefile.parse(MULTI)
    assert [b.keys for b in blocks] == [["example.org:53"], [".:53"]]
    assert corefile.dns_server_block(MULTI).is_root


def test_k3s_override_import_and_reload_detection() -> None:
    assert corefile.override_imports(K3S) == ["/etc/coredns/custom/*.override"]
    assert corefile.override_imports(STOCK_COREFILE) == []
    assert corefile.has_reload(STOCK_COREFILE)
    assert not corefile.has_reload(STOCK_COREFILE.replace("    reload\n", ""))


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(".:53 {\n    forward . /etc/resolv.conf\n}\n", id="no kubernetes plugin"),
        pytest.param("", id="empty"),
        pytest.param(".:53 {\n    kubernetes cluster.local {\n}\n", id="unclosed brace"),
        pytest.param(".:53 {\n    kubernetes cluster.local\n}\n}\n", id="extra brace"),
        pytest.param(
            STOCK_COREFILE.replace("    ready\n", "    ready\n    # BEGIN tenant-platform demo\n"),
            id="unterminated marker",
        ),
        pytest.param(
            STOCK_COREFILE.replace("    ready\n", "    ready\n    # END tenant-platform demo\n"),
            id="END without BEGIN",
        ),
    ],
)
def test_refuses_what_it_cannot_edit_safely(text: str) -> None:
    with pytest.raises(corefile.CorefileError):
        corefile.upsert_block(text, "demo", "a.example.com", HOST)


def test_zone_of() -> None:
    assert corefile.zone_of(".:53") == "."
    assert corefile.zone_of("dns://.:53") == "."
    assert corefile.zone_of(".") == "."
    assert corefile.zone_of("Example.ORG:53") == "example.org."


def test_override_key_and_content() -> None:
    assert corefile.override_key("demo") == "tenant-platform-demo.override"
    text = corefile.render_override("demo", "a.example.com", HOST)
    assert text.splitlines()[-1] == f"rewrite name exact a.example.com {HOST}"
    assert all(line.startswith("#") for line in text.splitlines()[:-1])


def test_preview_is_a_marked_fragment() -> None:
    obj = corefile.render_preview("demo", "a.example.com", HOST, namespace="kube-system", name="coredns")
    assert obj["kind"] == "ConfigMap"
    assert "Corefile" not in obj["data"]
    (key,) = obj["data"]
    assert key.endswith(".fragment")
    assert "PREVIEW FRAGMENT" in obj["metadata"]["annotations"]["tenancy.dev/render-note"]
    assert "rewrite name exact a.example.com" in obj["data"][key]
    assert obj["metadata"]["name"] != "coredns", "applying the preview must never touch the live ConfigMap"


# -- distribution detection and pickup (pure functions of status.coredns) ------------------------

TARGET = coredns.CoreDNSTarget()


def cm(corefile: str, *, labels: dict | None = None, annotations: dict | None = None) -> dict:
    return {
        "metadata": {"name": "coredns", "labels": labels or {}, "annotations": annotations or {}},
        "data": {"Corefile": corefile},
    }


@pytest.mark.parametrize(
    ("kwargs", "name", "mode"),
    [
        pytest.param({"corefile_cm": cm(STOCK_COREFILE)}, "generic", Mode.COREFILE, id="kubeadm"),
        pytest.param(
            {"corefile_cm": cm(STOCK_COREFILE, labels={"k0s.k0sproject.io/stack": "coredns"})},
            "k0s",
            Mode.MANAGED,
            id="k0s stack label",
        ),
        pytest.param(
            {
                "corefile_cm": cm(STOCK_COREFILE),
                "node": {"metadata": {"name": "n", "labels": {"node.k0sproject.io/role": "control-plane"}}},
            },
            "k0s",
            Mode.MANAGED,
            id="k0s node",
        ),
        pytest.param(
            {
                "corefile_cm": cm(K3S, annotations={"objectset.rio.cattle.io/applied": "x"}),
                "custom_cm": {"metadata": {"name": "coredns-custom"}},
                "node": {"metadata": {"name": "n", "labels": {"node.kubernetes.io/instance-type": "k3s"}}},
            },
            "k3s",
            Mode.IMPORT,
            id="k3s with coredns-custom",
        ),
        pytest.param(
            {
                "corefile_cm": cm(K3S),
                "deployment": {
                    "spec": {"template": {"spec": {"volumes": [{"configMap": {"name": "coredns-custom"}}]}}}
                },
            },
            "generic",
            Mode.IMPORT,
            id="import mounted but ConfigMap absent",
        ),
        pytest.param(
            {"corefile_cm": cm(STOCK_COREFILE, annotations={"objectset.rio.cattle.io/applied": "x"})},
            "k3s",
            Mode.MANAGED,
            id="old k3s without import",
        ),
        pytest.param(
            {
                "corefile_cm": cm(K3S, labels={"addonmanager.kubernetes.io/mode": "Reconcile"}),
                "custom_cm": {"metadata": {"name": "coredns-custom"}},
                "node": {"metadata": {"name": "n", "labels": {"kubernetes.azure.com/cluster": "x"}}},
            },
            "aks",
            Mode.IMPORT,
            id="aks",
        ),
        pytest.param(
            {"corefile_cm": cm(STOCK_COREFILE, labels={"addonmanager.kubernetes.io/mode": "Reconcile"})},
            "addon-manager",
            Mode.MANAGED,
            id="addon manager reconciles",
        ),
        pytest.param(
            {"corefile_cm": None, "rke2_cm": {"metadata": {"name": "rke2-coredns-rke2-coredns"}}},
            "rke2",
            Mode.MANAGED,
            id="rke2",
        ),
    ],
)
def test_detect_distribution(kwargs: dict, name: str, mode: str) -> None:
    args = {"corefile_cm": None, "custom_cm": None, "deployment": None, "node": None, "rke2_cm": None, **kwargs}
    dist = coredns.detect_distribution(target=TARGET, **args)
    assert (dist.name, dist.mode) == (name, mode), dist.evidence


T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def pod(name: str, started: datetime, phase: str = "Running") -> dict:
    return {"metadata": {"name": name}, "status": {"phase": phase, "startTime": started.strftime("%Y-%m-%dT%H:%M:%SZ")}}


@pytest.mark.parametrize(
    ("pods", "reload", "mode", "now", "expected"),
    [
        pytest.param([], True, Mode.COREFILE, T0, (DNS.CONFIGURED, "True"), id="no pods"),
        pytest.param([pod("p", T0 - timedelta(hours=1), "Pending")], False, Mode.COREFILE, T0,
                     (DNS.CONFIGURED, "True"), id="no running pods"),
        pytest.param([pod("p", T0 + timedelta(seconds=5))], False, Mode.COREFILE, T0,
                     (DNS.CONFIGURED, "True"), id="started after the change"),
        pytest.param([pod("p", T0 - timedelta(hours=1))], False, Mode.COREFILE, T0,
                     (DNS.RELOAD_PLUGIN_MISSING, "False"), id="stale without reload"),
        pytest.param([pod("p", T0 - timedelta(hours=1))], True, Mode.COREFILE, T0 + timedelta(seconds=30),
                     (DNS.RELOAD_PENDING, "False"), id="reload pending"),
        pytest.param([pod("p", T0 - timedelta(hours=1))], True, Mode.COREFILE, T0 + timedelta(minutes=10),
                     (DNS.CONFIGURED, "True"), id="reload window passed"),
        pytest.param([pod("p", T0 - timedelta(hours=1))], True, Mode.IMPORT, T0 + timedelta(minutes=10),
                     (DNS.RESTART_REQUIRED, "False"), id="imports need a restart"),
    ],
)  # fmt: skip
def test_pickup(pods: list, reload: bool, mode: str, now: datetime, expected: tuple[str, str]) -> None:
    reason, status = expected
    verdict = coredns.pickup(pods=pods, changed=T0, now=now, reload=reload, mode=mode, target=TARGET)
    assert (verdict.reason, verdict.status) == (reason, status), verdict.sentence
    if reason == DNS.RELOAD_PENDING:
        assert verdict.requeue_after == pytest.approx(120)


def test_changed_at_reads_our_managed_fields_entry() -> None:
    obj = {
        "metadata": {
            "managedFields": [
                {"manager": "kubectl", "time": "2026-06-01T13:00:00Z"},
                {"manager": "tenant-platform-operator", "time": "2026-06-01T12:00:00Z"},
            ]
        }
    }
    assert coredns.changed_at(obj) == T0
    assert coredns.changed_at({"metadata": {}}) is None


# -- a hand-made rewrite of the domain (the checklist's), and its takeover -----------------------

CHECKLIST_LINE = f"    rewrite name exact kamiwaza.example.com {HOST}"
HAND_IN_BLOCK = STOCK_COREFILE.replace(
    "    kubernetes cluster.local", CHECKLIST_LINE + "\n    kubernetes cluster.local", 1
)
OWN_BLOCK = (
    f"kamiwaza.example.com:53 {{\n    rewrite name kamiwaza.example.com. {HOST}\n    kubernetes cluster.local\n}}\n"
)
ELSEWHERE = f"example.com:53 {{\n    rewrite stop name exact kamiwaza.example.com {HOST}\n    forward . 10.9.9.9\n}}\n"

# (Corefile, placements of the hand-made rewrites found)
HAND_MADE = [
    pytest.param(STOCK_COREFILE, [], id="none"),
    pytest.param(HAND_IN_BLOCK, ["dns-block"], id="the checklist's line"),
    pytest.param(OWN_BLOCK + STOCK_COREFILE, ["own-block"], id="a server block of its own"),
    pytest.param(ELSEWHERE + STOCK_COREFILE, ["elsewhere"], id="in another zone's block"),
    pytest.param(HAND_IN_BLOCK.replace("kamiwaza.example.com", "other.example.com"), [], id="another domain's rewrite"),
    pytest.param(
        STOCK_COREFILE.replace(
            "    kubernetes cluster.local",
            "    rewrite name regex (.*)\\.kamiwaza\\.example\\.com x\n    kubernetes cluster.local",
        ),
        [],
        id="a regex rewrite is not the checklist's",
    ),
    pytest.param(
        corefile.upsert_block(STOCK_COREFILE, "kamiwaza", "kamiwaza.example.com", HOST), [], id="a marked block"
    ),
]


@pytest.mark.parametrize(("text", "placements"), HAND_MADE)
def test_hand_made_rewrites_are_found_outside_marked_blocks(text: str, placements: list[str]) -> None:
    assert [h.placement for h in corefile.hand_made_rewrites(text, "kamiwaza.example.com")] == placements


def test_take_over_replaces_the_checklist_line_in_one_edit_and_touches_nothing_else() -> None:
    out = corefile.take_over(HAND_IN_BLOCK, "kamiwaza", "kamiwaza.example.com", HOST)
    assert out.splitlines().count(CHECKLIST_LINE) == 1  # ours, inside the markers
    assert out == corefile.upsert_block(STOCK_COREFILE, "kamiwaza", "kamiwaza.example.com", HOST)
    assert corefile.take_over(out, "kamiwaza", "kamiwaza.example.com", HOST) == out  # idempotent


def test_take_over_removes_a_server_block_of_its_own_but_never_another_zone() -> None:
    own = corefile.take_over(OWN_BLOCK + STOCK_COREFILE, "kamiwaza", "kamiwaza.example.com", HOST)
    assert own == corefile.upsert_block(STOCK_COREFILE, "kamiwaza", "kamiwaza.example.com", HOST)
    other = corefile.take_over(ELSEWHERE + STOCK_COREFILE, "kamiwaza", "kamiwaza.example.com", HOST)
    assert other.startswith(ELSEWHERE)  # left alone: the message says to remove it by hand
    assert corefile.block_for(other, "kamiwaza") is not None
