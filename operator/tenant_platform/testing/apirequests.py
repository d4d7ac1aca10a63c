"""Counting the API requests of ONE identity, as the API server itself counts them.

``apiserver_request_total`` has no label naming the client, so a count taken from it also holds
what the control plane's own controllers did meanwhile (the namespace controller emptying an
earlier test's namespace: LIST and DELETE pods, GET namespaces). API Priority and Fairness does
classify every request by its (authenticated) user: ``RequestCounter`` installs FlowSchemas that
match only one ServiceAccount, one per (verb, resource) pair the caller wants to tell apart plus
one for everything else it asks, and reads ``apiserver_flowcontrol_dispatched_requests_total``
per FlowSchema. Watches get a FlowSchema of their own and are left out (an informer re-opens its
watch on a timer, whenever that falls). Requests are counted before authorization, so a
forbidden one counts too.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from tenant_platform.kube.client import Kube
from tenant_platform.testing.wait import wait_for

API_VERSION = "flowcontrol.apiserver.k8s.io/v1"
# Before the built-in schemas that match ServiceAccounts ("service-accounts" is 9000) and after
# "exempt" (1, system:masters): ours only ever match the one ServiceAccount.
PRECEDENCE_SPLIT = 10
PRECEDENCE_REST = 20
PRIORITY_LEVEL = "workload-low"  # where "service-accounts" puts the ServiceAccount otherwise
OTHER = ("*", "*")
_LINE = re.compile(r"^apiserver_flowcontrol_dispatched_requests_total\{(?P<labels>[^}]*)\} (?P<value>[0-9.e+]+)$")
_SCHEMA = re.compile(r'flow_schema="([^"]*)"')


class RequestCounter:
    """Requests ``system:serviceaccount:<namespace>:<name>`` made, by (verb, resource) for the
    pairs in ``split`` (verbs as RBAC spells them: get, list, create, ...) and under ``OTHER``
    for all the rest, watches left out. ``install`` before counting, ``uninstall`` after."""

    def __init__(
        self,
        admin: Kube,
        metrics_text: Callable[[], str],
        *,
        namespace: str,
        name: str,
        split: Iterable[tuple[str, str]] = (),
        prefix: str = "count",
    ) -> None:
        self.admin = admin
        self.metrics_text = metrics_text
        self.subject = {"kind": "ServiceAccount", "serviceAccount": {"namespace": namespace, "name": name}}
        self.schemas: dict[str, tuple[str, str] | None] = {f"{prefix}-watch": None}
        for verb, resource in split:
            self.schemas[f"{prefix}-{verb}-{resource.replace('/', '.')}"] = (verb, resource)
        self.schemas[f"{prefix}-rest"] = OTHER

    def _schema(self, name: str, key: tuple[str, str] | None) -> dict[str, Any]:
        if key is None:  # watches
            rules: dict[str, Any] = {"resourceRules": [_resources(["watch"], ["*"])]}
            precedence = PRECEDENCE_SPLIT - 1
        elif key == OTHER:
            rules = {"resourceRules": [_resources(["*"], ["*"])],
                     "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}  # fmt: skip
            precedence = PRECEDENCE_REST
        else:
            rules = {"resourceRules": [_resources([key[0]], [key[1]])]}
            precedence = PRECEDENCE_SPLIT
        return {
            "apiVersion": API_VERSION,
            "kind": "FlowSchema",
            "metadata": {"name": name},
            "spec": {
                "matchingPrecedence": precedence,
                "priorityLevelConfiguration": {"name": PRIORITY_LEVEL},
                "distinguisherMethod": {"type": "ByUser"},
                "rules": [{"subjects": [self.subject], **rules}],
            },
        }

    def install(self, probe: Kube) -> None:
        """Create the FlowSchemas and wait until the API server classifies by them: a request
        ``probe`` (a client as the identity) makes is counted."""
        for name, key in self.schemas.items():
            self.admin.apply(self._schema(name, key))

        def probed() -> bool:
            before = self.snapshot()[OTHER]
            probe.request("GET", "/version")
            return self.snapshot()[OTHER] > before

        wait_for(probed, "the API server classifying requests by the counting FlowSchemas", 30)

    def uninstall(self) -> None:
        for name in self.schemas:
            self.admin.delete(API_VERSION, "FlowSchema", name)

    def snapshot(self) -> Counter[tuple[str, str]]:
        """Requests dispatched so far under each (verb, resource) and ``OTHER``, watches left out."""
        by_schema: Counter[str] = Counter()
        for line in self.metrics_text().splitlines():
            match = _LINE.match(line)
            schema = _SCHEMA.search(match["labels"]) if match else None
            if match and schema:
                by_schema[schema[1]] += int(float(match["value"]))
        out: Counter[tuple[str, str]] = Counter()
        for name, key in self.schemas.items():
            if key is not None:
                out[key] = by_schema[name]
        return out


def _resources(verbs: list[str], resources: list[str]) -> dict[str, Any]:
    return {"verbs": verbs, "apiGroups": ["*"], "resources": resources, "clusterScope": True, "namespaces": ["*"]}
