#!/usr/bin/env python3
"""A software bill of materials for a release: CycloneDX 1.5 JSON listing the project and every
Python package requirements.lock pins (exact version, purl, the lock's sha256 of each file).

    python3 hack/sbom.py VERSION [IMAGE@sha256:DIGEST] > dist/tenant-platform-operator-VERSION.cdx.json

With an image (hack/release.sh --image passes the reference the OCI archive carries and its
manifest digest), the BOM also lists that image as a `container` component (its purl pins the
digest) that contains the project.

The image's Python packages are exactly these (the Dockerfile installs only the lock, with
--require-hashes); setuptools and wheel are marked `excluded`: the build stage uses them and
removes them again. Reproducible: the serial number derives from the version and the lock, the
timestamp from SOURCE_DATE_EPOCH (hack/release.sh sets the release commit's time). Standard
library only, so it runs before any virtual environment exists.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import re
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements.lock"
NAME = "tenant-platform-operator"
BUILD_ONLY = {"setuptools", "wheel"}


def locked(text: str) -> list[tuple[str, str, list[str]]]:
    """(name, version, [sha256, ...]) for each pinned requirement of a pip-compile style lock."""
    out: list[tuple[str, str, list[str]]] = []
    for block in re.split(r"\n(?=[A-Za-z0-9])", text):
        match = re.match(r"([A-Za-z0-9_.-]+)==(\S+)", block)
        if match:
            out.append((match.group(1), match.group(2), re.findall(r"--hash=sha256:([0-9a-f]{64})", block)))
    return out


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def container(image: str, project: str) -> tuple[dict[str, object], dict[str, object]]:
    """The image as a CycloneDX container component (``repository:tag@sha256:hex``) and its dependency."""
    match = re.fullmatch(r"(?P<repo>[^@\s]+?)(?::(?P<tag>[^:/@]+))?@sha256:(?P<hex>[0-9a-f]{64})", image)
    if not match:
        raise ValueError(f"not an image reference with a sha256 digest: {image!r}")
    repo, tag, digest = match["repo"], match["tag"], match["hex"]
    purl = f"pkg:oci/{repo.rsplit('/', 1)[-1]}@sha256%3A{digest}?repository_url={repo}" + (f"&tag={tag}" if tag else "")
    component: dict[str, object] = {
        "type": "container",
        "bom-ref": purl,
        "name": repo,
        "version": f"sha256:{digest}",
        "purl": purl,
        "hashes": [{"alg": "SHA-256", "content": digest}],
    }
    return component, {"ref": purl, "dependsOn": [project]}


def sbom(version: str, lock_text: str, timestamp: datetime.datetime, image: str | None = None) -> dict[str, object]:
    packages = locked(lock_text)
    serial = uuid.uuid5(uuid.NAMESPACE_URL, f"{NAME}@{version}#{hashlib.sha256(lock_text.encode()).hexdigest()}")
    components = [
        {
            "type": "library",
            "bom-ref": f"pkg:pypi/{normalize(name)}@{pinned}",
            "name": normalize(name),
            "version": pinned,
            "purl": f"pkg:pypi/{normalize(name)}@{pinned}",
            "scope": "excluded" if normalize(name) in BUILD_ONLY else "required",
            "hashes": [{"alg": "SHA-256", "content": digest} for digest in digests],
        }
        for name, pinned, digests in sorted(packages, key=lambda p: normalize(p[0]))
    ]
    project = f"pkg:pypi/{NAME}@{version}"
    dependencies = [{"ref": project, "dependsOn": [c["bom-ref"] for c in components if c["scope"] == "required"]}]
    if image is not None:
        image_component, image_dependency = container(image, project)
        components.insert(0, image_component)
        dependencies.append(image_dependency)
    return {
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "serialNumber": f"urn:uuid:{serial}",
        "version": 1,
        "metadata": {
            "timestamp": timestamp.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "tools": {"components": [{"type": "application", "name": "hack/sbom.py"}]},
            "component": {
                "type": "application",
                "bom-ref": project,
                "name": NAME,
                "version": version,
                "purl": project,
                "licenses": [{"license": {"id": "Apache-2.0"}}],
            },
        },
        "components": components,
        "dependencies": dependencies,
    }


def main() -> int:
    if len(sys.argv) not in (2, 3):
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "0") or 0)
    timestamp = datetime.datetime.fromtimestamp(epoch, datetime.UTC)
    image = sys.argv[2] if len(sys.argv) == 3 else None
    json.dump(sbom(sys.argv[1], LOCK.read_text(), timestamp, image), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
