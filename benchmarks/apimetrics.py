"""Counting API requests from the API server's own `apiserver_request_total` metric.

Writes (POST, PUT, PATCH, APPLY, DELETE, DELETECOLLECTION) are counted apart from reads (GET,
LIST); WATCH and dry-run requests are reported separately. Requests the benchmark itself makes
are subtracted by the caller.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

_LINE = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>[0-9.e+]+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
WRITE_VERBS = {"POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION"}
# POSTs that persist nothing: counted as reads.
REVIEWS = {"subjectaccessreviews", "selfsubjectaccessreviews", "selfsubjectreviews", "tokenreviews"}
# Written by the control plane's own components (leader leases, the VAP status controller), not
# by the operator: reported apart.
CONTROL_PLANE = {"leases", "validatingadmissionpolicies/status"}
READ_VERBS = {"GET", "LIST"}


@dataclass(frozen=True)
class RequestCounts:
    reads: int
    writes: int
    control_plane_writes: int
    watches: int
    dry_runs: int
    by_verb_resource: Counter[tuple[str, str]]

    def __sub__(self, other: RequestCounts) -> RequestCounts:
        diff = Counter(self.by_verb_resource)
        diff.subtract(other.by_verb_resource)
        return RequestCounts(
            self.reads - other.reads,
            self.writes - other.writes,
            self.control_plane_writes - other.control_plane_writes,
            self.watches - other.watches,
            self.dry_runs - other.dry_runs,
            Counter({k: v for k, v in diff.items() if v}),
        )


def parse(text: str) -> RequestCounts:
    reads = writes = control_plane = watches = dry_runs = 0
    by: Counter[tuple[str, str]] = Counter()
    for line in text.splitlines():
        match = _LINE.match(line)
        if not match:
            continue
        labels = dict(_LABEL.findall(match["labels"]))
        value = int(float(match["value"]))
        verb = labels.get("verb", "")
        if labels.get("dry_run"):
            dry_runs += value
            continue
        resource = labels.get("resource", "")
        if labels.get("subresource"):
            resource += "/" + labels["subresource"]
        by[(verb, resource)] += value
        if resource in REVIEWS:
            reads += value
        elif resource in CONTROL_PLANE and verb in WRITE_VERBS:
            control_plane += value
        elif verb in WRITE_VERBS:
            writes += value
        elif verb in READ_VERBS:
            reads += value
        elif verb == "WATCH":
            watches += value
    return RequestCounts(reads, writes, control_plane, watches, dry_runs, by)


def access_reviews(counts: RequestCounts) -> int:
    """SubjectAccessReviews among ``counts`` (read from the reads above; the operator's ``can_i``)."""
    return sum(v for (_, resource), v in counts.by_verb_resource.items() if resource == "subjectaccessreviews")


def by_code(text: str, code: str) -> Counter[str]:
    """Requests the API server answered with ``code`` (e.g. "409"), by "VERB resource"."""
    found: Counter[str] = Counter()
    for line in text.splitlines():
        match = _LINE.match(line)
        if not match:
            continue
        labels = dict(_LABEL.findall(match["labels"]))
        if labels.get("code") != code:
            continue
        resource = labels.get("resource", "")
        if labels.get("subresource"):
            resource += "/" + labels["subresource"]
        found[f"{labels.get('verb', '')} {resource}"] += int(float(match["value"]))
    return found
