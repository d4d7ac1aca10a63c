"""Leader-election settings: read from the environment, and inconsistent timings refused."""

from __future__ import annotations

import pytest

from tenant_platform.config import Settings, load_settings


def test_the_environment_sets_the_election_timings() -> None:
    settings = load_settings(
        {
            "TENANT_PLATFORM_LEASE_DURATION": "30",
            "TENANT_PLATFORM_RENEW_DEADLINE": "20",
            "TENANT_PLATFORM_RETRY_PERIOD": "4",
            "TENANT_PLATFORM_IDENTITY": "pod-a",
        }
    )
    assert (settings.lease_duration, settings.renew_deadline, settings.retry_period) == (30, 20, 4)
    assert settings.identity == "pod-a"


@pytest.mark.parametrize(
    ("lease", "renew", "retry"),
    [
        (10, 10, 2),  # no margin: the old leader could still write when a standby takes over
        (10, 12, 2),  # renew deadline past the lease duration
        (15, 10, 10),  # retry as long as the deadline: one failed renewal loses the lease
        (15, 10, 0),  # no retry period
    ],
)
def test_inconsistent_timings_are_refused(lease: float, renew: float, retry: float) -> None:
    with pytest.raises(ValueError, match="retry_period < renew_deadline < lease_duration"):
        Settings(lease_duration=lease, renew_deadline=renew, retry_period=retry)
