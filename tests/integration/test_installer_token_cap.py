"""Token renewal follows the lifetime the API server granted, on a real API server that caps
tokens (``--service-account-max-token-expiration=1h``, the lowest it accepts) below the 24 h
``tokenTTL`` asked for: the token is minted once and kept until 70 % of the granted hour has
passed. Before, the renewal point was computed from the 24 h asked for, which lies before the
token was even minted, so every pass minted a new one."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from facts_support import kube_for, run_step
from tests import support
from tests.support import platform_body

from tenant_platform.concerns.installer import manifests, step
from tenant_platform.core import conditions
from tenant_platform.kube.client import Kube
from tenant_platform.testing.controlplane import ControlPlane


@pytest.fixture(scope="module")
def capped() -> Iterator[Kube]:
    with ControlPlane(
        controller_manager=False, extra_apiserver_args=["--service-account-max-token-expiration=1h"]
    ) as cp:
        yield kube_for(cp)


@pytest.mark.cluster
def test_a_capped_token_is_kept_until_its_own_renewal_point(capped: Kube) -> None:
    kube = capped
    support.create_namespace(kube, "capped")
    body = platform_body("capped", "capped", installer={"kubeconfigSecret": {"enabled": True, "tokenTTL": "24h"}})
    now = datetime.now(UTC)
    first = run_step(step.STEP, kube, body, now=now)
    secret = kube.get("v1", "Secret", "platform-installer-kubeconfig", "capped")
    assert secret is not None
    notes = secret["metadata"]["annotations"]
    expires = conditions.parse_time(notes[manifests.ANNOTATION_TOKEN_EXPIRES])
    issued = conditions.parse_time(notes[manifests.ANNOTATION_TOKEN_ISSUED])
    assert expires is not None and issued is not None
    granted = expires - issued
    assert timedelta(minutes=59) <= granted <= timedelta(minutes=61), granted  # capped, not 24 h
    # Back at 70 % of the granted hour (42 min), not at once and not in 16.8 h.
    assert first.requeue_after is not None and 41 * 60 <= first.requeue_after <= 43 * 60, first.requeue_after

    # Passes before the renewal point keep the token (the Secret is not rewritten).
    for later in (timedelta(minutes=1), timedelta(minutes=40)):
        run_step(step.STEP, kube, body, now=now + later)
        again = kube.get("v1", "Secret", "platform-installer-kubeconfig", "capped")
        assert again is not None and again["data"] == secret["data"], f"re-minted after {later}"
        assert again["metadata"]["resourceVersion"] == secret["metadata"]["resourceVersion"]

    # Past it (43 min of 60): a new token.
    run_step(step.STEP, kube, body, now=now + timedelta(minutes=43))
    renewed = kube.get("v1", "Secret", "platform-installer-kubeconfig", "capped")
    assert renewed is not None and renewed["data"] != secret["data"]
